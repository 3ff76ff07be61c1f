package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/prepml/prep/convert"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/source"
	"github.com/prepml/prep/verify"
	"github.com/prepml/prep/verify/verifytest"
)

type tokenRow struct {
	ID     int64   `parquet:"id"`
	Tokens []int32 `parquet:"tokens,list"`
}

// writeTokens writes 200 documents (id%37 tokens each, token k of
// document id = 1000 + id + k, edit[id][k] when given) in row groups of
// 40 rows.
func writeTokens(t *testing.T, path string, edit map[[2]int]int32) {
	t.Helper()
	rows := make([]tokenRow, 200)
	for i := range rows {
		rows[i] = tokenRow{ID: int64(i), Tokens: make([]int32, i%37)}
		for k := range rows[i].Tokens {
			rows[i].Tokens[k] = int32(1000 + i + k)
			if v, ok := edit[[2]int{i, k}]; ok {
				rows[i].Tokens[k] = v
			}
		}
	}
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[tokenRow](fh, parquet.MaxRowsPerRowGroup(40))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	fh.Close()
}

// TestVerifyDeepPackedTokens: verify --deep over a converted packed plan
// finds nothing, then, after one token of the source is changed in place
// (same size and footer: only the value comparison can tell), reports the
// packed row holding it, on the tokens tensor only.
func TestVerifyDeepPackedTokens(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	path := filepath.Join(src, "part-0.parquet")
	writeTokens(t, path, nil)
	s, err := source.Discover(context.Background(), []string{src})
	if err != nil {
		t.Fatal(err)
	}
	lengths, err := convert.TokenLengths(context.Background(), nil, s, "tokens", 1)
	if err != nil {
		t.Fatal(err)
	}
	eod := int64(2)
	p, lay, err := plan.NewPacked(context.Background(), s, plan.Config{Seed: 4, Epochs: 1, GlobalBatch: 4, WorldSize: 2, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad},
		plan.PackOptions{Column: "tokens", Length: 64, EOD: &eod, Window: 16}, lengths, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	spec := &convert.Spec{Tensors: []convert.TensorSpec{{Name: "tokens", Column: "tokens", DType: "I32"}}}
	if _, err := convert.Run(context.Background(), convert.Options{Plan: p, Spec: spec, Output: out}); err != nil {
		t.Fatal(err)
	}
	opts := verify.Options{Dir: out, Deep: true, Source: convertSource}
	if rep := verifytest.Run(t, opts); !rep.OK || rep.DeepBatches != 2*p.Steps() {
		t.Fatalf("clean set: %d deep batches\n%s", rep.DeepBatches, verifytest.Lines(rep))
	}
	// Document 50 (13 tokens): token 3 changed within the column's range.
	before, _ := os.ReadFile(path)
	writeTokens(t, path, map[[2]int]int32{{50, 3}: 1060})
	after, _ := os.ReadFile(path)
	if len(before) != len(after) || !bytes.Equal(before[len(before)-2000:], after[len(after)-2000:]) {
		t.Fatal("test premise: the rewrite changed the size or the footer")
	}
	var row uint64
	for r := uint64(0); r < lay.Rows(); r++ {
		for _, pc := range lay.Row(r) {
			if pc.Doc == 50 {
				row = r
			}
		}
	}
	rep := verifytest.Run(t, opts)
	if rep.OK || len(rep.Findings) == 0 {
		t.Fatalf("changed token not found\n%s", verifytest.Lines(rep))
	}
	for _, f := range rep.Findings {
		if f.Tensor != "tokens" || !strings.Contains(verifytest.Lines(rep), "value_mismatch") || f.SampleID == nil || *f.SampleID != row {
			t.Errorf("finding %s (want packed row %d, tensor tokens)", f, row)
		}
	}
}
