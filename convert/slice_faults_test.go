package convert

// Row groups assembled in row slices (decode.go: planSlices, assembleSliced,
// firstErrorSliced) against the same runs with row groups decoded whole:
// faults found in the sliced path, and every column shape and value error
// it treats apart.

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/prepml/prep/plan"
)

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
// suffice. The error itself matches the whole run's.
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
	if err := parquet.WriteFile(filepath.Join(src, "a.parquet"), data); err != nil {
		t.Fatal(err)
	}
	// 5,000 ranks, batch 1 each, one epoch of 2 steps: rank 0 needs 2 rows.
	p := makePlan(t, src, plan.Config{Seed: 9, Epochs: 1, GlobalBatch: rows / 2, WorldSize: rows / 2, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderDrop})
	spec, err := ParseSpec([]byte(`tensors: [{name: v, column: v, dtype: I64}]`), "s.yaml")
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
	writeRows(t, path, sch, rows, parquet.PageBufferSize(512), parquet.Compression(&parquet.Snappy))
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
	p := makePlan(t, src, plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 1, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderPartial})
	spec, err := ParseSpec([]byte(`tensors: [{name: emb, column: emb, dtype: F32, shape: [2], list: {pad: 0, truncate: true}}]`), "s.yaml")
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

// TestSliceEstimateCountsSourceValues pins a fault of the decode-size
// estimate that decides whether a row group is sliced: it counted the
// output's bytes per row (32 for a hashed string, max_len for a padded
// one, the shape for a list), not the source's. A hashed or truncated
// column of 1,000-byte strings, or a 256-float list truncated to 4, was
// estimated at a few dozen bytes per row, so a 20,000-row row group
// (20 MB of strings, 20 MB of floats) was judged to fit a 2 MiB limit and
// decoded whole: the Go heap peaked at 30-58 MiB although every row
// is small (doc.go "# Memory", README: only one page or a single row larger
// than half the limit may exceed it). The estimate now also counts the
// source values from the footer (pqread.File.DecodedSize).
func TestSliceEstimateCountsSourceValues(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes 40 MB")
	}
	if raceEnabled {
		t.Skip("measures memory")
	}
	src := t.TempDir()
	data := make([]longRow, 20000)
	for i := range data {
		data[i].Emb = make([]float32, 256)
		for k := range data[i].Emb {
			data[i].Emb[k] = float32(i*k) + 0.5
		}
		data[i].S = fmt.Sprintf("%01000d", i)
	}
	if err := parquet.WriteFile(filepath.Join(src, "a.parquet"), data, parquet.Compression(&parquet.Snappy)); err != nil {
		t.Fatal(err)
	}
	data = nil
	p := makePlan(t, src, plan.Config{Seed: 9, Epochs: 1, GlobalBatch: 100, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderDrop})
	const bound = 24 << 20 // the bound of TestColumnChunkOverLimitIsSliced for the same limit (whole: 30-58 MiB)
	decodes, reset := countDecodes(t)
	for _, sp := range []string{
		`tensors: [{name: s, column: s, dtype: I64, bytes: {mode: hash, buckets: 100}}]`,
		`tensors: [{name: s, column: s, dtype: U8, bytes: {mode: pad, max_len: 4, truncate: true}}]`,
		`tensors: [{name: e, column: emb, dtype: F32, shape: [4], list: {truncate: true}}]`,
	} {
		spec, err := ParseSpec([]byte(sp), "s.yaml")
		if err != nil {
			t.Fatal(err)
		}
		reset()
		runtime.GC()
		sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "out"), Jobs: 1, MemoryLimit: 2 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if n := decodes(); n < 2 || sum.PeakHeapBytes > bound {
			t.Errorf("%s: under a 2 MiB limit the 20,000-row row group was decoded %d time(s) (1: whole, not sliced), peak heap %d MiB (want at most %d MiB)",
				sp, n, sum.PeakHeapBytes>>20, bound>>20)
		}
	}
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
	writeRows(t, path, sch, rows, opts...)
}

// writeRows writes rows of schema sch to a new file at path.
func writeRows(t testing.TB, path string, sch *parquet.Schema, rows []parquet.Row, opts ...parquet.WriterOption) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[any](f, append([]parquet.WriterOption{sch}, opts...)...)
	if _, err := w.WriteRows(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// compareSliced runs p and spec with row groups whole (the default limit) and
// at each limit and Jobs, and requires the same shards, or the same error.
func compareSliced(t *testing.T, p *plan.Plan, specYAML string, epochs, ranks []int, limits []int64, jobs []int) {
	t.Helper()
	spec, err := ParseSpec([]byte(specYAML), "spec.yaml")
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
			p := makePlan(t, src, plan.Config{Seed: 9, Epochs: 2, GlobalBatch: 40, WorldSize: 4, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad})
			compareSliced(t, p, shapesSpecYAML, nil, nil, []int64{1, 4 << 10, 64 << 10}, []int{1, 2})
			compareSliced(t, p, shapesSpecYAML, []int{1}, []int{3}, []int64{4 << 10}, []int{2})
			for _, cfg := range []plan.Config{
				{Seed: 3, Epochs: 1, GlobalBatch: 12, WorldSize: 3, Workers: 2, Shuffle: plan.ShufflePartitioned, Remainder: plan.RemainderPad},
				{Seed: 4, Epochs: 1, GlobalBatch: 30, WorldSize: 3, Workers: 1, Shuffle: plan.ShuffleBlocks, Window: 2, Remainder: plan.RemainderPartial},
				{Seed: 5, Epochs: 1, GlobalBatch: 475, WorldSize: 475, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderDrop},
			} {
				compareSliced(t, makePlan(t, src, cfg), shapesSpecYAML, nil, []int{1}, []int64{4 << 10}, []int{2})
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
			p := makePlan(t, src, plan.Config{Seed: 9, Epochs: 1, GlobalBatch: 1, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderPartial})
			compareSliced(t, p, c.spec, nil, nil, []int64{1, 4 << 10}, []int{1, 2})
		})
	}
}
