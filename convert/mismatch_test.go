package convert

import (
	"testing"

	"github.com/prepml/prep/plan"
)

// TestInputDifferencesNameTheInput: a refused rerun says which plan input,
// which source files and whether the spec differ, not only fingerprints.
func TestInputDifferencesNameTheInput(t *testing.T) {
	a := plan.Config{Seed: 7, Epochs: 2, GlobalBatch: 16, WorldSize: 2, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderDrop}
	b := a
	b.Seed, b.GlobalBatch, b.Remainder = 8, 32, plan.RemainderPad
	got := configDifferences(a, b)
	want := []string{"seed: the set's 7, this run's 8", "global batch: the set's 16, this run's 32", "remainder: the set's drop, this run's pad"}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("got %q, want %q", got[i], want[i])
		}
	}
	if d := configDifferences(a, a); d != nil {
		t.Errorf("same config: %q", d)
	}
	f := func(path string, size int64) plan.SourceFile {
		return plan.SourceFile{Path: path, Size: size, FooterSHA256: "ab", RowGroups: []int64{10}}
	}
	old := plan.Source{Files: []plan.SourceFile{f("a.parquet", 1), f("b.parquet", 2), f("c.parquet", 3), f("d.parquet", 4), f("e.parquet", 5), f("gone.parquet", 6)}}
	now := plan.Source{Files: []plan.SourceFile{f("a.parquet", 1), f("b.parquet", 20), f("c.parquet", 30), f("d.parquet", 40), f("e.parquet", 50), f("new.parquet", 7)}}
	if got, want := sourceDifferences(old, now), "source files: 4 changed (b.parquet, c.parquet, d.parquet, 1 more), 1 added (new.parquet), 1 removed (gone.parquet)"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := sourceDifferences(old, old); got != "" {
		t.Errorf("same source: %q", got)
	}
}
