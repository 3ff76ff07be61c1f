package convert

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/plan"
)

// The needed-id set taken from Plan.Dropped (every rank of an epoch
// requested) equals the set of ids the requested shards hold, batch by
// batch, also when another requested epoch holds an id the first one drops.
func TestNeededIDsWithDrops(t *testing.T) {
	cfg := plan.Config{Seed: 3, Epochs: 3, GlobalBatch: 96, WorldSize: 4, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderDrop}
	p, _ := fixture(t, cfg) // 1000 rows: 40 dropped per epoch
	if p.Derived.DroppedPerEpoch == 0 {
		t.Fatal("fixture drops nothing")
	}
	for _, todo := range [][]shardKey{
		{{0, 0}, {0, 1}, {0, 2}, {0, 3}},
		{{0, 0}, {0, 1}, {0, 2}, {0, 3}, {1, 2}},
		{{1, 3}, {2, 0}, {2, 1}, {2, 2}, {2, 3}, {0, 1}},
		{{1, 1}, {2, 2}},
	} {
		got, err := neededIDs(context.Background(), p, todo)
		if err != nil {
			t.Fatal(err)
		}
		want := feature.NewIDSet(p.NumSamples())
		var ids []uint64
		for _, k := range todo {
			for step := 0; step < p.Steps(); step++ {
				ids, _, _ = p.RankBatch(k.epoch, k.rank, step, ids)
				for _, id := range ids {
					want.Add(id)
				}
			}
		}
		want.Seal()
		if got.Len() != want.Len() {
			t.Errorf("%v: %d ids, want %d", todo, got.Len(), want.Len())
		}
		for id := uint64(0); id < p.NumSamples(); id++ {
			if got.Has(id) != want.Has(id) {
				t.Fatalf("%v: id %d needed = %v, want %v", todo, id, got.Has(id), want.Has(id))
			}
		}
	}
}

// TestNeededIDsShortcut checks the all-ids shortcut against the plan itself
// for every shuffle mode and remainder policy.
func TestNeededIDsShortcut(t *testing.T) {
	src := t.TempDir()
	featuretest.File(0, 203).RowGroupRows(16).Codec(&parquet.Snappy).WriteFile(t, filepath.Join(src, "a.parquet"))
	featuretest.File(203, 50).RowGroupRows(7).Codec(&parquet.Snappy).WriteFile(t, filepath.Join(src, "b.parquet"))
	for _, sh := range []plan.Shuffle{plan.ShuffleNone, plan.ShuffleGlobal, plan.ShuffleBlocks, plan.ShufflePartitioned} {
		for _, rem := range []plan.Remainder{plan.RemainderDrop, plan.RemainderPad, plan.RemainderPartial} {
			cfg := plan.Config{Seed: 5, Epochs: 2, GlobalBatch: 12, WorldSize: 3, Workers: 2, Shuffle: sh, Remainder: rem}
			if sh == plan.ShuffleBlocks {
				cfg.Window = 2
			}
			p, err := plan.New(mustDiscover(t, src), cfg)
			if err != nil {
				t.Fatal(err)
			}
			todo := []shardKey{{1, 0}, {1, 1}, {1, 2}}
			set, err := neededIDs(context.Background(), p, todo)
			if err != nil {
				t.Fatal(err)
			}
			want := feature.NewIDSet(p.NumSamples())
			var ids []uint64
			for _, k := range todo {
				for s := 0; s < p.Steps(); s++ {
					ids, _, _ = p.RankBatch(k.epoch, k.rank, s, ids)
					for _, id := range ids {
						want.Add(id)
					}
				}
			}
			want.Seal()
			if !sameIDs(set, want) {
				t.Errorf("%s/%s: needed ids differ from the plan", sh, rem)
			}
		}
	}
}

// sameIDs reports whether a and b (sealed, over the same bound) hold the
// same ids.
func sameIDs(a, b *feature.IDSet) bool {
	if a.Len() != b.Len() || a.Bound() != b.Bound() {
		return false
	}
	for id := range a.Bound() {
		if a.Has(id) != b.Has(id) {
			return false
		}
	}
	return true
}
