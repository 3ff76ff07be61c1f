package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/verify"
	"github.com/prepml/prep/verify/verifytest"
)

// TestVerifyDeepAcceptsConvertsRows pins a fault: a jagged row convert
// accepted under --memory-limit M (a quarter of M in values) was refused
// by verify --deep under the same M, whose decoding share (M/4) gave the
// row bound. Row 3 holds 200,000 I64 values (1.6 MB): over the 1 MiB of
// a quarter of 2 MiB, within the 2 MiB of a quarter of 8 MiB. At 8 MiB
// both accept it; at 4 MiB both refuse it, verify --deep as a limit
// naming the tensor and the flag.
func TestVerifyDeepAcceptsConvertsRows(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	type row struct {
		ID int64   `parquet:"id"`
		V  []int64 `parquet:"v,list"`
	}
	rows := make([]row, 8)
	for i := range rows {
		n := i % 3
		if i == 3 {
			n = 200_000
		}
		rows[i] = row{ID: int64(i), V: make([]int64, n)}
		for k := range rows[i].V {
			rows[i].V[k] = int64(i*1_000_000 + k)
		}
	}
	pqfixture.Of(rows...).WriteFile(t, filepath.Join(src, "d.parquet"))
	pp := filepath.Join(dir, "plan.json")
	if code, _, errs := runCLI("plan", "--source", src, "--seed", "1", "--epochs", "1", "--global-batch", "4", "--world-size", "1", "-o", pp, "-q"); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
	spec := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(spec, []byte("tensors:\n  - {name: id, column: id, dtype: I64}\n  - {name: v, column: v, dtype: I64, list: {jagged: true}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if code, _, errs := runCLI("convert", "--plan", pp, "--spec", spec, "-o", out, "--memory-limit", "8MiB", "-q"); code != 0 {
		t.Fatalf("convert: exit %d: %s", code, errs)
	}
	code, stdout, errs := runCLI("verify", "--deep", out, "--memory-limit", "8MiB")
	if code != 0 || !strings.Contains(stdout, "0 findings") || !strings.Contains(stdout, "2 batches compared with the source") {
		t.Errorf("verify --deep --memory-limit 8MiB: exit %d\n%s%s", code, stdout, errs)
	}
	code, stdout, errs = runCLI("verify", "--deep", out, "--memory-limit", "4MiB", "--json")
	var rep verify.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("verify --json: %v (exit %d)\n%s%s", err, code, stdout, errs)
	}
	want := `d.parquet: column "v", row group 0, page 0, row 3, offset 141: size limit exceeded: row 3 holds more than 131072 slots (level entries), more than one row of jagged tensor "v" may hold under the memory limit (a quarter of it, at least 1 MiB, in values of the dtype); raise --memory-limit`
	ok := code == 1 && len(rep.Findings) == 2 // one per batch of the part holding row 3
	for k, f := range rep.Findings {
		ok = ok && f.Kind == verify.KindSourceUnreadable && *f.Batch == k && f.Message == want
	}
	if !ok {
		t.Errorf("verify --deep --memory-limit 4MiB: exit %d, findings\n%s\nwant one per batch with\n%s", code, verifytest.Lines(&rep), want)
	}
}

// derivedSpec derives every kind of tensor verify --deep checks on its own:
// a row mask and a jagged element mask (l), a fixed list's mask, element
// mask and lengths (lf), a list of lists' inner lengths (ll), and a padded
// string list's element mask (s).
const derivedSpec = `tensors:
  - {name: id, column: id, dtype: I64}
  - {name: l, column: l, dtype: I32, list: {jagged: true, element_fill: -1, element_mask: true}, nulls: {mask: true}}
  - {name: lf, column: l, dtype: I32, shape: [3], list: {pad: 0, truncate: true, lengths: true, element_fill: -1, element_mask: true}, nulls: {fill: 0, mask: true}}
  - {name: ll, column: ll, dtype: I32, list: {jagged: true}}
  - {name: s, column: s, dtype: U8, bytes: {mode: pad, max_len: 4, truncate: true}, list: {jagged: true, element_mask: true}}
`

// writeDerivedSource writes 24 rows: l an optional list of optional INT32
// (null every 7th row from 3, i%4 elements, element j null when (i+j)%3
// is 1), ll a list of i%3 lists of (i+j)%3 INT32, s a list of i%3+1
// optional strings (null when (i+j)%4 is 2).
func writeDerivedSource(t *testing.T, path string) {
	t.Helper()
	i32 := parquet.Leaf(parquet.Int32Type)
	sch := parquet.NewSchema("s", parquet.Group{
		"id": parquet.Leaf(parquet.Int64Type),
		"l":  parquet.Optional(parquet.List(parquet.Optional(i32))),
		"ll": parquet.List(parquet.List(i32)),
		"s":  parquet.List(parquet.Optional(parquet.String())),
	})
	col := map[string]int{}
	for i, p := range sch.Columns() {
		col[p[0]] = i
	}
	var rows []parquet.Row
	for i := range 24 {
		cols := make([][]parquet.Value, len(col))
		put := func(name string, v parquet.Value, rep, def int) {
			c := col[name]
			cols[c] = append(cols[c], v.Level(rep, def, c))
		}
		put("id", parquet.Int64Value(int64(i)), 0, 0)
		switch {
		case i%7 == 3:
			put("l", parquet.NullValue(), 0, 0)
		case i%4 == 0:
			put("l", parquet.NullValue(), 0, 1)
		default:
			for j := range i % 4 {
				if (i+j)%3 == 1 {
					put("l", parquet.NullValue(), min(j, 1), 2)
				} else {
					put("l", parquet.Int32Value(int32(i*10+j)), min(j, 1), 3)
				}
			}
		}
		if i%3 == 0 {
			put("ll", parquet.NullValue(), 0, 0)
		}
		for j := range i % 3 {
			rep := min(j, 1)
			if (i+j)%3 == 0 {
				put("ll", parquet.NullValue(), rep, 1)
			}
			for kk := range (i + j) % 3 {
				r := rep
				if kk > 0 {
					r = 2
				}
				put("ll", parquet.Int32Value(int32(i*100+j*10+kk)), r, 2)
			}
		}
		for j := range i%3 + 1 {
			if (i+j)%4 == 2 {
				put("s", parquet.NullValue(), min(j, 1), 1)
			} else {
				put("s", parquet.ByteArrayValue(fmt.Appendf(nil, "s%d-%d", i, j)), min(j, 1), 2)
			}
		}
		var row parquet.Row
		for _, c := range cols {
			row = append(row, c...)
		}
		rows = append(rows, row)
	}
	pqfixture.Raw(sch, rows...).WriteFile(t, path)
}

// convertDerived writes the source of writeDerivedSource, plans it as one
// shard (one epoch, one rank, batches of 8 in source order: slot i of
// batch k is row 8k+i) and converts it with derivedSpec.
func convertDerived(t *testing.T) (out string, m *shardfmt.Manifest) {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	writeDerivedSource(t, filepath.Join(src, "d.parquet"))
	pp := filepath.Join(dir, "plan.json")
	if code, _, errs := runCLI("plan", "--source", src, "--seed", "1", "--epochs", "1", "--global-batch", "8", "--world-size", "1", "--shuffle", "none", "-o", pp, "-q"); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
	spec := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(spec, []byte(derivedSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	out = filepath.Join(dir, "out")
	if code, _, errs := runCLI("convert", "--plan", pp, "--spec", spec, "-o", out, "-q"); code != 0 {
		t.Fatalf("convert: exit %d: %s", code, errs)
	}
	return out, deepManifest(t, out)
}

// echoSource is a verify.SampleSource (and JaggedSource) whose expected
// samples are the shard's own bytes, read when it is opened: the model of
// a materializer sharing a fault with convert, which the comparison with
// the source cannot see. Only the checks of derived tensors on their own
// can.
type echoSource struct {
	g       shardfmt.Geometry
	samples map[uint64][][]byte // id -> per tensor: its sample, or its values
}

func openEcho(t *testing.T, path string) verify.SourceOpener {
	return func(_ *plan.Plan, _ *shardfmt.Manifest, _ string, g shardfmt.Geometry, ts []shardfmt.TensorInfo) (verify.SampleSource, error) {
		r, err := shardfmt.Open(path)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		e := &echoSource{g: g, samples: map[uint64][][]byte{}}
		for k := range r.NumBatches() {
			blk, err := r.Block(k)
			if err != nil {
				return nil, err
			}
			ids, err := r.SampleIDs(k)
			if err != nil {
				return nil, err
			}
			for i, id := range ids {
				per := make([][]byte, len(ts))
				for x := range ts {
					n := g.SampleBytes[x]
					if !g.IsJagged(x) {
						per[x] = slices.Clone(blk[g.SlabOffset[x]+uint64(i)*n:][:n])
						continue
					}
					s, err := r.Jagged(k, blk, x)
					if err != nil {
						return nil, err
					}
					per[x] = slices.Clone(s.Values[uint64(s.Offset(i))*n : uint64(s.Offset(i+1))*n])
				}
				e.samples[id] = per
			}
		}
		return e, nil
	}
}

func (e *echoSource) FillBlock(_ context.Context, ids []uint64, block []byte) error {
	for x := range e.g.SampleBytes {
		if e.g.IsJagged(x) {
			continue
		}
		for i, id := range ids {
			copy(block[e.g.SlabOffset[x]+uint64(i)*e.g.SampleBytes[x]:], e.samples[id][x])
		}
	}
	return nil
}

func (e *echoSource) JaggedValues(_ context.Context, x int, ids []uint64) ([][]byte, error) {
	out := make([][]byte, len(ids))
	for i, id := range ids {
		out[i] = e.samples[id][x]
	}
	return out, nil
}

func (e *echoSource) Close() error { return nil }

// TestDeepChecksDerivedTensors corrupts each derived tensor of a shard in
// one sample (batch 1; the batch's CRC-32C, the shard's checksums and the
// manifest's digest rewritten, so that only --deep can tell) and requires
// a value_mismatch finding naming that tensor: from convert's
// materializer (compared by parts), and from a source that echoes the
// shard's own bytes (compared batch by batch), which models a fault
// convert and the materializer share and which only the checks of derived
// tensors on their own find. A corrupt offsets entry of l is found as l's
// values count by the comparison, and as l_element_mask's by the derived
// check.
func TestDeepChecksDerivedTensors(t *testing.T) {
	const k = 1 // batch 1: rows 8-15
	le := binary.LittleEndian
	// slab returns tensor name's index and its slab (fixed) or values (jagged) in block.
	type ctx struct {
		g     shardfmt.Geometry
		ts    []shardfmt.TensorInfo
		block []byte
	}
	index := func(c ctx, name string) int {
		x := slices.IndexFunc(c.ts, func(ti shardfmt.TensorInfo) bool { return ti.Name == name })
		if x < 0 {
			t.Fatalf("no tensor %q", name)
		}
		return x
	}
	fixed := func(c ctx, name string, slot int) []byte {
		x := index(c, name)
		n := c.g.SampleBytes[x]
		return c.block[c.g.SlabOffset[x]+uint64(slot)*n:][:n]
	}
	// jag returns the offsets slab of jagged tensor name and its values.
	jag := func(c ctx, name string) ([]byte, []byte) {
		x := index(c, name)
		offs := c.block[c.g.SlabOffset[x]:][:8*(c.g.BatchSize+1)]
		var counts []uint64
		for y := range c.ts {
			if c.g.IsJagged(y) {
				o := c.block[c.g.SlabOffset[y]:]
				counts = append(counts, le.Uint64(o[8*c.g.BatchSize:]))
			}
		}
		lay, err := c.g.BatchLayout(counts)
		if err != nil {
			t.Fatal(err)
		}
		return offs, c.block[lay.ValuesOffset[x]:]
	}
	// Batch 1 holds rows 8-15 (slot i: row 8+i). Row 9 (slot 1): l = [90]
	// (mask 1), lf = [90 0 0] of length 1 (element mask [1 0 0]), s one
	// present string; row 10 (slot 2): ll one inner list of one value, and
	// l null (mask 0, length 0).
	cases := []struct {
		name       string
		edit       func(c ctx)
		compared   string // the tensor the comparison with convert's materializer names
		derivedTen string // the tensor the derived check names
	}{
		{"row mask of a row with values", func(c ctx) { fixed(c, "l_mask", 1)[0] = 0 }, "l_mask", "l_mask"}, // row 9: 1 value
		{"element mask value", func(c ctx) {
			o, v := jag(c, "l_element_mask")
			v[le.Uint64(o[8*1:])] = 2 // row 9's first element
		}, "l_element_mask", "l_element_mask"},
		{"fixed mask value", func(c ctx) { fixed(c, "lf_mask", 1)[0] = 2 }, "lf_mask", "lf_mask"},
		{"fixed element mask past the length", func(c ctx) { fixed(c, "lf_element_mask", 1)[2] = 1 }, "lf_element_mask", "lf_element_mask"}, // row 9: length 1
		{"lengths", func(c ctx) { le.PutUint32(fixed(c, "lf_lengths", 2), math.MaxUint32) }, "lf_lengths", "lf_lengths"},
		{"inner lengths", func(c ctx) {
			o, v := jag(c, "ll_inner_lengths")
			at := le.Uint64(o[8*2:]) // row 10: 1 inner list of 2 values
			le.PutUint64(v[8*at:], le.Uint64(v[8*at:])+1)
		}, "ll_inner_lengths", "ll_inner_lengths"},
		{"padded string element mask", func(c ctx) {
			o, v := jag(c, "s_element_mask")
			v[le.Uint64(o[8*1:])] = 3
		}, "s_element_mask", "s_element_mask"},
		{"offsets", func(c ctx) {
			o, _ := jag(c, "l")
			le.PutUint64(o[8*2:], le.Uint64(o[8*2:])-1) // row 9 loses its last value to row 10
		}, "l", "l_element_mask"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, m := convertDerived(t)
			verifytest.RewriteShard(t, out, m, 0, func(b int, block []byte, ids []uint64, pads int) ([]byte, []uint64, int) {
				if b == k {
					g, err := shardfmt.NewGeometry(len(ids), m.Tensors)
					if err != nil {
						t.Fatal(err)
					}
					c.edit(ctx{g, m.Tensors, block})
				}
				return block, ids, pads
			})
			if rep := verifytest.Run(t, verify.Options{Dir: out}); !rep.OK {
				t.Fatalf("without --deep the corruption is seen:\n%s", verifytest.Lines(rep))
			}
			for _, s := range []struct {
				what   string
				src    verify.SourceOpener
				tensor string
			}{
				{"convert's materializer", verify.FeatureSource(nil, 0), c.compared},
				{"a source echoing the shard", openEcho(t, filepath.Join(out, m.Shards[0].Path)), c.derivedTen},
			} {
				rep := verifytest.Run(t, verify.Options{Dir: out, Deep: true, Source: s.src, MaxPerShard: 100})
				found := false
				for _, f := range rep.Findings {
					if f.Kind == verify.KindValueMismatch && f.Tensor == s.tensor && f.Batch != nil && *f.Batch == k {
						found = true
					}
				}
				if !found {
					t.Errorf("%s: no value_mismatch naming %q in batch %d:\n%s", s.what, s.tensor, k, verifytest.Lines(rep))
				}
			}
		})
	}
	// The pad flags live in the batch table, checked against the plan
	// with or without --deep: batch 1 flagged as holding a pad sample.
	out, m := convertDerived(t)
	verifytest.RewriteShard(t, out, m, 0, func(b int, block []byte, ids []uint64, pads int) ([]byte, []uint64, int) {
		if b == k {
			pads++
		}
		return block, ids, pads
	})
	for _, deep := range []bool{false, true} {
		rep := verifytest.Run(t, verify.Options{Dir: out, Deep: deep, Source: verify.FeatureSource(nil, 0), MaxPerShard: 100})
		if len(rep.Findings) != 1 || rep.Findings[0].Kind != verify.KindPlanMismatch || rep.Findings[0].What != "pads" || *rep.Findings[0].Batch != k {
			t.Errorf("pad flags of batch %d changed, deep %v: findings\n%s", k, deep, verifytest.Lines(rep))
		}
	}
}

func deepManifest(t *testing.T, dir string) *shardfmt.Manifest {
	t.Helper()
	m, err := shardfmt.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
