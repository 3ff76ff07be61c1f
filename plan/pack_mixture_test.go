package plan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// packMixFixture is selFixture (web: 1000 rows, weight 0.7; code: its 51
// selected rows, weight 0.3) with a token count of 1 … 90 for every source
// row, none empty.
func packMixFixture(t *testing.T) (Source, *Mixture, map[uint64]bool, []uint32) {
	src, mix, codeSel := selFixture()
	n := mustNorm(t, src).NumSamples()
	lengths := lcgLengths(int(n), 17, 30, 90)
	return src, mix, codeSel, lengths
}

func mustPackMix(t *testing.T, src Source, cfg Config, opts PackOptions, mix *Mixture, lengths []uint32) (*Plan, *PackLayout) {
	t.Helper()
	p, lay, err := NewPackedMixture(context.Background(), src, cfg, opts, mix, lengths, nil)
	if err != nil {
		t.Fatalf("NewPackedMixture(%+v, %+v): %v", cfg, opts, err)
	}
	return p, lay
}

// epochDocs returns the documents packed in epoch e of p (piece at
// offset 0 of each document, counted once per draw) and checks every
// token of each drawn document is in the epoch's rows exactly as many
// times as the document was (split chunk), no row holds more than L
// tokens, and row j of the layout is sample id First+j.
func epochDocs(t *testing.T, p *Plan, lengths []uint32, e int) (map[uint64]int, *PackLayout) {
	t.Helper()
	lay, err := p.PackLayout(context.Background(), lengths, e)
	if err != nil {
		t.Fatalf("epoch %d: %v", e, err)
	}
	covered := map[uint64][]int{}
	for r := uint64(0); r < lay.Rows(); r++ {
		var used uint64
		row, ok := lay.RowOf(lay.First + r)
		if !ok || !reflect.DeepEqual(row, lay.Row(r)) {
			t.Fatalf("epoch %d: RowOf(%d) is not row %d", e, lay.First+r, r)
		}
		for _, pc := range row {
			c := covered[pc.Doc]
			if c == nil {
				c = make([]int, lengths[pc.Doc]+1)
				covered[pc.Doc] = c
			}
			for o := pc.Offset; o < pc.Offset+pc.Len; o++ {
				c[o]++
			}
			used += uint64(pc.Len)
		}
		if used > uint64(p.Packing.Length) {
			t.Fatalf("epoch %d: row %d holds %d tokens", e, r, used)
		}
	}
	times := map[uint64]int{}
	for d, c := range covered {
		for o, x := range c[:uint64(lengths[d])+uint64(b2i(p.Packing.EOD != nil))] {
			if x != c[0] {
				t.Fatalf("epoch %d: document %d token %d in %d rows, token 0 in %d", e, d, o, x, c[0])
			}
		}
		times[d] = c[0]
	}
	return times, lay
}

// TestPackedMixtureQuotas: filters and quotas choose the documents before
// packing, and each epoch packs its own draws. T = 1051 documents (1000
// web rows + 51 selected code rows); quotas by hand: 0.7·1051 = 735.7 and
// 0.3·1051 = 315.3, the one left over to web (larger fraction): 736 and
// 315. Epoch e's packed documents are exactly the draws of epoch e of the
// unpacked mixture of the same inputs (§11.2: stream positions e·c_i …),
// so over the 2 epochs web's 1472 draws cover its 1000 rows once and 472
// of them twice, and the 51 selected code rows 630 = 12·51 + 18 times:
// 12 or 13 times, 18 of them 13 times; no unselected code row appears.
// With scope per_source every row holds one source's documents, as
// SourceOf says. Epoch e's order holds its own rows O_e … O_e+P_e−1, each
// once (pads aside), and no other epoch's.
func TestPackedMixtureQuotas(t *testing.T) {
	src, mix, codeSel, lengths := packMixFixture(t)
	web := func(id uint64) bool { return id < 600 || id >= 680 && id < 1080 }
	for _, scope := range []PackScope{ScopeAcross, ScopePerSource} {
		for _, sh := range []Shuffle{ShuffleGlobal, ShuffleNone} {
			cfg := Config{Seed: 3, Epochs: 2, GlobalBatch: 8, WorldSize: 2, Workers: 1, Shuffle: sh, Remainder: RemainderPad}
			p, lay0 := mustPackMix(t, src, cfg, PackOptions{Column: "tokens", Length: 64, EOD: i64p(2), Window: 50, Scope: scope}, mix, lengths)
			name := fmt.Sprintf("%s/%s", scope, sh)
			if got := []uint64{p.Mixture.Sources[0].SamplesPerEpoch, p.Mixture.Sources[1].SamplesPerEpoch}; !slices.Equal(got, []uint64{736, 315}) {
				t.Fatalf("%s: quotas %v, want [736 315]", name, got)
			}
			if p.Format != FormatPackedMixture || p.CoversSource() {
				t.Fatalf("%s: format %s, CoversSource %v", name, p.Format, p.CoversSource())
			}
			unpacked := mustMix(t, src, Config{Seed: 3, Epochs: 2, GlobalBatch: 8, WorldSize: 1, Workers: 1, Shuffle: sh, Remainder: RemainderPartial}, mix)
			all := map[uint64]int{}
			var first, tokens uint64
			for e := 0; e < 2; e++ {
				times, lay := epochDocs(t, p, lengths, e)
				if e == 0 && !reflect.DeepEqual(lay, lay0) {
					t.Fatalf("%s: NewPackedMixture's layout is not epoch 0's", name)
				}
				draws := map[uint64]int{}
				bs, _ := globalBatches(t, unpacked, e)
				for _, b := range bs {
					for _, id := range b {
						draws[id]++
					}
				}
				if !reflect.DeepEqual(times, draws) {
					t.Fatalf("%s: epoch %d packs other documents than the unpacked mixture draws", name, e)
				}
				for d, k := range times {
					all[d] += k
				}
				ep := p.Packing.Epochs[e]
				if lay.First != first || lay.Rows() != ep.Rows || p.EpochSamples(e) != ep.Rows {
					t.Fatalf("%s: epoch %d layout rows [%d, +%d), record %+v", name, e, lay.First, lay.Rows(), ep)
				}
				var used uint64
				for r := uint64(0); r < lay.Rows(); r++ {
					want := -1
					for _, pc := range lay.Row(r) {
						used += uint64(pc.Len)
						s := 1
						if web(pc.Doc) {
							s = 0
						}
						if scope == ScopePerSource && want >= 0 && s != want {
							t.Fatalf("%s: epoch %d row %d mixes sources", name, e, r)
						}
						if scope == ScopePerSource {
							want = s
						}
						if got := p.DocumentSource(pc.Doc); got != s {
							t.Fatalf("%s: DocumentSource(%d) = %d, want %d", name, pc.Doc, got, s)
						}
					}
					if got := p.SourceOf(first + r); got != want {
						t.Fatalf("%s: SourceOf(row %d) = %d, want %d", name, first+r, got, want)
					}
					if got := p.LayoutEpoch(first + r); got != e {
						t.Fatalf("%s: LayoutEpoch(%d) = %d, want %d", name, first+r, got, e)
					}
				}
				if used != ep.Tokens || ep.Rows*64 != used+ep.PadSlots {
					t.Fatalf("%s: epoch %d record %+v, %d tokens", name, e, ep, used)
				}
				tokens += used
				// Epoch e's order holds each of its rows once (pad slots
				// aside) and no row of another epoch.
				seen := map[uint64]int{}
				bs, pads := globalBatches(t, p, e)
				for k, b := range bs {
					for _, id := range b[:len(b)-pads[k]] {
						if id < first || id >= first+lay.Rows() {
							t.Fatalf("%s: epoch %d holds row %d of another epoch", name, e, id)
						}
						seen[id]++
					}
				}
				if uint64(len(seen)) != lay.Rows() || len(seen) != int(lay.Rows()) {
					t.Fatalf("%s: epoch %d holds %d of its %d rows", name, e, len(seen), lay.Rows())
				}
				if pos, err := p.Position(1-e, first); err != nil || !pos.Dropped {
					t.Fatalf("%s: row %d of epoch %d is in epoch %d: %+v %v", name, first, e, 1-e, pos, err)
				}
				first += lay.Rows()
			}
			if first != p.NumSamples() || first != p.Packing.Rows || tokens != p.Packing.Tokens {
				t.Fatalf("%s: %d rows and %d tokens over the epochs, record %+v", name, first, tokens, p.Packing)
			}
			webTimes, codeTimes := map[int]int{}, map[int]int{}
			for d, k := range all {
				switch {
				case web(d):
					webTimes[k]++
				case codeSel[d]:
					codeTimes[k]++
				default:
					t.Fatalf("%s: document %d is neither web nor a selected code row", name, d)
				}
			}
			if !reflect.DeepEqual(webTimes, map[int]int{1: 528, 2: 472}) || !reflect.DeepEqual(codeTimes, map[int]int{12: 33, 13: 18}) {
				t.Fatalf("%s: web documents by times packed %v (want 528 once, 472 twice), code %v (want 33 12 times, 18 13 times)", name, webTimes, codeTimes)
			}
		}
	}
}

// TestPackedMixtureCoversDownSampled: a down-sampled source packs every
// one of its documents exactly once over ceil(n_i/c_i) epochs (split
// chunk: every token once). web: 1000 rows, weight 5 of T = 300, so c =
// 250 and 4 epochs draw its first pass exactly; code: 51 selected rows,
// c = 50, 200 draws = 3·51 + 47: every row 3 times, 47 of them 4 times.
// Checked for both scopes and both shuffle modes, with pieces split at L.
func TestPackedMixtureCoversDownSampled(t *testing.T) {
	src, sel, codeSel, lengths := packMixFixture(t)
	mix := &Mixture{EpochSamples: 300, Sources: slices.Clone(sel.Sources)}
	mix.Sources[0].Weight, mix.Sources[1].Weight = "5", "1"
	web := func(id uint64) bool { return id < 600 || id >= 680 && id < 1080 }
	for _, scope := range []PackScope{ScopeAcross, ScopePerSource} {
		for _, sh := range []Shuffle{ShuffleGlobal, ShuffleNone} {
			cfg := Config{Seed: 11, Epochs: 4, GlobalBatch: 4, WorldSize: 2, Workers: 1, Shuffle: sh, Remainder: RemainderPartial}
			p, _ := mustPackMix(t, src, cfg, PackOptions{Column: "tokens", Length: 40, Window: 64, Scope: scope}, mix, lengths)
			name := fmt.Sprintf("%s/%s", scope, sh)
			if c := []uint64{p.Mixture.Sources[0].SamplesPerEpoch, p.Mixture.Sources[1].SamplesPerEpoch}; !slices.Equal(c, []uint64{250, 50}) {
				t.Fatalf("%s: quotas %v", name, c)
			}
			all := map[uint64]int{}
			for e := 0; e < 4; e++ {
				times, _ := epochDocs(t, p, lengths, e)
				for d, k := range times {
					all[d] += k
				}
			}
			webDocs, codeTimes := 0, map[int]int{}
			for d, k := range all {
				switch {
				case web(d):
					webDocs++
					if k != 1 {
						t.Fatalf("%s: web document %d packed %d times over 4 epochs, want once", name, d, k)
					}
				case codeSel[d]:
					codeTimes[k]++
				default:
					t.Fatalf("%s: document %d is neither web nor a selected code row", name, d)
				}
			}
			if webDocs != 1000 || !reflect.DeepEqual(codeTimes, map[int]int{3: 4, 4: 47}) {
				t.Fatalf("%s: %d web documents packed (want 1000), code by times %v (want 4 three times, 47 four times)", name, webDocs, codeTimes)
			}
		}
	}
}

// TestPackedMixtureSteps: the epochs of a packed mixture have different
// row counts P_e and the same steps S (PLAN.md §12.1): floor(min P_e / G)
// with drop, ceil(max P_e / G) with pad and partial; epoch e drops its
// last P_e − S·G order slots (Dropped), pads S·G − P_e slots with its
// first rows, or (partial) uses P_e slots; Occurrences inverts RankBatch.
func TestPackedMixtureSteps(t *testing.T) {
	src, mix, _, lengths := packMixFixture(t)
	for _, rem := range []Remainder{RemainderDrop, RemainderPad, RemainderPartial} {
		cfg := Config{Seed: 2, Epochs: 3, GlobalBatch: 6, WorldSize: 3, Workers: 2, Shuffle: ShuffleGlobal, Remainder: rem}
		p, _ := mustPackMix(t, src, cfg, PackOptions{Column: "tokens", Length: 50, Window: 30}, mix, lengths)
		rows := []uint64{p.Packing.Epochs[0].Rows, p.Packing.Epochs[1].Rows, p.Packing.Epochs[2].Rows}
		if rows[0] == rows[1] && rows[1] == rows[2] {
			t.Fatalf("%s: epochs of %v rows: the fixture should give different counts", rem, rows)
		}
		lo, hi := slices.Min(rows), slices.Max(rows)
		want := int((hi + 5) / 6)
		if rem == RemainderDrop {
			want = int(lo / 6)
		}
		if p.Steps() != want {
			t.Fatalf("%s: %d steps for epochs of %v rows, want %d", rem, p.Steps(), rows, want)
		}
		first := uint64(0)
		for e, n := range rows {
			bs, pads := globalBatches(t, p, e)
			var ids []uint64
			npad := 0
			for k, b := range bs {
				ids = append(ids, b...)
				npad += pads[k]
				for i, id := range b {
					var occ []Position
					occ, err := p.Occurrences(e, id, occ)
					if err != nil {
						t.Fatal(err)
					}
					found := false
					for _, o := range occ {
						found = found || o.Step == k && o.Rank*2+o.Slot == i
					}
					if !found {
						t.Fatalf("%s: epoch %d step %d slot %d: Occurrences(%d) = %v", rem, e, k, i, id, occ)
					}
				}
			}
			dropped, err := p.Dropped(e)
			if err != nil {
				t.Fatal(err)
			}
			used := uint64(len(ids) - npad)
			switch rem {
			case RemainderDrop:
				if used != uint64(want*6) || uint64(len(dropped)) != n-used || npad != 0 {
					t.Fatalf("drop: epoch %d of %d rows uses %d, drops %d", e, n, used, len(dropped))
				}
			case RemainderPad:
				if used != n || uint64(npad) != uint64(want*6)-n || len(dropped) != 0 {
					t.Fatalf("pad: epoch %d of %d rows uses %d, pads %d", e, n, used, npad)
				}
				for i := 0; i < npad; i++ { // pads repeat the epoch's first slots
					if ids[int(n)+i] != ids[i%int(n)] {
						t.Fatalf("pad: epoch %d pad %d is %d, want %d", e, i, ids[int(n)+i], ids[i%int(n)])
					}
				}
			case RemainderPartial:
				if used != n || npad != 0 || len(dropped) != 0 {
					t.Fatalf("partial: epoch %d of %d rows uses %d", e, n, used)
				}
			}
			all := append(slices.Clone(ids[:used]), dropped...)
			slices.Sort(all)
			for i, id := range all {
				if id != first+uint64(i) {
					t.Fatalf("%s: epoch %d's slots and dropped ids are not its rows [%d, %d)", rem, e, first, first+n)
				}
			}
			first += n
		}
	}
}

// TestPackedMixtureWorldSizes: a packed mixture's per-epoch packing,
// order fingerprint, epoch digests and global batches are the same at
// world sizes 1, 2 and 8 and any worker count, over 3 epochs of different
// row counts; a cursor taken at any global step resumes the same tail at
// another world size, and resumes chained across R = 1, 2, 8 give the
// uninterrupted run.
func TestPackedMixtureWorldSizes(t *testing.T) {
	src, mix, _, lengths := packMixFixture(t)
	for _, scope := range []PackScope{ScopeAcross, ScopePerSource} {
		opts := PackOptions{Column: "tokens", Length: 48, Window: 40, Scope: scope}
		plans := map[int]*Plan{}
		for _, rw := range [][2]int{{1, 1}, {2, 3}, {8, 2}} {
			plans[rw[0]], _ = mustPackMix(t, src, Config{Seed: 9, Epochs: 3, GlobalBatch: 16, WorldSize: rw[0], Workers: rw[1], Shuffle: ShuffleGlobal, Remainder: RemainderPad}, opts, mix, lengths)
		}
		ref := plans[1]
		if r := ref.Packing.Epochs; r[0].Rows == r[1].Rows && r[1].Rows == r[2].Rows {
			t.Fatalf("%s: epochs of %d rows each: the fixture should give different counts", scope, r[0].Rows)
		}
		var full []uint64
		for e := 0; e < 3; e++ {
			bs, _ := globalBatches(t, ref, e)
			for _, b := range bs {
				full = append(full, b...)
			}
		}
		for _, r := range []int{2, 8} {
			p := plans[r]
			if p.OrderFingerprint != ref.OrderFingerprint || p.Fingerprint == ref.Fingerprint || !reflect.DeepEqual(p.Packing, ref.Packing) {
				t.Fatalf("%s R=%d: order fingerprint or packing differs from R=1", scope, r)
			}
			for e := range p.Epochs {
				if p.Epochs[e].Digest != ref.Epochs[e].Digest {
					t.Fatalf("%s R=%d: epoch %d digest differs from R=1", scope, r, e)
				}
			}
		}
		step := func(q *Plan, c Cursor, steps int) ([]uint64, Cursor) {
			e, k, done, err := q.Resume(c)
			if err != nil {
				t.Fatal(err)
			}
			var out []uint64
			for ; !done && steps != 0; steps-- {
				for r := 0; r < q.Config.WorldSize; r++ {
					ids, _, err := q.RankBatch(e, r, k, nil)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, ids...)
				}
				if k++; k == q.Steps() {
					e, k = e+1, 0
					done = e == q.Config.Epochs
				}
			}
			return out, q.CursorAt(e, k)
		}
		for s := 0; s <= 3*ref.Steps(); s++ {
			for _, r := range []int{2, 8} {
				got, _ := step(plans[r], Cursor{Fingerprint: ref.OrderFingerprint, GlobalStep: uint64(s)}, -1)
				if !slices.Equal(got, full[s*16:]) {
					t.Fatalf("%s R=%d: resume at global step %d differs from the uninterrupted tail", scope, r, s)
				}
			}
		}
		var chained []uint64
		c := ref.CursorAt(0, 0)
		for i := 0; ; i++ {
			var got []uint64
			got, c = step(plans[[]int{1, 2, 8}[i%3]], c, 2)
			if len(got) == 0 {
				break
			}
			chained = append(chained, got...)
		}
		if !slices.Equal(chained, full) {
			t.Fatalf("%s: chained resumes across R = 1, 2, 8 differ from the uninterrupted run", scope)
		}
	}
}

// TestPackedMixtureLoad: a packed mixture (format prep-plan/v2) survives
// Marshal and Parse, each epoch's layout is recomputed from the lengths
// (a changed length is refused), the two scopes and an unpacked mixture
// have different order fingerprints, a tampered scope, epoch record or
// source_rows is refused on load, and so is a packed mixture written as
// prep-plan/v1 (packed once for every epoch by an earlier prep), with a
// message saying to make the plan again.
func TestPackedMixtureLoad(t *testing.T) {
	src, mix, _, lengths := packMixFixture(t)
	cfg := Config{Seed: 1, Epochs: 2, GlobalBatch: 4, WorldSize: 1, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderDrop}
	fps := map[string]bool{mustMix(t, src, cfg, mix).OrderFingerprint: true}
	for _, scope := range []PackScope{"", ScopePerSource} {
		p, lay := mustPackMix(t, src, cfg, PackOptions{Column: "tokens", Length: 32, Window: 64, Scope: scope}, mix, lengths)
		if scope == "" && p.Packing.Scope != ScopeAcross {
			t.Fatalf("default scope %q, want across", p.Packing.Scope)
		}
		fps[p.OrderFingerprint] = true
		b, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"format": "prep-plan/v2"`) {
			t.Fatal("a packed mixture is not written as prep-plan/v2")
		}
		q, err := Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if q.Fingerprint != p.Fingerprint || !reflect.DeepEqual(q.Packing, p.Packing) {
			t.Fatal("plan changed through Marshal and Parse")
		}
		got, err := q.PackLayout(context.Background(), lengths, 0)
		if err != nil || !reflect.DeepEqual(got, lay) {
			t.Fatalf("recomputed layout differs: %v", err)
		}
		if _, err := q.PackLayout(context.Background(), lengths, 2); !errors.Is(err, ErrRange) {
			t.Fatalf("epoch 2 of 2: %v", err)
		}
		changed := slices.Clone(lengths)
		changed[700]++
		if _, err := q.PackLayout(context.Background(), changed, 1); !errors.Is(err, ErrMismatch) {
			t.Fatalf("changed lengths: %v", err)
		}
		ep := p.Packing.Epochs[1]
		tamper := []string{
			strings.Replace(string(b), fmt.Sprintf(`"rows": %d,`, ep.Rows), fmt.Sprintf(`"rows": %d,`, ep.Rows+1), 1),
			strings.Replace(string(b), `"format": "prep-plan/v2"`, `"format": "prep-plan/v1"`, 1),
		}
		if scope == ScopePerSource {
			r := ep.SourceRows
			tamper = append(tamper, strings.Replace(string(b), fmt.Sprintf("\"source_rows\": [\n          %d,\n          %d\n        ]", r[0], r[1]),
				fmt.Sprintf("\"source_rows\": [\n          %d,\n          %d\n        ]", r[0]+1, r[1]-1), 1))
		} else {
			tamper = append(tamper, strings.Replace(string(b), `"scope": "across",`, "", 1))
		}
		for i, bad := range tamper {
			if bad == string(b) {
				t.Fatalf("tampering %d found nothing to replace", i)
			}
			if _, err := Parse([]byte(bad)); err == nil {
				t.Fatalf("scope %s: tampered packing record %d loads", scope, i)
			}
		}
		if _, err := Parse([]byte(tamper[1])); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "make the plan again") {
			t.Fatalf("a prep-plan/v1 packed mixture: %v", err)
		}
	}
	if len(fps) != 3 {
		t.Fatal("scopes across, per_source and no packing share an order fingerprint")
	}
	// A scope without a mixture is refused.
	opts := PackOptions{Column: "tokens", Length: 32, Scope: ScopeAcross}
	nsrc := goldenSources()["b27"]
	if _, _, err := NewPacked(context.Background(), nsrc, cfg, opts, lcgLengths(int(mustNorm(t, nsrc).NumSamples()), 1, 10, 20), nil); !errors.Is(err, ErrFormat) && !errors.Is(err, ErrConfig) {
		t.Fatalf("scope without a mixture: %v", err)
	}
	opts.Scope = "per_row"
	if _, _, err := NewPackedMixture(context.Background(), src, cfg, opts, mix, lengths, nil); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "scope") {
		t.Fatalf("unknown scope: %v", err)
	}
}

// TestPackedMixtureV1Refused: a packed mixture plan written by an earlier
// prep (testdata/packed-mixture-v1.json: format prep-plan/v1, packed once
// for every epoch, no packing.epochs) is refused on load with ErrFormat,
// naming the format and saying to make the plan again; it is not read as
// a plan of today's format.
func TestPackedMixtureV1Refused(t *testing.T) {
	_, err := Load(filepath.Join("testdata", "packed-mixture-v1.json"))
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "prep-plan/v1") || !strings.Contains(err.Error(), "make the plan again") ||
		!strings.Contains(err.Error(), "packed-mixture-v1.json") {
		t.Fatalf("a prep-plan/v1 packed mixture: %v", err)
	}
}

// ---- golden vectors (testdata/golden-pack-mixture.json, format prep-plan/v2), never regenerated ----

const goldenPackMixPath = "testdata/golden-pack-mixture.json"

type goldenPackMixPlan struct {
	Name             string        `json:"name"`
	Source           Source        `json:"source"`
	Config           Config        `json:"config"`
	Mixture          *Mixture      `json:"mixture"`
	Options          PackOptions   `json:"options"`
	Lengths          []uint32      `json:"lengths"`
	Packing          Packing       `json:"packing"`
	Resolved         *Mixture      `json:"resolved"`
	OrderFingerprint string        `json:"order_fingerprint"`
	Fingerprint      string        `json:"fingerprint"`
	Derived          Derived       `json:"derived"`
	EpochDigests     []string      `json:"epoch_digests"`
	Batches          []goldenBatch `json:"batches"`
}

type goldenPackMixFile struct {
	Format        string              `json:"format"`
	Algorithm     string              `json:"algorithm"`
	PackedMixture string              `json:"packed_mixture"`
	Plans         []goldenPackMixPlan `json:"plans"`
}

func makeGoldenPackMix(t *testing.T) goldenPackMixFile {
	g := goldenPackMixFile{Format: FormatPackedMixture, Algorithm: Algorithm, PackedMixture: MixtureVersion}
	src, mix := mixFixture()
	_, sel, _ := selFixture()
	three := &Mixture{EpochSamples: 300, Sources: slices.Clone(sel.Sources)}
	three.Sources[0].Weight = "2"
	three.Sources[1].Weight = "1"
	lengths := lcgLengths(int(mustNorm(t, src).NumSamples()), 23, 25, 150)
	for _, c := range []struct {
		name string
		mix  *Mixture
		cfg  Config
		opts PackOptions
	}{
		{"across/global/pad", mix, Config{Seed: 4, Epochs: 2, GlobalBatch: 6, WorldSize: 2, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderPad},
			PackOptions{Column: "tokens", Length: 64, EOD: i64p(0), Window: 32, Scope: ScopeAcross}},
		{"per_source/global/drop", mix, Config{Seed: 5, Epochs: 2, GlobalBatch: 4, WorldSize: 4, Workers: 2, Shuffle: ShuffleGlobal, Remainder: RemainderDrop},
			PackOptions{Column: "tokens", Length: 100, Split: SplitNone, Pad: 7, Window: 25, Scope: ScopePerSource}},
		{"across/none/partial/filter", three, Config{Seed: 6, Epochs: 3, GlobalBatch: 5, WorldSize: 1, Workers: 1, Shuffle: ShuffleNone, Remainder: RemainderPartial},
			PackOptions{Column: "t", Length: 40, Window: 16, Scope: ScopeAcross}},
		{"per_source/global/pad/filter", three, Config{Seed: 7, Epochs: 2, GlobalBatch: 8, WorldSize: 8, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderPad},
			PackOptions{Column: "t", Length: 128, EOD: i64p(1), Window: 10, Scope: ScopePerSource}},
	} {
		p, _, err := NewPackedMixture(context.Background(), src, c.cfg, c.opts, c.mix, lengths, nil)
		if err != nil {
			t.Fatal(err)
		}
		gp := goldenPackMixPlan{Name: c.name, Source: p.Source, Config: c.cfg, Mixture: c.mix, Options: c.opts, Lengths: lengths, Packing: *p.Packing,
			Resolved: p.Mixture, OrderFingerprint: p.OrderFingerprint, Fingerprint: p.Fingerprint, Derived: p.Derived}
		for _, e := range p.Epochs {
			gp.EpochDigests = append(gp.EpochDigests, e.Digest)
		}
		for e := 0; e < c.cfg.Epochs; e++ {
			for r := 0; r < c.cfg.WorldSize; r++ {
				for _, k := range []int{0, p.Steps() - 1} {
					ids, pads, err := p.RankBatch(e, r, k, nil)
					if err != nil {
						t.Fatal(err)
					}
					gp.Batches = append(gp.Batches, goldenBatch{Epoch: e, Rank: r, Step: k, IDs: append([]uint64{}, ids...), Pads: pads})
				}
			}
		}
		g.Plans = append(g.Plans, gp)
	}
	return g
}

// TestGoldenPackMixture compares packed mixtures with the vectors pinned
// in testdata/golden-pack-mixture.json (created once with -golden-write
// for format prep-plan/v2, which packs each epoch's draws; never
// regenerated).
func TestGoldenPackMixture(t *testing.T) {
	got := makeGoldenPackMix(t)
	want := readGoldenJSON(t, goldenPackMixPath, func() goldenPackMixFile { return got })
	if len(want.Plans) != 4 {
		t.Fatalf("golden file holds %d plans, want the 4 it was written with", len(want.Plans))
	}
	for i := range want.Plans {
		a, _ := json.Marshal(got.Plans[i]) // Source holds an unexported index
		b, _ := json.Marshal(want.Plans[i])
		if string(a) != string(b) {
			t.Errorf("packed mixture %s differs from the golden vectors", want.Plans[i].Name)
		}
	}
}

// TestReferencePackMixture runs the Python reference (standard library
// only) over the packed-mixture golden vectors.
func TestReferencePackMixture(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed: the reference implementation cannot run")
	}
	out, err := exec.Command(py, filepath.Join("reference", "plan_ref.py"), goldenPackMixPath).CombinedOutput()
	if err != nil {
		t.Fatalf("reference implementation: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), " 0 mismatches") {
		t.Fatalf("unexpected output:\n%s", out)
	}
	t.Logf("%s", out)
}
