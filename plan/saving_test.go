package plan

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestNewMixtureContextSaving: the file committed holds exactly Save's
// bytes (digests in place of the placeholders begun with), for a filtered
// mixture and a plan without one; before Commit and after Abort, a
// cancelled context or a bad path, nothing is at the path and no
// temporary file is left.
func TestNewMixtureContextSaving(t *testing.T) {
	src, mix, _ := selFixture()
	cfg := Config{Seed: 6, Epochs: 3, GlobalBatch: 16, WorldSize: 2, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderPartial}
	for _, m := range []*Mixture{mix, nil} {
		want, err := mustMix(t, src, cfg, m).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		path := filepath.Join(dir, "plan.json")
		p, sv, err := NewMixtureContextSaving(context.Background(), src, cfg, m, nil, path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("before Commit: %v, want no file", err)
		}
		if err := sv.Commit(); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("mixture %v: committed file differs from Save's bytes:\n%s\nwant\n%s", m != nil, got, want)
		}
		if !bytes.Contains(got, []byte(p.Epochs[2].Digest)) || bytes.Contains(got, []byte(placeholderDigest)) {
			t.Errorf("mixture %v: file lacks the digests or keeps a placeholder", m != nil)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Errorf("directory holds %d entries, want the plan file only", len(ents))
		}

		// Aborted: nothing.
		path2 := filepath.Join(dir, "aborted.json")
		_, sv, err = NewMixtureContextSaving(context.Background(), src, cfg, m, nil, path2)
		if err != nil {
			t.Fatal(err)
		}
		sv.Abort()
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Errorf("after Abort the directory holds %d entries, want 1", len(ents))
		}
	}

	// Cancelled while digesting, or a path that is a directory: an error,
	// nothing written.
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, sv, err := NewMixtureContextSaving(ctx, src, cfg, mix, nil, filepath.Join(dir, "p.json")); !errors.Is(err, context.Canceled) || sv != nil {
		t.Errorf("cancelled: %v, %v; want context.Canceled and no Saving", sv, err)
	}
	if _, _, err := NewMixtureContextSaving(context.Background(), src, cfg, mix, nil, dir); !errors.Is(err, ErrConfig) {
		t.Errorf("a directory as the path: %v, want ErrConfig", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("directory holds %d entries, want none", len(ents))
	}
}
