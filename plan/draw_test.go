package plan

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// benchFilteredMixture returns a plan of two filtered sources of 24 M rows
// each ("web", two files; "code", two files, after web's in path order),
// each filter selecting about a quarter of its rows (about 6.3 M) in runs
// of 1 to 7 rows, weighted 0.7/0.3 over T = n epoch samples; and a plain
// globally shuffled plan of n rows, for the same global batch and world
// size. With n = 3·2^22, the plain permutation and the sources' walk
// about as many steps per position (domains about 3/4 of a power of two).
func benchFilteredMixture(b *testing.B, n uint64, g, r int) (mix, plain *Plan) {
	b.Helper()
	const rows = 24 << 20
	rng := rand.New(rand.NewPCG(3, 4))
	sel := func() string {
		var ranges [][2]uint64
		for x := uint64(rng.IntN(4)); x < rows; {
			k := 1 + uint64(rng.IntN(7))
			k = min(k, rows-x)
			ranges = append(ranges, [2]uint64{x, k})
			x += k + 1 + uint64(rng.IntN(23))
		}
		return EncodeSelection(ranges)
	}
	src := synthSource(rowGroups(rows/2, 1<<20), rowGroups(rows/2, 1<<20), rowGroups(rows/2, 1<<20), rowGroups(rows/2, 1<<20))
	m := &Mixture{EpochSamples: n, Sources: []MixSource{
		{Name: "web", Weight: "0.7", Files: []string{"part-000.parquet", "part-001.parquet"}, Filter: "x", Selection: sel()},
		{Name: "code", Weight: "0.3", Files: []string{"part-002.parquet", "part-003.parquet"}, Filter: "x", Selection: sel()},
	}}
	cfg := Config{Seed: 5, Epochs: 1, GlobalBatch: g, WorldSize: r, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderDrop}
	// derive, not New: New would hash the epoch digest first.
	mix, err := derive(src, cfg, nil, m)
	if err != nil {
		b.Fatal(err)
	}
	plain, err = derive(synthSource(rowGroups(int64(n), 1<<20)), cfg, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	return mix, plain
}

// BenchmarkRankBatchFilteredMixture: RankBatch of a 0.7/0.3 mixture of two
// filtered sources (12.6 M samples per epoch drawn from 2 × 24 M rows,
// about 12.6 M of them selected) against a plain global shuffle of 12.6 M
// rows, G =
// 4096, R = 8 (rank batches of 512), rank and step varying as in
// BenchmarkRankBatchGlobal; and the epoch digest of each (every slot of
// the epoch, on all CPUs).
func BenchmarkRankBatchFilteredMixture(b *testing.B) {
	const n = 3 << 22
	mix, plain := benchFilteredMixture(b, n, 4096, 8)
	for _, c := range []struct {
		name string
		p    *Plan
	}{{"plain", plain}, {"mixture", mix}} {
		b.Run(c.name, func(b *testing.B) {
			p := c.p
			ids := make([]uint64, 0, 512)
			for i := 0; i < b.N; i++ {
				ids, _, _ = p.RankBatch(0, i%8, (i*7919)%p.Steps(), ids)
			}
			b.ReportMetric(float64(b.N)*512/b.Elapsed().Seconds()/1e6, "Mindices/s")
		})
	}
	for _, c := range []struct {
		name string
		p    *Plan
	}{{"digest-plain", plain}, {"digest-mixture", mix}} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if c.p.EpochDigest(0) == "" {
					b.Fatal("no digest")
				}
			}
			b.ReportMetric(float64(b.N)*n/b.Elapsed().Seconds()/1e6, "Mslots/s")
		})
	}
}

// selectedRows decodes each source's selection text (PLAN.md §11.7: per
// range the varint gap from the previous range's end, then the varint
// length, in base64) into its selected rows in order; nil for a source
// without a filter.
func selectedRows(t *testing.T, mix *Mixture) [][]uint64 {
	out := make([][]uint64, len(mix.Sources))
	for i, s := range mix.Sources {
		if s.Selection == "" {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(s.Selection)
		if err != nil {
			t.Fatal(err)
		}
		var end uint64
		for len(b) > 0 {
			gap, k := binary.Uvarint(b)
			ln, k2 := binary.Uvarint(b[k:])
			b = b[k+k2:]
			for x := end + gap; x < end+gap+ln; x++ {
				out[i] = append(out[i], x)
			}
			end += gap + ln
		}
	}
	return out
}

// refAppendRange is the per-slot definition of a mixture's epoch order
// (PLAN.md §11.2–§11.4), slot by slot: merge each batch's draws by their
// keys, then each draw's stream position through its pass's permutation
// (Perm.Apply), then the local row to its sample id through the selected
// rows sel (selectedRows) and a search of the source's row groups.
func refAppendRange(o mixOrder, sel [][]uint64, lo, hi uint64, dst []uint64) []uint64 {
	ms := o.ms
	ms.build()
	m := len(ms.src)
	cnt, start := make([]uint64, m), make([]uint64, m)
	perms := map[[2]uint64]Perm{}
	for lo < hi {
		b := lo / ms.g
		base := b * ms.g
		end := min(hi, base+ms.g) - base
		ms.counts(b, cnt, start)
		from := lo - base
		merge(cnt, end, func(q uint64, i int, j uint64) {
			if q < from {
				return
			}
			s := &ms.src[i]
			p := o.epoch*s.c + start[i] + j
			local := p % s.n
			if ms.shuffle {
				key := [2]uint64{uint64(i), p / s.n}
				perm, ok := perms[key]
				if !ok {
					perm = NewPerm(s.n, purposeMixture, ms.seed, p/s.n, uint64(i))
					perms[key] = perm
				}
				local = perm.Apply(local)
			}
			if sel[i] != nil {
				local = sel[i][local]
			}
			k := 0
			for s.part.prefix[k+1] <= local {
				k++
			}
			dst = append(dst, ms.idx.blocks[s.part.blocks[k]].start+local-s.part.prefix[k])
		})
		lo = base + end
	}
	return dst
}

// TestMixtureAppendRange: the batch-wise evaluation of a mixture's epoch
// order (appendRange: kept batch compositions, draws through the 4-lane
// permutation, the ids table) gives at every slot the id of the per-slot
// definition (refAppendRange), for sources whose rows are one run of ids
// and sources interleaved with others by path, filtered ones (by table
// and by search), up- and down-sampled ones, shuffle global and none, one
// source, two, three and forty (more compositions than the kept sequences
// allow, when their memory is capped at 0), global batches that divide T
// and that leave a partial batch, over several epochs and from ranges
// that start and end inside and across batches; and slotsOf gives every
// id exactly the slots that hold it (none for an unselected row).
func TestMixtureAppendRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	defer func(a int, b uint64) { patCacheBytes, selDirectLimit = a, b }(patCacheBytes, selDirectLimit)
	type fixture struct {
		name string
		src  Source
		mix  *Mixture
	}
	var fixtures []fixture
	src, mix := mixFixture()
	fixtures = append(fixtures, fixture{"interleaved", src, mix})
	src, mix, _ = selFixture()
	fixtures = append(fixtures, fixture{"filtered", src, mix})
	// Up-sampled: code's 130 rows drawn 3000 times an epoch.
	up := *mix
	up.Sources = slices.Clone(mix.Sources)
	up.Sources[0].Weight, up.EpochSamples = "0.1", 3333
	fixtures = append(fixtures, fixture{"up-sampled", src, &up})
	// One filtered source; three sources, one run of ids each.
	one := &Mixture{Sources: []MixSource{{Name: "s", Files: []string{"part-000.parquet", "part-001.parquet"}, Filter: "x",
		Selection: EncodeSelection([][2]uint64{{1, 5}, {9, 300}, {400, 1}, {650, 999}})}}}
	fixtures = append(fixtures, fixture{"one", synthSource(rowGroups(700, 64), rowGroups(1000, 333)), one})
	three := &Mixture{EpochSamples: 2000, Sources: []MixSource{
		{Name: "a", Weight: "5", Files: []string{"part-000.parquet"}},
		{Name: "b", Weight: "3", Files: []string{"part-001.parquet"}},
		{Name: "c", Weight: "1", Files: []string{"part-002.parquet"}}}}
	fixtures = append(fixtures, fixture{"three", synthSource(rowGroups(500, 100), rowGroups(77, 10), rowGroups(900, 1000)), three})
	var files [][]int64
	forty := &Mixture{}
	for i := range 40 {
		files = append(files, rowGroups(int64(5+i*7), 9))
		forty.Sources = append(forty.Sources, MixSource{Name: fmt.Sprintf("s%d", i), Weight: fmt.Sprint(1 + i%4), Files: []string{fmt.Sprintf("part-%03d.parquet", i)}})
	}
	forty.EpochSamples = 5000
	fixtures = append(fixtures, fixture{"forty", synthSource(files...), forty})
	for _, f := range fixtures {
		for _, shuffle := range []Shuffle{ShuffleGlobal, ShuffleNone} {
			for _, g := range []int{1, 7, 64, 100, 1024} {
				for _, limits := range [][2]uint64{{32 << 20, selDirectMax}, {0, 0}} {
					patCacheBytes, selDirectLimit = int(limits[0]), limits[1]
					cfg := Config{Seed: 9, Epochs: 3, GlobalBatch: g, WorldSize: 1, Workers: 1, Shuffle: shuffle, Remainder: RemainderPartial}
					p, err := derive(f.src, cfg, nil, f.mix)
					if err != nil {
						t.Fatalf("%s: %v", f.name, err)
					}
					ms := p.st.mix
					sel := selectedRows(t, f.mix)
					for e := range uint64(3) {
						o := mixOrder{ms: ms, epoch: e}
						want := refAppendRange(o, sel, 0, ms.t, nil)
						// slotsOf, the inverse (through the ids table's
						// search or the ranges'), lists each id's slots (at one G).
						if g == 100 {
							slots := map[uint64][]uint64{}
							for q, id := range want {
								slots[id] = append(slots[id], uint64(q))
							}
							for id := range ms.idx.n {
								if got := ms.slotsOf(e, id); !slices.Equal(got, slots[id]) {
									t.Fatalf("%s %s G=%d limits %v epoch %d: slotsOf(%d) = %v, want %v", f.name, shuffle, g, limits, e, id, got, slots[id])
								}
							}
						}
						ranges := [][2]uint64{{0, ms.t}, {0, 1}, {ms.t - 1, ms.t}, {3, 3}}
						for range 30 {
							lo := rng.Uint64N(ms.t)
							ranges = append(ranges, [2]uint64{lo, lo + rng.Uint64N(min(ms.t-lo, 3*uint64(g))+1)})
						}
						for _, r := range ranges {
							got := o.appendRange(r[0], r[1], []uint64{77})
							if uint64(len(got)) != 1+r[1]-r[0] || got[0] != 77 {
								t.Fatalf("%s %s G=%d epoch %d [%d, %d): %d values, want 77 then %d", f.name, shuffle, g, e, r[0], r[1], len(got), r[1]-r[0])
							}
							if i := firstDiff(got[1:], want[r[0]:r[1]]); i < len(got)-1 {
								t.Fatalf("%s %s G=%d limits %v epoch %d [%d, %d): slot %d holds %d, the definition gives %d", f.name, shuffle, g, limits, e, r[0], r[1], r[0]+uint64(i), got[1+i], want[r[0]+uint64(i)])
							}
						}
					}
				}
			}
		}
	}
}
