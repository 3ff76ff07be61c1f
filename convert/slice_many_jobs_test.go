package convert

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/prepml/prep/plan"
)

// TestSlicedEverySliceFailsManyJobs (passing coverage): a value error in
// every slice of every row group (a null without fill, a list of another
// length, a null hashed string), so that every worker fails at once and
// waits on the one error search of its row group (sliceError's sync.Once),
// under Jobs 1, 2, 4 and 16 (more workers than slices at 16 KiB), reports
// exactly the whole run's error, counts over the column chunk included.
func TestSlicedEverySliceFailsManyJobs(t *testing.T) {
	src := t.TempDir()
	opts := []parquet.WriterOption{parquet.PageBufferSize(256), parquet.DictionaryMaxBytes(60), parquet.DataPageVersion(2)}
	writeShapes(t, filepath.Join(src, "a.parquet"), false, 0, 600, shapesData{vecLen: func(id int64) int { return 2 + int(id%5)/4 }}, append(opts, parquet.MaxRowsPerRowGroup(300))...)
	writeShapes(t, filepath.Join(src, "b.parquet"), false, 600, 400, shapesData{}, append(opts, parquet.MaxRowsPerRowGroup(1000))...)
	p := makePlan(t, src, plan.Config{Seed: 9, Epochs: 1, GlobalBatch: 1, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderPartial})
	for _, sp := range []string{
		`tensors: [{name: xy, columns: [y, x], dtype: F32}]`,
		`tensors: [{name: id, column: id, dtype: I64}, {name: vec, column: vec, dtype: F32, shape: [3]}, {name: xy, columns: [y, x], dtype: F32}]`,
		`tensors: [{name: s, column: s, dtype: I64, bytes: {mode: hash, buckets: 7}}, {name: xy, columns: [y, x], dtype: F32}]`,
	} {
		compareSliced(t, p, sp, nil, nil, []int64{1, 2 << 10, 16 << 10}, []int{1, 2, 4, 16})
	}
}

// bigStrRow is a row of TestSlicedBigDictStringsBothForms.
type bigStrRow struct {
	ID   int64   `parquet:"id"`
	Name string  `parquet:"name,dict"`
	Val  string  `parquet:"val"`
	Opt  *int32  `parquet:"opt,optional"`
	F    float64 `parquet:"f"`
}

// TestSlicedBigDictStringsBothForms (passing coverage): column chunks of
// about 1 MB (past markGap, so pages are resumed at marks) read by two
// tensors at once, one in dictionary form (hash, whose reads note marks
// but never resume) and one in plain form (pad, which resume at them), with
// Jobs 4 slices of one chunk in flight together: the same shards, or the
// same error, as the whole run.
func TestSlicedBigDictStringsBothForms(t *testing.T) {
	src := t.TempDir()
	var rows []bigStrRow
	for i := 0; i < 6000; i++ {
		r := bigStrRow{ID: int64(i), Name: fmt.Sprintf("%0200d", i%(300+i/20)), Val: fmt.Sprintf("%0150d", i*7), F: float64(i)}
		if i%997 != 5 {
			v := int32(i)
			r.Opt = &v
		}
		rows = append(rows, r)
	}
	if err := parquet.WriteFile(filepath.Join(src, "a.parquet"), rows, parquet.PageBufferSize(8<<10), parquet.MaxRowsPerRowGroup(4000)); err != nil {
		t.Fatal(err)
	}
	p := makePlan(t, src, plan.Config{Seed: 3, Epochs: 1, GlobalBatch: 10, WorldSize: 2, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad})
	for _, sp := range []string{
		`tensors: [{name: h, column: name, dtype: I64, bytes: {mode: hash, buckets: 1000003}}, {name: p, column: name, dtype: U8, bytes: {mode: pad, max_len: 3, truncate: true}}, {name: v, column: val, dtype: I64, bytes: {mode: hash, buckets: 77}}, {name: id, column: id, dtype: I64}]`,
		`tensors: [{name: h, column: name, dtype: I64, bytes: {mode: hash, buckets: 1000003}}, {name: o, column: opt, dtype: I32}]`,
		`tensors: [{name: p, column: val, dtype: U8, bytes: {mode: pad, max_len: 149}}]`,
	} {
		compareSliced(t, p, sp, nil, nil, []int64{256 << 10}, []int{1, 4})
	}
	spec, err := ParseSpec([]byte(`tensors: [{name: h, column: name, dtype: I64, bytes: {mode: hash, buckets: 7}}]`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "o"), Jobs: 4, MemoryLimit: 256 << 10})
	if err != nil || sum.RowGroupsSliced == 0 {
		t.Fatalf("256 KiB: %v, %d row groups sliced (want some)", err, sum.RowGroupsSliced)
	}
}
