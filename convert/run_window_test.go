package convert

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/pqread"
)

// sliceRow is a source row for the row slice tests: a fixed-length list
// (vec), a ragged one (emb), plain and dictionary-encoded strings and an
// optional value.
type sliceRow struct {
	ID    int64     `parquet:"id"`
	Vec   []float32 `parquet:"vec,list"`
	Emb   []float32 `parquet:"emb,list"`
	Name  string    `parquet:"name"`
	Label string    `parquet:"label,dict"`
	Opt   *int32    `parquet:"opt,optional"`
}

// makeSliceRow returns row id; ids in nulls have a null opt, ids in short
// a vec of 2 values instead of 3.
func makeSliceRow(id int64, nulls, short map[int64]bool) sliceRow {
	r := sliceRow{ID: id, Vec: []float32{float32(id), float32(id) + 0.25, -float32(id)},
		Name: fmt.Sprintf("n%d", id*id%100003), Label: fmt.Sprintf("L%d", id%11)}
	if short[id] {
		r.Vec = r.Vec[:2]
	}
	for k := int64(0); k < id%6; k++ {
		r.Emb = append(r.Emb, float32(id*10+k))
	}
	if !nulls[id] {
		v := int32(id * 3)
		r.Opt = &v
	}
	return r
}

// writeSliceRows writes rows [first, first+n) of makeSliceRow to path in
// row groups of rowsPerGroup.
func writeSliceRows(t testing.TB, path string, first, n, rowsPerGroup int64, nulls, short map[int64]bool) {
	t.Helper()
	var rows []sliceRow
	for id := first; id < first+n; id++ {
		rows = append(rows, makeSliceRow(id, nulls, short))
	}
	pqfixture.Of(rows...).Codec(&parquet.Snappy).RowGroupRows(rowsPerGroup).WriteFile(t, path)
}

// countDecodes counts column chunk decodes per task sequence number for the
// rest of the test. maxPerTask returns the most decodes of one task: above
// 1 only when a row group was assembled in slices.
func countDecodes(t *testing.T) (maxPerTask func() int, reset func()) {
	var mu sync.Mutex
	n := map[int]int{}
	feature.BeforeDecode = func(seq int, _ context.Context) {
		mu.Lock()
		n[seq]++
		mu.Unlock()
	}
	t.Cleanup(func() { feature.BeforeDecode = nil })
	maxPerTask = func() int {
		mu.Lock()
		defer mu.Unlock()
		m := 0
		for _, c := range n {
			m = max(m, c)
		}
		return m
	}
	reset = func() {
		mu.Lock()
		clear(n)
		mu.Unlock()
	}
	return maxPerTask, reset
}

const sliceSpecYAML = `
tensors:
  - {name: id, columns: [id, id], dtype: I64}
  - {name: vec, column: vec, dtype: F32, shape: [3]}
  - name: emb
    column: emb
    dtype: F16
    shape: [4]
    list: {pad: -1, truncate: true, lengths: true, element_mask: true}
  - name: name
    column: name
    dtype: U8
    bytes: {mode: pad, max_len: 4, truncate: true, lengths: true}
  - {name: label, column: label, dtype: I64, bytes: {mode: hash, buckets: 97}}
  - {name: name_hash, column: name, dtype: I64, bytes: {mode: hash, buckets: 1000003}}
  - {name: opt, column: opt, dtype: I32, nulls: {fill: -7, mask: true}}
`

// TestSlicedRowGroupsMatchWhole converts the same plan and spec with a
// memory limit that makes every row group be assembled in row slices and
// with one that keeps them whole, for all shards and for subsets of epochs
// and ranks, with staging in memory (the limit is the staging size) and
// spilled (limits far below it), and requires byte-identical shards.
func TestSlicedRowGroupsMatchWhole(t *testing.T) {
	src := t.TempDir()
	nulls := map[int64]bool{}
	for id := int64(0); id < 2600; id += 7 {
		nulls[id] = true
	}
	writeSliceRows(t, filepath.Join(src, "part-0.parquet"), 0, 2000, 1000, nulls, nil)
	writeSliceRows(t, filepath.Join(src, "part-1.parquet"), 2000, 600, 256, nulls, nil)
	p := featuretest.MakePlan(t, src, plan.Config{Seed: 5, Epochs: 2, GlobalBatch: 96, WorldSize: 3, Workers: 2, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad})
	spec, err := feature.ParseSpec([]byte(sliceSpecYAML), "features.yaml")
	if err != nil {
		t.Fatal(err)
	}
	decodes, reset := countDecodes(t)
	for _, sub := range []struct{ epochs, ranks []int }{{nil, nil}, {[]int{1}, []int{0, 2}}, {[]int{0}, []int{1}}} {
		ref := filepath.Join(t.TempDir(), "whole")
		reset()
		whole, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: ref, Jobs: 2, Epochs: sub.epochs, Ranks: sub.ranks})
		if err != nil {
			t.Fatal(err)
		}
		if n := decodes(); n != 1 || whole.SpillBytes != 0 {
			t.Fatalf("%v: reference run decoded a column chunk %d times and spilled %d bytes", sub, n, whole.SpillBytes)
		}
		want := snapshot(t, ref)
		for _, limit := range []int64{2 * whole.StagingBytes, 4 << 10, 1} {
			for _, jobs := range []int{1, 2} {
				name := fmt.Sprintf("epochs %v ranks %v, limit %d, jobs %d", sub.epochs, sub.ranks, limit, jobs)
				out := filepath.Join(t.TempDir(), "sliced")
				reset()
				sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: jobs, MemoryLimit: limit, Epochs: sub.epochs, Ranks: sub.ranks})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if spilled := sum.SpillBytes != 0; spilled != (limit/2 < whole.StagingBytes) {
					t.Fatalf("%s: spilled %d bytes of %d bytes of staging", name, sum.SpillBytes, whole.StagingBytes)
				}
				if n := decodes(); n < 3 {
					t.Fatalf("%s: a column chunk decoded at most %d times: row groups were not sliced", name, n)
				}
				if snapshot(t, out) != want {
					t.Fatalf("%s: output differs from the whole row group output", name)
				}
			}
		}
	}
}

// TestSlicedRowGroupErrorsMatchWhole: a value error in a row group
// assembled in slices names the same file, column, row group and row (the
// row within the row group, not within its slice) and gives the same counts
// over the column chunk as when the row group is decoded whole, also when
// it has a single column chunk; with errors in two columns, the one reported is the earliest column in task order,
// even when the other's bad row comes first.
func TestSlicedRowGroupErrorsMatchWhole(t *testing.T) {
	src := t.TempDir()
	nulls := map[int64]bool{1700: true, 1950: true}
	short := map[int64]bool{1300: true, 1900: true}
	writeSliceRows(t, filepath.Join(src, "part-0.parquet"), 0, 2000, 1000, nulls, short)
	writeSliceRows(t, filepath.Join(src, "part-1.parquet"), 2000, 100, 100, nil, nil)
	p := featuretest.MakePlan(t, src, plan.Config{Seed: 5, Epochs: 1, GlobalBatch: 50, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad})
	const (
		id      = "{name: id, columns: [id, id], dtype: I64}"
		opt     = "{name: opt, column: opt, dtype: I32}"
		vec     = "{name: vec, column: vec, dtype: F32, shape: [3]}"
		nullErr = `part-0.parquet: column "opt", row group 1, row 700: null value (2 nulls in this column chunk; set nulls.fill to replace them)`
		lenErr  = `part-0.parquet: column "vec", row group 1, row 300: list has length 2, not 3 (2 rows of this column chunk have another length; keep every length with list: {jagged: true} (a jagged tensor), or pad and truncate to one length with list.pad and list.truncate)`
	)
	decodes, reset := countDecodes(t)
	for _, tc := range []struct{ tensors, want string }{
		{opt, nullErr}, // a row group of one column chunk is sliced too
		{vec, lenErr},
		{id + ", " + opt, nullErr},
		{id + ", " + vec, lenErr},
		{id + ", " + opt + ", " + vec, nullErr},
		{id + ", " + vec + ", " + opt, lenErr},
	} {
		spec, err := feature.ParseSpec([]byte("tensors: ["+tc.tensors+"]"), "spec.yaml")
		if err != nil {
			t.Fatal(err)
		}
		reset()
		_, err = Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "whole"), Jobs: 2})
		if err == nil || err.Error() != tc.want || decodes() != 1 {
			t.Fatalf("%s: whole row groups: err = %v (a column chunk decoded up to %d times), want %s", tc.tensors, err, decodes(), tc.want)
		}
		for _, jobs := range []int{1, 2} {
			reset()
			_, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "sliced"), Jobs: jobs, MemoryLimit: 4 << 10})
			if err == nil || err.Error() != tc.want {
				t.Errorf("%s: sliced, jobs %d: err = %v, want %s", tc.tensors, jobs, err, tc.want)
			}
			if decodes() < 3 {
				t.Errorf("%s: sliced, jobs %d: row groups were not sliced", tc.tensors, jobs)
			}
		}
	}
}

// TestSlicedRowGroupDecodeErrorMatchesWhole: a damaged page header in column
// x of row group 1 (case B19) fails a run whose row groups are sliced with
// the error of a run that decodes them whole.
func TestSlicedRowGroupDecodeErrorMatchesWhole(t *testing.T) {
	p := featuretest.CaseSource(t, "B19-corrupt-files", "bad_page_header_rg1_x.parquet")
	spec, err := feature.ParseSpec([]byte("tensors: [{name: id, columns: [id, id], dtype: I64}, {name: x, column: x, dtype: F32}]"), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	decodes, reset := countDecodes(t)
	_, want := Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "whole"), Jobs: 2})
	if want == nil || !strings.Contains(want.Error(), `column "x", row group 1`) || decodes() != 1 {
		t.Fatalf("whole row groups: err = %v (a column chunk decoded up to %d times), want one naming column x of row group 1", want, decodes())
	}
	for _, jobs := range []int{1, 2} {
		reset()
		_, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "sliced"), Jobs: jobs, MemoryLimit: 1})
		if err == nil || err.Error() != want.Error() || !errors.Is(err, pqread.ErrCorrupt) {
			t.Errorf("sliced, jobs %d: err = %v, want %v", jobs, err, want)
		}
		if decodes() < 3 {
			t.Errorf("sliced, jobs %d: row groups were not sliced", jobs)
		}
	}
}

// Row groups read in row windows (schedule.go: planWindows; window.go: assembleWindows,
// assembleColumns) against the same runs with row groups decoded whole:
// faults found in the sliced path the windows replace, and every column
// shape and value error it treated apart.

// optIntRow is a row of one optional INT64 column.
type optIntRow struct {
	V *int64 `parquet:"v,optional"`
}

// TestSlicedErrorPiecesSizedByLimit pins a fault: firstErrorSliced cut a
// column chunk into pieces of the largest slice of the row group rather
// than of the rows the memory limit allows. When the needed rows of a
// sliced row group are sparse (here 2 of its 10,000 rows, for one rank of a
// wide plan), every slice is one row long, so a failing run re-decoded the
// column chunk 10,000 times, each time from its first page: quadratic in
// the row group's rows (100,000 rows take 12 s where the whole run takes
// milliseconds; a million-row row group effectively hangs). A 64 KiB limit
// allows about 1,800 rows of this column per piece, so a handful of decodes
// suffice. The error itself matches the whole run's. (Windows read the
// rows no window needs in pieces of that size too.)
func TestSlicedErrorPiecesSizedByLimit(t *testing.T) {
	const rows = 10000
	src := t.TempDir()
	data := make([]optIntRow, rows)
	for i := range data {
		if i%2 == 0 { // every other row null: a needed row may be null
			v := int64(i)
			data[i].V = &v
		}
	}
	pqfixture.Of(data...).WriteFile(t, filepath.Join(src, "a.parquet"))
	// 5,000 ranks, batch 1 each, one epoch of 2 steps: rank 0 needs 2 rows.
	p := featuretest.MakePlan(t, src, plan.Config{Seed: 9, Epochs: 1, GlobalBatch: rows / 2, WorldSize: rows / 2, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderDrop})
	spec, err := feature.ParseSpec([]byte(`tensors: [{name: v, column: v, dtype: I64}]`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	decodes, reset := countDecodes(t)
	var errs [2]error
	var n [2]int
	for i, limit := range []int64{0, 64 << 10} {
		reset()
		_, errs[i] = Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "out"), Jobs: 1, MemoryLimit: limit, Ranks: []int{0}})
		n[i] = decodes()
	}
	if errs[0] == nil || errs[1] == nil || errs[0].Error() != errs[1].Error() {
		t.Fatalf("errors differ: whole %v, sliced %v", errs[0], errs[1])
	}
	if n[0] != 1 {
		t.Fatalf("the whole run decoded the column chunk %d times", n[0])
	}
	// rows / (limit/2 / rowCost) pieces, plus the slices: about 10.
	if n[1] > 50 {
		t.Errorf("sliced run decoded the %d-row column chunk %d times to report its error (whole run: once)", rows, n[1])
	}
}

// TestSlicedDecodeErrorOrderWithinChunk pins a fault: firstErrorSliced
// returned a decode error from a piece that stopped before the column
// chunk's end, while the whole read reports the
// first error of the page decode pass over the whole chunk. A list column
// with a "null or empty list marker inside a list" at row 5 (an error
// pqread finds when it assembles the rows read) and a damaged last page
// (page checksum mismatch, found while reading pages): ReadColumn reads
// every page first and reports the checksum; a sliced run's first piece
// read only the first pages, assembled them and reported the marker. A
// piece that fails now reads on to the chunk's end.
func TestSlicedDecodeErrorOrderWithinChunk(t *testing.T) {
	src := t.TempDir()
	path := filepath.Join(src, "a.parquet")
	sch := parquet.NewSchema("schema", parquet.Group{
		"emb": parquet.Optional(parquet.List(parquet.Optional(parquet.Leaf(parquet.FloatType)))),
	})
	var rows []parquet.Row
	for i := range 2000 {
		row := parquet.Row{parquet.FloatValue(float32(i)).Level(0, 3, 0), parquet.FloatValue(1).Level(1, 3, 0)}
		if i == 5 { // an empty-list marker (definition level 1) continuing a list
			row[1] = parquet.NullValue().Level(1, 1, 0)
		}
		rows = append(rows, row)
	}
	pqfixture.Raw(sch, rows...).PageBytes(512).Codec(&parquet.Snappy).WriteFile(t, path)
	// Flip a byte near the end of the column chunk: in the last page's body.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	md := pf.Metadata().RowGroups[0].Columns[0].MetaData
	start := md.DataPageOffset
	if md.DictionaryPageOffset > 0 && md.DictionaryPageOffset < start {
		start = md.DictionaryPageOffset
	}
	b[start+md.TotalCompressedSize-3] ^= 0x55
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	p := featuretest.MakePlan(t, src, plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 1, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderPartial})
	spec, err := feature.ParseSpec([]byte(`tensors: [{name: emb, column: emb, dtype: F32, shape: [2], list: {pad: 0, truncate: true}}]`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, want := Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "whole"), Jobs: 1})
	if want == nil {
		t.Fatal("whole run: no error")
	}
	for _, limit := range []int64{1, 64 << 10} {
		_, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "sliced"), Jobs: 1, MemoryLimit: limit})
		if err == nil || err.Error() != want.Error() {
			t.Errorf("limit %d: sliced run error\n  %v\nwhole run error\n  %v", limit, err, want)
		}
	}
}

// longRow has a long list and a long string per row.
type longRow struct {
	Emb []float32 `parquet:"emb,list"`
	S   string    `parquet:"s"`
}

// shapesSchema is a row group of every shape the sliced path treats apart:
// stacked scalars, an optional list of optional elements (null and empty
// lists, null elements), a required list, dictionary and plain optional
// strings, optional and required doubles. With delta set, the columns use
// DELTA_BINARY_PACKED, BYTE_STREAM_SPLIT, DELTA_LENGTH_BYTE_ARRAY and
// DELTA_BYTE_ARRAY.
func shapesSchema(delta bool) *parquet.Schema {
	float := parquet.Node(parquet.Leaf(parquet.FloatType))
	i64 := parquet.Node(parquet.Leaf(parquet.Int64Type))
	dbl := parquet.Node(parquet.Leaf(parquet.DoubleType))
	s := parquet.Encoded(parquet.String(), &parquet.RLEDictionary)
	p := parquet.Node(parquet.String())
	if delta {
		float = parquet.Encoded(float, &parquet.ByteStreamSplit)
		i64 = parquet.Encoded(i64, &parquet.DeltaBinaryPacked)
		dbl = parquet.Encoded(dbl, &parquet.ByteStreamSplit)
		s = parquet.Encoded(parquet.String(), &parquet.DeltaLengthByteArray)
		p = parquet.Encoded(parquet.String(), &parquet.DeltaByteArray)
	}
	return parquet.NewSchema("schema", parquet.Group{
		"id":  i64,
		"big": i64,
		"emb": parquet.Optional(parquet.List(parquet.Optional(float))),
		"vec": parquet.List(parquet.Leaf(parquet.FloatType)),
		"s":   parquet.Optional(s),
		"p":   parquet.Optional(p),
		"x":   parquet.Optional(dbl),
		"y":   parquet.Leaf(parquet.DoubleType),
	})
}

// shapesData says what row id holds; nil functions take defaults.
type shapesData struct {
	nullX  func(id int64) bool
	yVal   func(id int64) float64
	bigVal func(id int64) int64
	vecLen func(id int64) int
}

// writeShapes writes rows [first, first+n) of shapesSchema to path.
func writeShapes(t testing.TB, path string, delta bool, first, n int64, d shapesData, opts ...parquet.WriterOption) {
	t.Helper()
	if d.nullX == nil {
		d.nullX = func(id int64) bool { return id%8 == 1 }
	}
	if d.yVal == nil {
		d.yVal = func(id int64) float64 { return float64(id) + 0.25 }
	}
	if d.bigVal == nil {
		d.bigVal = func(id int64) int64 { return id * 1000 }
	}
	if d.vecLen == nil {
		d.vecLen = func(int64) int { return 3 }
	}
	sch := shapesSchema(delta)
	idx := map[string]int{}
	for i, p := range sch.Columns() {
		idx[p[0]] = i
	}
	var rows []parquet.Row
	for id := first; id < first+n; id++ {
		cols := make([][]parquet.Value, len(idx))
		set := func(name string, v ...parquet.Value) {
			c := idx[name]
			for _, x := range v {
				cols[c] = append(cols[c], x.Level(x.RepetitionLevel(), x.DefinitionLevel(), c))
			}
		}
		opt := func(name string, null bool, v parquet.Value) {
			if null {
				set(name, parquet.NullValue().Level(0, 0, 0))
			} else {
				set(name, v.Level(0, 1, 0))
			}
		}
		set("id", parquet.Int64Value(id).Level(0, 0, 0))
		set("big", parquet.Int64Value(d.bigVal(id)).Level(0, 0, 0))
		set("y", parquet.DoubleValue(d.yVal(id)).Level(0, 0, 0))
		opt("x", d.nullX(id), parquet.DoubleValue(float64(id)*0.5))
		opt("s", id%11 == 2, parquet.ByteArrayValue(fmt.Appendf(nil, "s%d", id%23)))
		opt("p", id%9 == 4, parquet.ByteArrayValue(fmt.Appendf(nil, "p%d-%x", id, id*id)))
		switch m := int(id % 7); {
		case id%13 == 5:
			set("emb", parquet.NullValue().Level(0, 0, 0)) // null list
		case id%17 == 3 || m == 0:
			set("emb", parquet.NullValue().Level(0, 1, 0)) // empty list
		default:
			for k := range m {
				rep := min(k, 1)
				if id%19 == 7 && k == 1 {
					set("emb", parquet.NullValue().Level(rep, 2, 0)) // null element
				} else {
					set("emb", parquet.FloatValue(float32(id)+float32(k)/8).Level(rep, 3, 0))
				}
			}
		}
		if m := d.vecLen(id); m == 0 {
			set("vec", parquet.NullValue().Level(0, 0, 0))
		} else {
			for k := range m {
				set("vec", parquet.FloatValue(float32(id*3+int64(k))).Level(min(k, 1), 1, 0))
			}
		}
		var row parquet.Row
		for _, c := range cols {
			row = append(row, c...)
		}
		rows = append(rows, row)
	}
	pqfixture.Raw(sch, rows...).Option(opts...).WriteFile(t, path)
}

// compareSliced runs p and spec with row groups whole (the default limit) and
// at each limit and Jobs, and requires the same shards, or the same error.
func compareSliced(t *testing.T, p *plan.Plan, specYAML string, epochs, ranks []int, limits []int64, jobs []int) {
	t.Helper()
	spec, err := feature.ParseSpec([]byte(specYAML), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	decodes, reset := countDecodes(t)
	ref := filepath.Join(t.TempDir(), "whole")
	reset()
	_, werr := Run(context.Background(), Options{Plan: p, Spec: spec, Output: ref, Jobs: 2, Epochs: epochs, Ranks: ranks})
	t.Logf("whole: %v", werr)
	if decodes() != 1 {
		t.Fatalf("the reference run sliced a row group")
	}
	want := ""
	if werr == nil {
		want = snapshot(t, ref)
	}
	for _, limit := range limits {
		for _, j := range jobs {
			out := filepath.Join(t.TempDir(), "sliced")
			reset()
			_, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: j, MemoryLimit: limit, Epochs: epochs, Ranks: ranks})
			name := fmt.Sprintf("epochs %v ranks %v limit %d jobs %d", epochs, ranks, limit, j)
			switch {
			case (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error():
				t.Errorf("%s: error\n  %v\nwhole run\n  %v", name, err, werr)
			case err == nil && snapshot(t, out) != want:
				t.Errorf("%s: output differs from the whole row group output", name)
			}
			if ranks == nil && limit == 1 && decodes() < 2 {
				t.Errorf("%s: no row group was sliced", name)
			}
		}
	}
}

const shapesSpecYAML = `
tensors:
  - {name: id, columns: [id, big], dtype: I64}
  - name: emb
    column: emb
    dtype: F32
    shape: [4]
    list: {pad: -1, truncate: true, lengths: true, element_fill: 9, element_mask: true}
    nulls: {fill: -2, mask: true}
  - {name: vec, column: vec, dtype: F16, shape: [3]}
  - {name: s, column: s, dtype: I64, bytes: {mode: hash, buckets: 101}, nulls: {fill: -1, mask: true}}
  - {name: sp, column: s, dtype: U8, bytes: {mode: pad, max_len: 3, truncate: true, lengths: true}, nulls: {fill: 0}}
  - {name: p, column: p, dtype: U8, bytes: {mode: pad, max_len: 6, truncate: true, lengths: true}, nulls: {fill: 0, mask: true}}
  - {name: ph, column: p, dtype: I64, bytes: {mode: hash, buckets: 1000003}, nulls: {fill: 5}}
  - {name: xy, columns: [x, y], dtype: F32, nulls: {fill: 1.5, mask: true}}
`

// TestSlicedShapesMatchWhole: null, empty and continuing lists, null
// elements, strings hashed and padded from dictionary pages that fall back
// to PLAIN part way (DictionaryMaxBytes), DATA_PAGE_V2, delta and
// byte-stream-split encodings, tiny pages, two files of different row
// group sizes, under global, partitioned and blocks plans, subsets of
// epochs and ranks and a plan needing 2 rows per row group: sliced runs
// write the shards of whole runs.
func TestSlicedShapesMatchWhole(t *testing.T) {
	for _, v := range []struct {
		name  string
		delta bool
		opts  []parquet.WriterOption
	}{
		{"v1 dict fallback", false, []parquet.WriterOption{parquet.PageBufferSize(256), parquet.DictionaryMaxBytes(100), parquet.Compression(&parquet.Snappy)}},
		{"v2 dict fallback", false, []parquet.WriterOption{parquet.PageBufferSize(512), parquet.DictionaryMaxBytes(64), parquet.DataPageVersion(2), parquet.Compression(&parquet.Zstd)}},
		{"v2 delta", true, []parquet.WriterOption{parquet.PageBufferSize(300), parquet.DataPageVersion(2)}},
	} {
		t.Run(v.name, func(t *testing.T) {
			src := t.TempDir()
			writeShapes(t, filepath.Join(src, "a.parquet"), v.delta, 0, 700, shapesData{}, append(v.opts, parquet.MaxRowsPerRowGroup(300))...)
			writeShapes(t, filepath.Join(src, "b.parquet"), v.delta, 700, 250, shapesData{}, append(v.opts, parquet.MaxRowsPerRowGroup(1000))...)
			p := featuretest.MakePlan(t, src, plan.Config{Seed: 9, Epochs: 2, GlobalBatch: 40, WorldSize: 4, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad})
			compareSliced(t, p, shapesSpecYAML, nil, nil, []int64{1, 4 << 10, 64 << 10}, []int{1, 2})
			compareSliced(t, p, shapesSpecYAML, []int{1}, []int{3}, []int64{4 << 10}, []int{2})
			for _, cfg := range []plan.Config{
				{Seed: 3, Epochs: 1, GlobalBatch: 12, WorldSize: 3, Workers: 2, Shuffle: plan.ShufflePartitioned, Remainder: plan.RemainderPad},
				{Seed: 4, Epochs: 1, GlobalBatch: 30, WorldSize: 3, Workers: 1, Shuffle: plan.ShuffleBlocks, Window: 2, Remainder: plan.RemainderPartial},
				{Seed: 5, Epochs: 1, GlobalBatch: 475, WorldSize: 475, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderDrop},
			} {
				compareSliced(t, featuretest.MakePlan(t, src, cfg), shapesSpecYAML, nil, []int{1}, []int64{4 << 10}, []int{2})
			}
		})
	}
}

// TestSlicedValueErrorsMatchWhole: value errors (a null without fill in
// the second column of a stacked tensor, NaN under nan.policy error, an
// INT64 too large for I32, an F16 overflow under cast.overflow error, list
// lengths, null list elements, null lists, a padded string too long, a
// string over max_value_bytes) placed in the first, a middle and the last
// slice, and in a second file, give a sliced run the whole run's error,
// counts over the column chunk included.
func TestSlicedValueErrorsMatchWhole(t *testing.T) {
	at := func(ids ...int64) func(int64) bool {
		return func(id int64) bool {
			for _, x := range ids {
				if x == id {
					return true
				}
			}
			return false
		}
	}
	none := func(int64) bool { return false }
	for _, c := range []struct {
		name string
		data shapesData
		spec string
	}{
		{"null second column", shapesData{nullX: at(650, 900)}, `tensors: [{name: xy, columns: [y, x], dtype: F32}]`},
		{"null first slice", shapesData{nullX: at(3, 900)}, `tensors: [{name: xy, columns: [y, x], dtype: F32}]`},
		{"nan", shapesData{nullX: none, yVal: func(id int64) float64 {
			if id == 333 || id == 599 {
				return math.NaN()
			}
			return 1
		}}, `tensors: [{name: xy, columns: [x, y], dtype: F32, nan: {policy: error}}]`},
		{"nan after a null, in an earlier column", shapesData{nullX: at(310), yVal: func(id int64) float64 {
			if id == 333 {
				return math.NaN()
			}
			return 1
		}}, `tensors: [{name: xy, columns: [y, x], dtype: F32, nan: {policy: error}}]`},
		{"narrowing", shapesData{bigVal: func(id int64) int64 {
			if id == 555 || id == 599 {
				return 1 << 40
			}
			return id
		}}, `tensors: [{name: id, column: id, dtype: I64}, {name: b, column: big, dtype: I32}]`},
		{"f16 overflow", shapesData{yVal: func(id int64) float64 {
			if id == 299 {
				return 1e9
			}
			return 1
		}}, `tensors: [{name: y, column: y, dtype: F16, cast: {overflow: error}}]`},
		{"list length", shapesData{vecLen: func(id int64) int {
			switch id {
			case 10, 280, 281:
				return 2
			case 150:
				return 0
			case 290:
				return 5
			}
			return 3
		}}, `tensors: [{name: vec, column: vec, dtype: F32, shape: [3]}]`},
		{"null element", shapesData{}, `tensors: [{name: emb, column: emb, dtype: F32, shape: [4], list: {pad: 0, truncate: true}, nulls: {fill: 0}}]`},
		{"null list", shapesData{}, `tensors: [{name: emb, column: emb, dtype: F32, shape: [4], list: {pad: 0, truncate: true, element_fill: 1}}]`},
		{"ragged list", shapesData{}, `tensors: [{name: emb, column: emb, dtype: F32, shape: [4], list: {element_fill: 1}, nulls: {fill: 0}}]`},
		{"padded string too long", shapesData{}, `tensors: [{name: p, column: p, dtype: U8, bytes: {mode: pad, max_len: 7}, nulls: {fill: 0}}]`},
		{"string over max_value_bytes", shapesData{}, `tensors: [{name: s, column: s, dtype: I64, bytes: {mode: hash, buckets: 7}, nulls: {fill: 0}}, {name: p, column: p, dtype: I64, bytes: {mode: hash, buckets: 7}, nulls: {fill: 0}, max_value_bytes: 8}]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := t.TempDir()
			opts := []parquet.WriterOption{parquet.PageBufferSize(256), parquet.DictionaryMaxBytes(60), parquet.DataPageVersion(2)}
			writeShapes(t, filepath.Join(src, "a.parquet"), false, 0, 600, c.data, append(opts, parquet.MaxRowsPerRowGroup(300))...)
			writeShapes(t, filepath.Join(src, "b.parquet"), false, 600, 400, c.data, append(opts, parquet.MaxRowsPerRowGroup(1000))...)
			p := featuretest.MakePlan(t, src, plan.Config{Seed: 9, Epochs: 1, GlobalBatch: 1, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderPartial})
			compareSliced(t, p, c.spec, nil, nil, []int64{1, 4 << 10}, []int{1, 2})
		})
	}
}

// Tests of windowed row groups with several workers (decode.go: work,
// admission of one window per row group): faults found against the
// sliced path, and passing coverage of Jobs, progress and cancellation.

// TestSlicedJobsProgressMatchWhole converts with Jobs 1, 2 and 4 under
// limits that slice every row group (slices of one and of a few rows, run
// by several workers at once), spilled and not: shards byte-identical to
// the whole run's, and the decode progress summing to the needed rows
// announced by OnStage.
func TestSlicedJobsProgressMatchWhole(t *testing.T) {
	src := t.TempDir()
	nulls := map[int64]bool{}
	for id := int64(0); id < 1200; id += 5 {
		nulls[id] = true
	}
	writeSliceRows(t, filepath.Join(src, "part-0.parquet"), 0, 900, 450, nulls, nil)
	writeSliceRows(t, filepath.Join(src, "part-1.parquet"), 900, 300, 300, nulls, nil)
	p := featuretest.MakePlan(t, src, plan.Config{Seed: 3, Epochs: 1, GlobalBatch: 60, WorldSize: 2, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad})
	spec, err := feature.ParseSpec([]byte(sliceSpecYAML), "features.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ref := filepath.Join(t.TempDir(), "whole")
	whole, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: ref, Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := snapshot(t, ref)
	decodes, reset := countDecodes(t)
	for _, limit := range []int64{whole.StagingBytes, 16 << 10, 1} {
		for _, jobs := range []int{1, 2, 4} {
			name := fmt.Sprintf("limit %d jobs %d", limit, jobs)
			var total, done atomic.Int64
			out := filepath.Join(t.TempDir(), "sliced")
			reset()
			_, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: jobs, MemoryLimit: limit,
				OnStage: func(stage string, rows, _ int64) {
					if stage == StageDecode {
						total.Store(rows)
					}
				},
				Progress: func(stage string, rows, _ int64) {
					if stage == StageDecode {
						done.Add(rows)
					}
				}})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if decodes() < 3 {
				t.Fatalf("%s: not sliced", name)
			}
			if snapshot(t, out) != want {
				t.Errorf("%s: output differs from the whole run's", name)
			}
			if done.Load() != total.Load() || total.Load() == 0 {
				t.Errorf("%s: decode progress %d rows, OnStage announced %d", name, done.Load(), total.Load())
			}
		}
	}
}

// TestSlicedCancelPrompt cancels runs whose row groups are sliced (Jobs 1,
// 2, 4) at the 5th slice decode: Run returns context.Canceled promptly,
// leaves no shard, temporary or lock behind, and its goroutines end.
func TestSlicedCancelPrompt(t *testing.T) {
	src := t.TempDir()
	writeSliceRows(t, filepath.Join(src, "part-0.parquet"), 0, 2000, 1000, nil, nil)
	p := featuretest.MakePlan(t, src, plan.Config{Seed: 3, Epochs: 1, GlobalBatch: 50, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad})
	spec, err := feature.ParseSpec([]byte(sliceSpecYAML), "features.yaml")
	if err != nil {
		t.Fatal(err)
	}
	base := runtime.NumGoroutine()
	for _, jobs := range []int{1, 2, 4} {
		ctx, cancel := context.WithCancel(context.Background())
		var n atomic.Int32
		var cancelled atomic.Int64
		feature.BeforeDecode = func(seq int, _ context.Context) {
			if n.Add(1) == 5 {
				cancelled.Store(time.Now().UnixNano())
				cancel()
			}
		}
		out := filepath.Join(t.TempDir(), "out")
		_, err := Run(ctx, Options{Plan: p, Spec: spec, Output: out, Jobs: jobs, MemoryLimit: 2 << 10})
		took := time.Since(time.Unix(0, cancelled.Load()))
		feature.BeforeDecode = nil
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("jobs %d: err = %v, want context.Canceled", jobs, err)
		}
		if took > 2*time.Second {
			t.Errorf("jobs %d: Run returned %v after the cancel", jobs, took)
		}
		for _, e := range listTree(t, out) {
			if strings.HasSuffix(e, ".shard") || strings.Contains(e, ".tmp") || strings.Contains(e, TempDirName) || strings.Contains(e, LockName) {
				t.Errorf("jobs %d: left behind: %s", jobs, e)
			}
		}
	}
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > base {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after the cancelled runs, %d before:\n%s", g, base, buf[:runtime.Stack(buf, true)])
	}
}

type vRow struct {
	V int64 `parquet:"v"`
}

type embRow struct {
	Emb []float32 `parquet:"emb,list"`
}

// bigStrRow is a row of TestSlicedBigDictStringsBothForms.
type bigStrRow struct {
	ID   int64   `parquet:"id"`
	Name string  `parquet:"name,dict"`
	Val  string  `parquet:"val"`
	Opt  *int32  `parquet:"opt,optional"`
	F    float64 `parquet:"f"`
}
