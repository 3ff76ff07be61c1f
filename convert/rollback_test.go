package convert

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prepml/prep/internal/atomicfile"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
)

// blockShard makes the commit (rename) of shard (epoch, rank) in out fail by
// putting a non-empty directory at its path.
func blockShard(t *testing.T, out string, epoch, rank int) string {
	t.Helper()
	p := filepath.Join(out, filepath.FromSlash(shardfmt.ShardFileName(epoch, rank)))
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// listed returns the shard paths the manifest in out lists (nil when there
// is no manifest).
func listed(t *testing.T, out string) []string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(out, shardfmt.ManifestName)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	m, err := shardfmt.ReadManifest(out)
	if err != nil {
		t.Fatalf("manifest unreadable during rollback: %v", err)
	}
	var ps []string
	for _, s := range m.Shards {
		ps = append(ps, s.Path)
	}
	return ps
}

// shardsOnDisk returns the shard files under out, slash-separated and
// sorted.
func shardsOnDisk(t *testing.T, out string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(out, "epoch-*", "rank-*.shard"))
	if err != nil {
		t.Fatal(err)
	}
	var ps []string
	for _, p := range m {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			rel, _ := filepath.Rel(out, p)
			ps = append(ps, filepath.ToSlash(rel))
		}
	}
	slices.Sort(ps)
	return ps
}

// TestRollbackRestoresManifestBeforeRemovingShards pins what a failed run's
// rollback leaves: the manifest as before (byte for byte, or less the shards
// the run rewrote) and none of the run's shards. The order of its steps
// (manifest first, shards after) is pinned in shardset's Txn tests.
func TestRollbackRestoresManifestBeforeRemovingShards(t *testing.T) {
	p, spec := fixture(t, defaultCfg)
	run := func(out string, epochs []int) error {
		_, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: 1, Epochs: epochs})
		return err
	}

	t.Run("new output", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "out")
		blockShard(t, out, 1, 1) // the last of 4 shards with Jobs 1
		if err := run(out, nil); err == nil {
			t.Fatal("run with a blocked shard path succeeded")
		}
		if got := shardsOnDisk(t, out); len(got) != 0 {
			t.Errorf("rollback left shards %v", got)
		}
		if _, err := os.Stat(filepath.Join(out, shardfmt.ManifestName)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("manifest left after rolling back a new output: %v", err)
		}
	})

	t.Run("resumed output", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "out")
		if err := run(out, []int{0}); err != nil {
			t.Fatal(err)
		}
		before, err := os.ReadFile(filepath.Join(out, shardfmt.ManifestName))
		if err != nil {
			t.Fatal(err)
		}
		blockShard(t, out, 1, 1)
		if err := run(out, nil); err == nil {
			t.Fatal("run with a blocked shard path succeeded")
		}
		if got, want := shardsOnDisk(t, out), []string{shardfmt.ShardFileName(0, 0), shardfmt.ShardFileName(0, 1)}; !slices.Equal(got, want) {
			t.Errorf("after rollback the shards on disk are %v, want %v", got, want)
		}
		after, err := os.ReadFile(filepath.Join(out, shardfmt.ManifestName))
		if err != nil || string(after) != string(before) {
			t.Errorf("manifest not restored byte for byte (%v)", err)
		}
	})

	t.Run("rewritten shard dropped from the restored manifest", func(t *testing.T) {
		// The manifest lists (0,1), but its file was lost: the rerun writes
		// it again, fails later, and removes it, so the restored manifest
		// must no longer list it.
		out := filepath.Join(t.TempDir(), "out")
		if err := run(out, []int{0}); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(out, filepath.FromSlash(shardfmt.ShardFileName(0, 1)))); err != nil {
			t.Fatal(err)
		}
		blockShard(t, out, 1, 0)
		if err := run(out, nil); err == nil {
			t.Fatal("run with a blocked shard path succeeded")
		}
		if got, want := shardsOnDisk(t, out), []string{shardfmt.ShardFileName(0, 0)}; !slices.Equal(got, want) {
			t.Errorf("after rollback the shards on disk are %v, want %v", got, want)
		}
		if got, want := listed(t, out), []string{shardfmt.ShardFileName(0, 0)}; !slices.Equal(got, want) {
			t.Errorf("restored manifest lists %v, want %v", got, want)
		}
	})
}

// TestFailedRunIntoExistingDirLeavesNoEpochDirs pins leftovers of a failed
// run into a directory that existed before it: the rollback removed the
// shards it had committed but kept the epoch directories it had created,
// empty (only a run that had created the output directory removed them),
// so the directory no longer looked as it did before the run.
func TestFailedRunIntoExistingDirLeavesNoEpochDirs(t *testing.T) {
	src := t.TempDir()
	writeParquet(t, filepath.Join(src, "a.parquet"), 0, 64, 64, nil)
	p := makePlan(t, src, plan.Config{Seed: 1, Epochs: 2, GlobalBatch: 8, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderDrop})
	spec, err := ParseSpec([]byte("tensors: [{name: id, column: id, dtype: I64}]"), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	blocked := blockShard(t, out, 1, 0) // epoch 1's shard cannot commit
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: 1}); err == nil {
		t.Fatal("run succeeded over a blocked shard path")
	}
	if err := os.RemoveAll(filepath.Dir(blocked)); err != nil { // the test's own blocker
		t.Fatal(err)
	}
	ents, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"notes.txt"}) {
		t.Errorf("after the failed run the directory holds %v, want only [notes.txt]", names)
	}
}

// TestFailedDirSyncLeavesNoUnlistedShard pins fault "a failed directory
// fsync leaves an unlisted shard in an existing set": the first shard of a
// run into an existing set is renamed into place and then its directory
// fsync fails; the run fails and leaves the set as it was.
func TestFailedDirSyncLeavesNoUnlistedShard(t *testing.T) {
	p, spec := fixture(t, defaultCfg)
	out := filepath.Join(t.TempDir(), "out")
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: 1, Epochs: []int{0}}); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(out, shardfmt.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	failed := false
	atomicfile.SyncDirHook = func(dir string) error {
		if !failed && strings.HasSuffix(dir, "epoch-00001") {
			failed = true
			return errors.New("injected EIO")
		}
		return nil
	}
	defer func() { atomicfile.SyncDirHook = nil }()
	_, err = Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: 1})
	if !errors.Is(err, shardfmt.ErrNotDurable) {
		t.Fatalf("run = %v, want ErrNotDurable", err)
	}
	if got, want := shardsOnDisk(t, out), []string{shardfmt.ShardFileName(0, 0), shardfmt.ShardFileName(0, 1)}; !slices.Equal(got, want) {
		t.Errorf("shards on disk %v, want %v", got, want)
	}
	if after, _ := os.ReadFile(filepath.Join(out, shardfmt.ManifestName)); string(after) != string(before) {
		t.Error("manifest not restored byte for byte")
	}
}
