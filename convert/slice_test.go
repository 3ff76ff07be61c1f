package convert

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/parquet-go/parquet-go"

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
	if err := parquet.WriteFile(path, rows, parquet.Compression(&parquet.Snappy), parquet.MaxRowsPerRowGroup(rowsPerGroup)); err != nil {
		t.Fatal(err)
	}
}

// countDecodes counts column chunk decodes per task sequence number for the
// rest of the test. maxPerTask returns the most decodes of one task: above
// 1 only when a row group was assembled in slices.
func countDecodes(t *testing.T) (maxPerTask func() int, reset func()) {
	var mu sync.Mutex
	n := map[int]int{}
	beforeDecode = func(seq int, _ context.Context) {
		mu.Lock()
		n[seq]++
		mu.Unlock()
	}
	t.Cleanup(func() { beforeDecode = nil })
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
	p := makePlan(t, src, plan.Config{Seed: 5, Epochs: 2, GlobalBatch: 96, WorldSize: 3, Workers: 2, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad})
	spec, err := ParseSpec([]byte(sliceSpecYAML), "features.yaml")
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
		for _, limit := range []int64{whole.StagingBytes, 4 << 10, 1} {
			for _, jobs := range []int{1, 2} {
				name := fmt.Sprintf("epochs %v ranks %v, limit %d, jobs %d", sub.epochs, sub.ranks, limit, jobs)
				out := filepath.Join(t.TempDir(), "sliced")
				reset()
				sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: jobs, MemoryLimit: limit, Epochs: sub.epochs, Ranks: sub.ranks})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if spilled := sum.SpillBytes != 0; spilled != (limit < whole.StagingBytes) {
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
	p := makePlan(t, src, plan.Config{Seed: 5, Epochs: 1, GlobalBatch: 50, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad})
	const (
		id      = "{name: id, columns: [id, id], dtype: I64}"
		opt     = "{name: opt, column: opt, dtype: I32}"
		vec     = "{name: vec, column: vec, dtype: F32, shape: [3]}"
		nullErr = `part-0.parquet: column "opt", row group 1, row 700: null value (2 nulls in this column chunk; set nulls.fill to replace them)`
		lenErr  = `part-0.parquet: column "vec", row group 1, row 300: list has length 2, not 3 (2 rows of this column chunk have another length; set list.pad and list.truncate)`
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
		spec, err := ParseSpec([]byte("tensors: ["+tc.tensors+"]"), "spec.yaml")
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
	p := caseSource(t, "B19-corrupt-files", "bad_page_header_rg1_x.parquet")
	spec, err := ParseSpec([]byte("tensors: [{name: id, columns: [id, id], dtype: I64}, {name: x, column: x, dtype: F32}]"), "spec.yaml")
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

// TestSliceRuns cuts runs with gaps into slices of at most 4 rows: a slice
// starts at a needed row, ends after its last needed row, and a run split
// between slices keeps its staging slots.
func TestSliceRuns(t *testing.T) {
	runs := []run{{lo: 2, hi: 9, dst: 0}, {lo: 10, hi: 11, dst: 7}, {lo: 20, hi: 22, dst: 8}}
	got := fmt.Sprint(sliceRuns(runs, 4))
	want := "[{2 6 [{0 4 0}]} {6 9 [{0 3 4}]} {10 11 [{0 1 7}]} {20 22 [{0 2 8}]}]"
	if got != want {
		t.Errorf("sliceRuns(%v, 4) = %s, want %s", runs, got, want)
	}
	got = fmt.Sprint(sliceRuns(runs, 9))
	want = "[{2 11 [{0 7 0} {8 9 7}]} {20 22 [{0 2 8}]}]"
	if got != want {
		t.Errorf("sliceRuns(%v, 9) = %s, want %s", runs, got, want)
	}
	got = fmt.Sprint(sliceRuns(runs, 1)[7:])
	want = "[{10 11 [{0 1 7}]} {20 21 [{0 1 8}]} {21 22 [{0 1 9}]}]"
	if got != want {
		t.Errorf("sliceRuns(%v, 1)[7:] = %s, want %s", runs, got, want)
	}
}
