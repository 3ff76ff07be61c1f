package convert

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/plan"
)

// TestRunPackedCountsRowGroups: a packed run's summary counts the row
// groups its documents were decoded from, as an unpacked run's does. With
// every rank converted under the default limit every document is decoded
// once, so every non-empty row group of the source (counted from the
// plan's footers) is read once and none is skipped; converting one rank
// under a limit that forces several decoding groups still reads at least
// one row group per group. Before, a packed run reported 0 row groups read
// beside hundreds of source rows decoded.
func TestRunPackedCountsRowGroups(t *testing.T) {
	f := newPackedFixture(t, 600)
	nonEmpty := 0
	for _, sf := range f.src.Files {
		for _, n := range sf.RowGroups {
			if n > 0 {
				nonEmpty++
			}
		}
	}
	cfg := plan.Config{Seed: 5, Epochs: 1, GlobalBatch: 4, WorldSize: 2, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad}
	eod := int64(2)
	p, _, err := plan.NewPacked(context.Background(), f.src, cfg, plan.PackOptions{Column: "tokens", Length: 128, EOD: &eod, Window: 40}, f.lengths, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec := &feature.Spec{Tensors: []feature.TensorSpec{{Name: "tokens", Column: "tokens", DType: "I32"}}}
	sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "out"), Jobs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if sum.RowGroupsRead != nonEmpty || sum.RowGroupsSkipped != 0 {
		t.Errorf("every rank: %d row groups read, %d skipped; want %d and 0 (%d source rows decoded)",
			sum.RowGroupsRead, sum.RowGroupsSkipped, nonEmpty, sum.SamplesDecoded)
	}
	var all int64
	for _, n := range f.lengths {
		all += 4*int64(n) + 16
	}
	one, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "out"), Jobs: 1,
		Ranks: []int{1}, MemoryLimit: all / 2})
	if err != nil {
		t.Fatal(err)
	}
	if one.SamplesDecoded == 0 || one.RowGroupsRead == 0 {
		t.Errorf("rank 1 in groups: %d row groups read for %d documents decoded; want at least one", one.RowGroupsRead, one.SamplesDecoded)
	}
}
