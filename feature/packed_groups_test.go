package feature

import (
	"context"
	"errors"
	"testing"

	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/source"
)

// TestPackedGroupsDecode: PackedGroups.Decode takes consecutive steps
// while their documents fit the budget. Each step here is one packed row;
// the expected group is counted here from the layout and the lengths
// (4 bytes a token plus a 16-byte record per distinct document): under a
// budget of the first three rows' documents it takes the steps whose
// documents fit (at least three), holds exactly their bytes, and builds
// each row's tokens as DuckDB's documents give them; a budget one byte
// below the first row's documents is refused with a *PackedBudgetError
// (wrapping ErrValue) naming those bytes.
func TestPackedGroupsDecode(t *testing.T) {
	f := newPackedFixture(t, 300)
	cfg := plan.Config{Seed: 3, Epochs: 1, GlobalBatch: 2, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad}
	p, lay, err := plan.NewPacked(context.Background(), f.src, cfg, plan.PackOptions{Column: "tokens", Length: 128, Window: 40}, f.lengths, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec := &Spec{Tensors: []TensorSpec{{Name: "tokens", Column: "tokens", DType: "I32"}}}
	g, err := OpenPackedGroups(context.Background(), nil, 0, p, spec)
	if err != nil {
		t.Fatal(err)
	}
	rows := []uint64{5, 0, 9, 2, 7, 1, 3, 8}
	step := func(i int) ([]uint64, bool, error) {
		if i >= len(rows) {
			return nil, false, nil
		}
		return rows[i : i+1], true, nil
	}
	// bytes(k): the documents of rows[:k], each once.
	bytes := func(k int) int64 {
		seen := map[uint64]bool{}
		var b int64
		for _, r := range rows[:k] {
			for _, pc := range lay.Row(r) {
				if !seen[pc.Doc] {
					seen[pc.Doc] = true
					b += 4*int64(f.lengths[pc.Doc]) + 16
				}
			}
		}
		return b
	}
	budget := bytes(3)
	want := 3
	for want < len(rows) && bytes(want+1) <= budget {
		want++
	}
	if want == len(rows) {
		t.Fatal("test premise: every row fits the budget")
	}
	d, n, err := g.Decode(context.Background(), step, budget, Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if n != want || d.HeldBytes() != bytes(want) {
		t.Fatalf("budget %d: %d steps holding %d bytes, want %d steps holding %d", budget, n, d.HeldBytes(), want, bytes(want))
	}
	L := 128
	for _, r := range rows[:n] {
		bufs := map[int][]byte{}
		if err := d.FillFixed(r, func(t int) []byte {
			if bufs[t] == nil {
				bufs[t] = make([]byte, 8*L)
			}
			return bufs[t]
		}); err != nil {
			t.Fatal(err)
		}
		i := 0
		for _, pc := range lay.Row(r) {
			for k := pc.Offset; k < pc.Offset+pc.Len; k++ {
				if got, want := featuretest.I32At(bufs[0], i), f.docs[pc.Doc][k]; got != want {
					t.Fatalf("row %d token %d: %d, DuckDB %d", r, i, got, want)
				}
				i++
			}
		}
	}
	_, _, err = g.Decode(context.Background(), step, bytes(1)-1, Bounds{})
	var be *PackedBudgetError
	if !errors.As(err, &be) || !errors.Is(err, ErrValue) || be.Need != bytes(1) || be.Budget != bytes(1)-1 {
		t.Fatalf("budget below row %d's documents: %v, want a PackedBudgetError needing %d", rows[0], err, bytes(1))
	}
}

type packedFixture struct {
	dir     string
	src     plan.Source
	lengths []uint32
	docs    [][]int64
}

func newPackedFixture(t *testing.T, rows int) *packedFixture {
	t.Helper()
	f := &packedFixture{dir: featuretest.TokenFiles(t, rows)}
	var err error
	if f.src, err = source.Discover(context.Background(), []string{f.dir}); err != nil {
		t.Fatal(err)
	}
	if f.lengths, err = TokenLengths(context.Background(), nil, f.src, "tokens", 2); err != nil {
		t.Fatal(err)
	}
	f.docs = featuretest.DuckDocs(t, f.dir)
	return f
}
