package feature

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/pqread"
)

// TestHold: sample i of Hold is ids[i], fixed
// and jagged tensors alike, across files and row groups, and equal to
// Materialize's bytes; the id set covers the ids' range only.
func TestHold(t *testing.T) {
	p, spec := fixture(t, plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 8, WorldSize: 2, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad})
	ids := []uint64{5, 127, 128, 699, 700, 701, 999}
	h, err := Hold(context.Background(), nil, p, spec, ids, Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.Len() != len(ids) || len(h.Tensors()) != len(featuretest.ExpectSample(0)) {
		t.Fatalf("%d samples of %d tensors", h.Len(), len(h.Tensors()))
	}
	for i, id := range ids {
		for ti, w := range featuretest.ExpectSample(id) {
			if got := h.Sample(ti, i); !bytes.Equal(got, w) {
				t.Errorf("id %d tensor %s = %x, want %x", id, h.Tensors()[ti].Name, got, w)
			}
		}
	}

	pj, specj := jagFixture(t, featuretest.JagConfig)
	ids = []uint64{0, 3, 7, 8, 14, 499, 500, 729}
	hj, err := Hold(context.Background(), nil, pj, specj, ids, Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		for ti, w := range featuretest.JagExpect(id) {
			if got := hj.Sample(ti, i); !bytes.Equal(got, w) {
				t.Errorf("jagged id %d tensor %s = %x, want %x", id, hj.Tensors()[ti].Name, got, w)
			}
		}
	}
	hj.Close()
	hj.Close() // twice is safe

	empty, err := Hold(context.Background(), nil, p, spec, nil, Bounds{})
	if err != nil || empty.Len() != 0 {
		t.Fatalf("no ids: %v, %d samples", err, empty.Len())
	}
	empty.Close()
}

// TestHoldErrors: ids out of order, repeated or beyond the
// plan's samples are refused before anything is decoded.
func TestHoldErrors(t *testing.T) {
	p, spec := fixture(t, plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 8, WorldSize: 2, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad})
	for _, c := range []struct {
		ids  []uint64
		want string
	}{
		{[]uint64{3, 2}, "sample ids not ascending: 2 after 3"},
		{[]uint64{3, 3}, "sample ids not ascending: 3 after 3"},
		{[]uint64{3, 1000}, "sample id 1000 not in [0, 1000)"},
	} {
		_, err := Hold(context.Background(), nil, p, spec, c.ids, Bounds{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.ids, err, c.want)
		}
	}
}

// TestIDSetWithin: a set over a window holds only members inside it,
// ranks count from the window's first member, and runs over a row group
// reaching outside the window give the members inside only.
func TestIDSetWithin(t *testing.T) {
	s := newIDSetWithin(1000, 130, 300)
	if s.lo != 128 || len(s.words) != 3 {
		t.Fatalf("window lo %d, %d words; want 128, 3", s.lo, len(s.words))
	}
	for _, id := range []uint64{130, 131, 132, 200, 299} {
		s.Add(id)
	}
	s.Seal()
	if s.count != 5 {
		t.Errorf("count %d, want 5", s.count)
	}
	for id, want := range map[uint64]bool{0: false, 127: false, 129: false, 130: true, 200: true, 299: true, 300: false, 999: false} {
		if s.Has(id) != want {
			t.Errorf("has(%d) = %v, want %v", id, !want, want)
		}
	}
	if r := s.Rank(200); r != 3 {
		t.Errorf("rank(200) = %d, want 3", r)
	}
	got := s.runs(100, 900)
	want := []RowRun{{Lo: 30, Hi: 33, Dst: 0}, {Lo: 100, Hi: 101, Dst: 3}, {Lo: 199, Hi: 200, Dst: 4}}
	if len(got) != len(want) {
		t.Fatalf("runs %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("run %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if r := s.runs(400, 100); len(r) != 0 {
		t.Errorf("runs past the window: %+v", r)
	}
	if r := s.runs(0, 100); len(r) != 0 {
		t.Errorf("runs before the window: %+v", r)
	}
}

// fixture writes two source files (700 + 300 rows, row groups of 128) and
// returns the plan and spec.
func fixture(t testing.TB, cfg plan.Config) (*plan.Plan, *Spec) {
	t.Helper()
	src := t.TempDir()
	featuretest.File(0, 700).RowGroupRows(128).Codec(&parquet.Snappy).WriteFile(t, filepath.Join(src, "part-0.parquet"))
	featuretest.File(700, 300).RowGroupRows(128).Codec(&parquet.Snappy).WriteFile(t, filepath.Join(src, "part-1.parquet"))
	spec, err := ParseSpec([]byte(featuretest.SpecYAML), "features.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return featuretest.MakePlan(t, src, cfg), spec
}

func jagFixture(t testing.TB, cfg plan.Config) (*plan.Plan, *Spec) {
	t.Helper()
	src := t.TempDir()
	featuretest.JagFile(0, 500, nil).RowGroupRows(128).WriteFile(t, filepath.Join(src, "a.parquet"))
	featuretest.JagFile(500, 230, nil).RowGroupRows(1000).WriteFile(t, filepath.Join(src, "b.parquet"))
	spec, err := ParseSpec([]byte(featuretest.JagSpecYAML), "jagged.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return featuretest.MakePlan(t, src, cfg), spec
}

// TestMaterializeFootersWithinMemory pins the fault where a
// materialization (verify --deep) kept 64 MiB of footers held from
// compiling to decoding whatever its memory bound (eight footers of 5,000
// columns, 72 MB of heap, under --memory-limit 32MiB): the footers held
// are estimated at half of Bounds.Memory at most, 64 MiB when it is unset.
func TestMaterializeFootersWithinMemory(t *testing.T) {
	const files = 8
	p := copiesPlan(t, files)
	spec := &Spec{Tensors: []TensorSpec{{Name: "x", Column: "x", DType: "F32"}}}
	fs, _, err := openForSpec(context.Background(), p, nil, spec, pqread.Limits{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	closeSources(fs)
	cost := fs[0].footerCost
	for _, c := range []struct {
		lim       Bounds
		footers   int64
		heldFiles int64
	}{
		{Bounds{}, 64 << 20, files},
		{Bounds{Memory: 32 << 20}, 16 << 20, files},
		{Bounds{Memory: 6*cost + 1}, 3 * cost, 3},
		{Bounds{Memory: 1, Run: 1 << 30}, 1, 0},
	} {
		if got := materializeFootersFor(c.lim); got != c.footers {
			t.Errorf("Memory %d: %d bytes of footers, want %d", c.lim.Memory, got, c.footers)
		}
		base := footersHeld.Load()
		prog, err := compileFor(context.Background(), nil, p, spec, c.lim)
		if err != nil {
			t.Fatal(err)
		}
		if n := footersHeld.Load() - base; n != c.heldFiles {
			t.Errorf("Memory %d: %d footers held after compiling, want %d", c.lim.Memory, n, c.heldFiles)
		}
		prog.Close()
	}
}
