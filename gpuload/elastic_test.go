package gpuload

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/prepml/prep/gpuload/internal/testshards"
)

// elasticWant is what rank rank of world ranks reads at step k of a
// testshards set written for cfg.Ranks ranks: the slots [rank·G/world,
// (rank+1)·G/world) of the step's global batch, which are the shard
// batches' rows in rank order.
func elasticWant(cfg testshards.Config, epoch, rank, world, k int) (ids []uint64, pads int) {
	g := cfg.BatchSize * cfg.Ranks
	b := g / world
	for slot := rank * b; slot < (rank+1)*b; slot++ {
		r, row := slot/cfg.BatchSize, slot%cfg.BatchSize
		rids := cfg.IDs(epoch, r, k)
		if row < len(rids) {
			ids = append(ids, rids[row])
			if row >= len(rids)-cfg.Pad(k) {
				pads++
			}
		}
	}
	return ids, pads
}

func TestElasticReadsOtherWorldSizes(t *testing.T) {
	dir := writeSet(t, small) // 2 ranks of 4, last batch 3 samples with 1 pad
	for _, world := range []int{1, 2, 4, 8} {
		for rank := range world {
			for _, epoch := range []int{0, 1} {
				e, err := OpenElastic(dir, epoch, rank, world, Options{Prefetch: 1})
				if err != nil {
					t.Fatal(err)
				}
				if e.Steps() != small.Steps || e.BatchSize() != 8/world {
					t.Fatalf("steps %d batch %d", e.Steps(), e.BatchSize())
				}
				for k := 0; ; k++ {
					b, err := e.Next()
					if errors.Is(err, io.EOF) {
						if k != small.Steps {
							t.Fatalf("world %d rank %d: EOF after %d steps", world, rank, k)
						}
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					ids, pads := elasticWant(small, epoch, rank, world, k)
					if b.Step != k || b.Count != len(ids) || b.Pads != pads || !slices.Equal(b.SampleIDs, ids) {
						t.Fatalf("world %d rank %d epoch %d step %d: step %d count %d pads %d ids %v, want %d %d %v",
							world, rank, epoch, k, b.Step, b.Count, b.Pads, b.SampleIDs, len(ids), pads, ids)
					}
					for ti, tn := range b.Tensors {
						if tn.Shape[0] != int64(len(ids)) {
							t.Fatalf("%s shape %v", tn.Name, tn.Shape)
						}
						var want []byte
						for _, id := range ids {
							want = append(want, testshards.Sample(ti, id)...)
						}
						if !bytes.Equal(tn.Bytes, want) {
							t.Fatalf("world %d rank %d epoch %d step %d tensor %s: bytes differ", world, rank, epoch, k, tn.Name)
						}
					}
					b.Release()
				}
				if err := e.Seek(3); err != nil {
					t.Fatal(err)
				}
				b, err := e.Next()
				if err != nil || b.Step != 3 {
					t.Fatalf("after Seek(3): %v %v", b, err)
				}
				b.Release()
				if err := e.Close(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func TestElasticRefusals(t *testing.T) {
	dir := writeSet(t, small)
	for _, c := range []struct {
		rank, world int
		opts        Options
		want        string
	}{
		{0, 3, Options{}, "world size 3 does not divide the plan's global batch 8"},
		{4, 4, Options{}, "rank 4 outside [0, 4)"},
		{0, 1, Options{Backend: BackendCUDA}, "spans 2 shard batches, which are joined on the host"},
	} {
		_, err := OpenElastic(dir, 0, c.rank, c.world, c.opts)
		if !errors.Is(err, ErrInvalid) || !bytes.Contains([]byte(err.Error()), []byte(c.want)) {
			t.Errorf("rank %d of %d: %v, want ErrInvalid %q", c.rank, c.world, err, c.want)
		}
	}
	if _, err := OpenElastic(dir, 5, 0, 4, Options{}); !errors.Is(err, ErrOutsidePlan) {
		t.Errorf("epoch 5: %v, want ErrOutsidePlan", err)
	}
}
