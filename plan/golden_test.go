package plan

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The golden vectors pin prep-plan/v1 with algorithm feistel6-mx/v1 forever.
// -golden-write creates testdata/golden.json only when it does not exist: a
// change of any order needs a new Algorithm id and a new file, never a
// regenerated one.
var goldenWrite = flag.Bool("golden-write", false, "create testdata/golden.json if missing (never overwrites)")

const goldenPath = "testdata/golden.json"

type goldenPerm struct {
	N       uint64      `json:"n"`
	Purpose string      `json:"purpose"`
	Seed    uint64      `json:"seed"`
	Epoch   uint64      `json:"epoch"`
	Index   uint64      `json:"index"`
	Keys    []string    `json:"keys"`
	First   []uint64    `json:"first"`
	Probes  [][2]uint64 `json:"probes"`
}

type goldenBatch struct {
	Epoch int      `json:"epoch"`
	Rank  int      `json:"rank"`
	Step  int      `json:"step"`
	IDs   []uint64 `json:"ids"`
	Pads  int      `json:"pads"`
}

type goldenPlan struct {
	Name              string        `json:"name"`
	Source            Source        `json:"source"`
	Config            Config        `json:"config"`
	SourceFingerprint string        `json:"source_fingerprint"`
	OrderFingerprint  string        `json:"order_fingerprint"`
	Fingerprint       string        `json:"fingerprint"`
	Derived           Derived       `json:"derived"`
	EpochDigests      []string      `json:"epoch_digests"`
	Batches           []goldenBatch `json:"batches"`
}

type goldenFile struct {
	Format    string       `json:"format"`
	Algorithm string       `json:"algorithm"`
	Perms     []goldenPerm `json:"perms"`
	Plans     []goldenPlan `json:"plans"`
}

func goldenPermOf(n uint64, purpose string, seed, epoch, index uint64) goldenPerm {
	p := NewPerm(n, purpose, seed, epoch, index)
	g := goldenPerm{N: n, Purpose: purpose, Seed: seed, Epoch: epoch, Index: index, First: []uint64{}, Probes: [][2]uint64{}}
	for _, k := range p.keys {
		g.Keys = append(g.Keys, fmt.Sprintf("%016x", k))
	}
	for x := uint64(0); x < min(n, 16); x++ {
		g.First = append(g.First, p.Apply(x))
	}
	if n > 0 {
		for _, x := range []uint64{n - 1, n / 2, n / 3, n / 7 * 5} {
			g.Probes = append(g.Probes, [2]uint64{x, p.Apply(x)})
		}
	}
	return g
}

func goldenSources() map[string]Source {
	fake := func(i int) string { return strings.Repeat(fmt.Sprintf("%x", i%16), 64) }
	b27 := Source{Files: []SourceFile{
		{Path: "part-0.parquet", Size: 1687, FooterSHA256: fake(1), RowGroups: []int64{16, 16, 8}},
		{Path: "part-1.parquet", Size: 1686, FooterSHA256: fake(2), RowGroups: []int64{16, 16, 8}},
		{Path: "part-2.parquet", Size: 1120, FooterSHA256: fake(3), RowGroups: []int64{16, 7}},
	}}
	skew := Source{Files: []SourceFile{
		{Path: "b/x.parquet", Size: 500, FooterSHA256: fake(4), RowGroups: []int64{5, 0, 11}},
		{Path: "a.parquet", Size: 400, FooterSHA256: fake(5), RowGroups: []int64{0, 7, 3}},
		{Path: "b/empty.parquet", Size: 99, FooterSHA256: fake(6), RowGroups: []int64{}},
		{Path: "c.parquet", Size: 300, FooterSHA256: fake(7), RowGroups: []int64{1, 1, 1, 20}},
	}}
	return map[string]Source{"b27": b27, "skew": skew}
}

func goldenPlans(t *testing.T) []goldenPlan {
	type pc struct {
		src string
		cfg Config
	}
	var cases []pc
	for _, mode := range allModes {
		for _, rem := range allRemainders {
			c := Config{Seed: 7, Epochs: 2, GlobalBatch: 4, WorldSize: 4, Workers: 3, Shuffle: mode, Remainder: rem}
			if mode == ShuffleBlocks {
				c.Window = 2
			}
			if !(mode == ShufflePartitioned && rem == RemainderPad) {
				cases = append(cases, pc{"b27", c})
			}
			c2 := Config{Seed: 0, Epochs: 2, GlobalBatch: 6, WorldSize: 2, Workers: 2, Shuffle: mode, Remainder: rem}
			if mode == ShuffleBlocks {
				c2.Window = 3
			}
			cases = append(cases, pc{"skew", c2})
		}
	}
	cases = append(cases, pc{"b27", Config{Seed: 1<<64 - 1, Epochs: 3, GlobalBatch: 10, WorldSize: 5, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderPad}})
	srcs := goldenSources()
	var out []goldenPlan
	for _, c := range cases {
		p := mustNew(t, srcs[c.src], c.cfg)
		g := goldenPlan{
			Name:   fmt.Sprintf("%s/%s/%s/G%dR%d", c.src, c.cfg.Shuffle, c.cfg.Remainder, c.cfg.GlobalBatch, c.cfg.WorldSize),
			Source: srcs[c.src], Config: c.cfg,
			SourceFingerprint: p.SourceFingerprint, OrderFingerprint: p.OrderFingerprint, Fingerprint: p.Fingerprint,
			Derived: p.Derived,
		}
		for _, e := range p.Epochs {
			g.EpochDigests = append(g.EpochDigests, e.Digest)
		}
		for e := 0; e < c.cfg.Epochs; e++ {
			for r := 0; r < c.cfg.WorldSize; r++ {
				for k := 0; k < p.Steps(); k++ {
					ids, pads, err := p.RankBatch(e, r, k, nil)
					if err != nil {
						t.Fatal(err)
					}
					g.Batches = append(g.Batches, goldenBatch{Epoch: e, Rank: r, Step: k, IDs: append([]uint64{}, ids...), Pads: pads})
				}
			}
		}
		out = append(out, g)
	}
	return out
}

func makeGolden(t *testing.T) goldenFile {
	g := goldenFile{Format: FormatVersion, Algorithm: Algorithm}
	for _, n := range []uint64{1, 2, 3, 5, 10, 17, 1000, 65535, 65536, 65537, 1_000_000_007, 1<<40 + 1, 1<<63 + 1, 1<<64 - 1} {
		g.Perms = append(g.Perms, goldenPermOf(n, purposeGlobal, 7, 0, 0))
	}
	for _, seed := range []uint64{0, 1, 1<<64 - 1} {
		for _, purpose := range []string{purposeGlobal, purposeBlocks, purposeWindow, purposePartition} {
			g.Perms = append(g.Perms, goldenPermOf(100, purpose, seed, 3, 2))
		}
	}
	g.Plans = goldenPlans(t)
	return g
}

func readGolden(t *testing.T) goldenFile {
	return readGoldenJSON(t, goldenPath, func() goldenFile { return makeGolden(t) })
}

// readGoldenJSON reads the golden vectors at path into a T. When the file
// is missing and -golden-write is set, it first writes make's vectors there
// (never overwriting a committed file).
func readGoldenJSON[T any](t *testing.T, path string, make func() T) T {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && *goldenWrite {
		out, err := json.MarshalIndent(make(), "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		b = out
	} else if err != nil {
		t.Fatal(err)
	}
	var g T
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestGoldenVectors checks the Go implementation against the committed
// golden vectors.
func TestGoldenVectors(t *testing.T) {
	g := readGolden(t)
	if g.Format != FormatVersion || g.Algorithm != Algorithm {
		t.Fatalf("golden file is for %s %s", g.Format, g.Algorithm)
	}
	for _, v := range g.Perms {
		want := v
		got := goldenPermOf(v.N, v.Purpose, v.Seed, v.Epoch, v.Index)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("perm n=%d %s seed=%d: got %+v, want %+v", v.N, v.Purpose, v.Seed, got, want)
		}
		p := NewPerm(v.N, v.Purpose, v.Seed, v.Epoch, v.Index)
		for _, pr := range v.Probes {
			if p.Invert(pr[1]) != pr[0] {
				t.Errorf("perm n=%d: Invert(%d) != %d", v.N, pr[1], pr[0])
			}
		}
	}
	for _, v := range g.Plans {
		p, err := New(v.Source, v.Config)
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if p.SourceFingerprint != v.SourceFingerprint || p.OrderFingerprint != v.OrderFingerprint || p.Fingerprint != v.Fingerprint {
			t.Errorf("%s: fingerprints changed", v.Name)
		}
		if fmt.Sprint(p.Derived) != fmt.Sprint(v.Derived) {
			t.Errorf("%s: derived %+v, want %+v", v.Name, p.Derived, v.Derived)
		}
		if len(v.EpochDigests) != v.Config.Epochs {
			t.Errorf("%s: %d epoch digests for %d epochs", v.Name, len(v.EpochDigests), v.Config.Epochs)
		}
		for e, d := range v.EpochDigests {
			if p.Epochs[e].Digest != d {
				t.Errorf("%s: epoch %d digest changed", v.Name, e)
			}
		}
		for _, b := range v.Batches {
			ids, pads, err := p.RankBatch(b.Epoch, b.Rank, b.Step, nil)
			if err != nil || !slices.Equal(ids, b.IDs) || pads != b.Pads {
				t.Errorf("%s: batch e%d r%d s%d = %v/%d %v, want %v/%d", v.Name, b.Epoch, b.Rank, b.Step, ids, pads, err, b.IDs, b.Pads)
			}
		}
	}
	if len(g.Plans) != 24 || len(g.Perms) != 26 {
		t.Errorf("golden file holds %d plans and %d perms, want the 24 and 26 it was written with", len(g.Plans), len(g.Perms))
	}
}

// TestReferenceImplementation runs the independent Python reference
// (reference/plan_ref.py, standard library only) over the golden vectors:
// the spec, not this binary, defines the order.
func TestReferenceImplementation(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed: the reference implementation cannot run")
	}
	cmd := exec.Command(py, filepath.Join("reference", "plan_ref.py"), goldenPath)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("reference implementation: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), " 0 mismatches") {
		t.Fatalf("unexpected output:\n%s", out)
	}
	t.Logf("%s", out)
}

// The mixture golden vectors pin PLAN.md §11 forever, as golden.json pins
// §1–§10: -golden-write creates the file only when it does not exist.
const goldenMixturePath = "testdata/golden-mixture.json"

type goldenMixPlan struct {
	goldenPlan
	Mixture *Mixture `json:"mixture"`
	// Resolved is the plan's mixture: quotas, rows and T derived.
	Resolved *Mixture `json:"resolved"`
}

type goldenMixFile struct {
	Format    string          `json:"format"`
	Algorithm string          `json:"algorithm"`
	Mixture   string          `json:"mixture"`
	Plans     []goldenMixPlan `json:"plans"`
}

func goldenMixCases() []goldenMixPlan {
	src, mix := mixFixture()
	three := &Mixture{EpochSamples: 97, Sources: []MixSource{
		{Name: "c", Weight: "0.5", Paths: []string{"b-0.parquet"}, Files: []string{"b-0.parquet"}},
		{Name: "a", Paths: []string{"a-0.parquet", "d-*"}, Files: []string{"a-0.parquet", "d-1.parquet", "d-2.parquet"}},
		{Name: "z", Weight: "2.25", Paths: []string{"c-1.parquet"}, Files: []string{"c-1.parquet"}},
	}}
	byRows := &Mixture{Sources: []MixSource{
		{Name: "web", Paths: mix.Sources[0].Paths, Files: mix.Sources[0].Files},
		{Name: "code", Paths: mix.Sources[1].Paths, Files: mix.Sources[1].Files},
	}}
	type c struct {
		name string
		mix  *Mixture
		cfg  Config
	}
	cases := []c{
		{"web-code/global/partial/G16R2", mix, Config{Seed: 7, Epochs: 3, GlobalBatch: 16, WorldSize: 2, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderPartial}},
		{"web-code/global/pad/G24R4", mix, Config{Seed: 0, Epochs: 2, GlobalBatch: 24, WorldSize: 4, Workers: 3, Shuffle: ShuffleGlobal, Remainder: RemainderPad}},
		{"web-code/none/drop/G10R1", mix, Config{Seed: 1, Epochs: 2, GlobalBatch: 10, WorldSize: 1, Workers: 1, Shuffle: ShuffleNone, Remainder: RemainderDrop}},
		{"three/global/pad/G8R2", three, Config{Seed: 1<<64 - 1, Epochs: 4, GlobalBatch: 8, WorldSize: 2, Workers: 2, Shuffle: ShuffleGlobal, Remainder: RemainderPad}},
		{"three/global/drop/G5R5", three, Config{Seed: 3, Epochs: 3, GlobalBatch: 5, WorldSize: 5, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderDrop}},
		{"three/none/partial/G200R1", three, Config{Seed: 3, Epochs: 2, GlobalBatch: 200, WorldSize: 1, Workers: 1, Shuffle: ShuffleNone, Remainder: RemainderPartial}},
		{"by-rows/global/partial/G64R8", byRows, Config{Seed: 42, Epochs: 2, GlobalBatch: 64, WorldSize: 8, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderPartial}},
	}
	var out []goldenMixPlan
	for _, k := range cases {
		out = append(out, goldenMixPlan{goldenPlan: goldenPlan{Name: k.name, Source: src, Config: k.cfg}, Mixture: k.mix})
	}
	return out
}

func fillGoldenMix(t *testing.T, g *goldenMixPlan) *Plan {
	p, err := NewMixtureContext(context.Background(), g.Source, g.Config, g.Mixture, nil)
	if err != nil {
		t.Fatalf("%s: %v", g.Name, err)
	}
	g.SourceFingerprint, g.OrderFingerprint, g.Fingerprint, g.Derived, g.Resolved = p.SourceFingerprint, p.OrderFingerprint, p.Fingerprint, p.Derived, p.Mixture
	g.EpochDigests, g.Batches = nil, nil
	for e := range p.Epochs {
		g.EpochDigests = append(g.EpochDigests, p.Epochs[e].Digest)
		for r := 0; r < g.Config.WorldSize; r++ {
			for k := 0; k < p.Steps(); k++ {
				ids, pads, err := p.RankBatch(e, r, k, nil)
				if err != nil {
					t.Fatal(err)
				}
				g.Batches = append(g.Batches, goldenBatch{Epoch: e, Rank: r, Step: k, IDs: append([]uint64{}, ids...), Pads: pads})
			}
		}
	}
	return p
}

// goldenSelectionPath pins §11.7 (sources with row filters).
const goldenSelectionPath = "testdata/golden-selection.json"

func goldenSelCases() []goldenMixPlan {
	src, mix, _ := selFixture()
	both := &Mixture{EpochSamples: 64, Sources: slices.Clone(mix.Sources)}
	both.Sources[0].Filter = "lang = 'en'"
	both.Sources[0].Weight = ""
	both.Sources[0].Selection = EncodeSelection([][2]uint64{{0, 1}, {2, 300}, {999, 1}})
	var out []goldenMixPlan
	for _, k := range []struct {
		name string
		mix  *Mixture
		cfg  Config
	}{
		{"code-filtered/global/partial/G16R2", mix, Config{Seed: 6, Epochs: 3, GlobalBatch: 16, WorldSize: 2, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderPartial}},
		{"both-filtered/global/pad/G10R5", both, Config{Seed: 0, Epochs: 3, GlobalBatch: 10, WorldSize: 5, Workers: 2, Shuffle: ShuffleGlobal, Remainder: RemainderPad}},
		{"both-filtered/none/drop/G7R1", both, Config{Seed: 9, Epochs: 2, GlobalBatch: 7, WorldSize: 1, Workers: 1, Shuffle: ShuffleNone, Remainder: RemainderDrop}},
	} {
		out = append(out, goldenMixPlan{goldenPlan: goldenPlan{Name: k.name, Source: src, Config: k.cfg}, Mixture: k.mix})
	}
	return out
}

func readGoldenMix(t *testing.T) goldenMixFile {
	return readGoldenFile(t, goldenMixturePath, goldenMixCases)
}

func readGoldenFile(t *testing.T, path string, cases func() []goldenMixPlan) goldenMixFile {
	return readGoldenJSON(t, path, func() goldenMixFile {
		g := goldenMixFile{Format: FormatVersion, Algorithm: Algorithm, Mixture: MixtureVersion, Plans: cases()}
		for i := range g.Plans {
			fillGoldenMix(t, &g.Plans[i])
		}
		return g
	})
}

// TestGoldenMixture checks mixture plans against the committed vectors.
func TestGoldenMixture(t *testing.T) {
	checkGoldenMix(t, readGoldenMix(t), goldenMixCases)
}

// TestGoldenSelection checks filtered mixture plans (§11.7).
func TestGoldenSelection(t *testing.T) {
	checkGoldenMix(t, readGoldenFile(t, goldenSelectionPath, goldenSelCases), goldenSelCases)
}

func checkGoldenMix(t *testing.T, g goldenMixFile, cases func() []goldenMixPlan) {
	if g.Format != FormatVersion || g.Algorithm != Algorithm || g.Mixture != MixtureVersion {
		t.Fatalf("golden mixture file is for %s %s %s", g.Format, g.Algorithm, g.Mixture)
	}
	if len(g.Plans) != len(cases()) {
		t.Fatalf("golden mixture file holds %d plans, want %d", len(g.Plans), len(cases()))
	}
	for _, want := range g.Plans {
		got := want
		fillGoldenMix(t, &got)
		if got.SourceFingerprint != want.SourceFingerprint || got.OrderFingerprint != want.OrderFingerprint || got.Fingerprint != want.Fingerprint {
			t.Errorf("%s: fingerprints changed", want.Name)
		}
		if fmt.Sprint(got.Derived) != fmt.Sprint(want.Derived) || mixtureText(got.Resolved) != mixtureText(want.Resolved) {
			t.Errorf("%s: derived %+v %s, want %+v %s", want.Name, got.Derived, mixtureText(got.Resolved), want.Derived, mixtureText(want.Resolved))
		}
		if !slices.Equal(got.EpochDigests, want.EpochDigests) {
			t.Errorf("%s: epoch digests changed", want.Name)
		}
		if fmt.Sprint(got.Batches) != fmt.Sprint(want.Batches) {
			t.Errorf("%s: batches changed", want.Name)
		}
	}
}

// TestReferenceMixture runs the independent Python reference over the
// mixture and selection golden vectors.
func TestReferenceMixture(t *testing.T) {
	for _, path := range []string{goldenMixturePath, goldenSelectionPath} {
		referenceMixture(t, path)
	}
}

func referenceMixture(t *testing.T, path string) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed: the reference implementation cannot run")
	}
	out, err := exec.Command(py, filepath.Join("reference", "plan_ref.py"), path).CombinedOutput()
	if err != nil {
		t.Fatalf("reference implementation: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), " 0 mismatches") || !strings.Contains(string(out), "mixture") {
		t.Fatalf("unexpected output:\n%s", out)
	}
	t.Logf("%s", out)
}
