package plan

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestMarshalIndentSplicesSelections: Marshal, which splices the
// selections into the indented JSON instead of encoding them, gives the
// bytes of json.MarshalIndent for a plan with two filtered sources whose
// filter texts hold the bytes the splice looks for ("selection": "-",
// quoted and not), for one with a selection holding a byte JSON escapes
// (the plain path), and for one without a mixture.
func TestMarshalIndentSplicesSelections(t *testing.T) {
	src, mix, _ := selFixture()
	m := *mix
	m.Sources = slices.Clone(mix.Sources)
	m.Sources[0].Filter = `c = '"selection": "-"' OR d = 'selection: -'`
	m.Sources[0].Selection = EncodeSelection([][2]uint64{{0, 1}, {5, 300}, {700, 200}})
	m.Sources[1].Filter = `"selection" = '-'`
	p := mustMix(t, src, Config{Seed: 1, Epochs: 2, GlobalBatch: 16, WorldSize: 2, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderDrop}, &m)
	plain := mustNew(t, src, Config{Seed: 1, Epochs: 1, GlobalBatch: 16, WorldSize: 1, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderDrop})
	escaped := *p
	em := *p.Mixture
	em.Sources = slices.Clone(p.Mixture.Sources)
	em.Sources[1].Selection = "AQID\nBAU=<&"
	escaped.Mixture = &em
	for name, q := range map[string]*Plan{"filtered": p, "escaped selection": &escaped, "plain": plain} {
		want, err := json.MarshalIndent(q, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got, err := q.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, append(want, '\n')) {
			t.Errorf("%s: Marshal differs from json.MarshalIndent:\n%s\nwant\n%s", name, got, want)
		}
		// Save writes the same bytes, in pieces.
		path := filepath.Join(t.TempDir(), "plan.json")
		if err := q.Save(path); err != nil {
			t.Fatal(err)
		}
		if saved, err := os.ReadFile(path); err != nil || !bytes.Equal(saved, append(want, '\n')) {
			t.Errorf("%s: the saved file differs from json.MarshalIndent (%v):\n%s\nwant\n%s", name, err, saved, want)
		}
	}
}
