package plan

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

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
