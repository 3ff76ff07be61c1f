package shardset

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prepml/prep/internal/atomicfile"
	"github.com/prepml/prep/shardfmt"
)

// listedShards returns the shard paths the manifest in dir lists (nil when
// there is none).
func listedShards(t *testing.T, dir string) []string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, ManifestName)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	m, err := shardfmt.ReadManifest(dir)
	if err != nil {
		t.Fatalf("manifest unreadable: %v", err)
	}
	var ps []string
	for _, s := range m.Shards {
		ps = append(ps, s.Path)
	}
	return ps
}

// watchRemovals replaces removeFile for the test: before each removal of a
// shard it asserts the manifest no longer lists that shard (a kill at that
// moment must not leave a listing of a missing file), and it returns the
// removed shard names.
func watchRemovals(t *testing.T, dir string) *[]string {
	var removed []string
	old := removeFile
	removeFile = func(s *Set, name string) error {
		if strings.HasSuffix(name, ".shard") {
			if slices.Contains(listedShards(t, dir), name) {
				t.Errorf("rollback removes %s while the manifest still lists it", name)
			}
			removed = append(removed, name)
		}
		return old(s, name)
	}
	t.Cleanup(func() { removeFile = old })
	return &removed
}

// resume begins a transaction on an existing set with its manifest.
func resume(t *testing.T, dir string) *Txn {
	t.Helper()
	tx, err := Begin(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := shardfmt.ParseManifest(tx.OldManifest(), dir)
	if err != nil {
		t.Fatal(err)
	}
	tx.SetManifest(m)
	return tx
}

// TestRollbackRestoresManifestBeforeRemovingShards pins the order of a
// failed run's rollback: manifest first (atomically), shards after.
func TestRollbackRestoresManifestBeforeRemovingShards(t *testing.T) {
	t.Run("new set", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "set")
		tx, err := Begin(dir)
		if err != nil {
			t.Fatal(err)
		}
		tx.SetManifest(newManifest())
		commitPairs(t, tx, [2]int{0, 0}, [2]int{0, 1}, [2]int{1, 0})
		removed := watchRemovals(t, dir)
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		tx.End(true)
		if want := []string{ShardPath(0, 0), ShardPath(0, 1), ShardPath(1, 0)}; !slices.Equal(*removed, want) {
			t.Errorf("rollback removed %v, want %v", *removed, want)
		}
		if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("directory created by the run left: %v", err)
		}
	})
	t.Run("resumed set", func(t *testing.T) {
		dir := buildSet(t, [2]int{0, 0}, [2]int{0, 1})
		before, _ := os.ReadFile(filepath.Join(dir, ManifestName))
		tx := resume(t, dir)
		commitPairs(t, tx, [2]int{1, 0})
		removed := watchRemovals(t, dir)
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		tx.End(true)
		if want := []string{ShardPath(1, 0)}; !slices.Equal(*removed, want) {
			t.Errorf("rollback removed %v, want %v", *removed, want)
		}
		if after, _ := os.ReadFile(filepath.Join(dir, ManifestName)); string(after) != string(before) {
			t.Error("manifest not restored byte for byte")
		}
		if _, err := os.Lstat(filepath.Join(dir, "epoch-00001")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("epoch directory of the rolled back shard left: %v", err)
		}
	})
	t.Run("rewritten shard dropped from the restored manifest", func(t *testing.T) {
		dir := buildSet(t, [2]int{0, 0}, [2]int{0, 1})
		tx := resume(t, dir)
		commitPairs(t, tx, [2]int{0, 1}) // rewritten (its file was lost)
		removed := watchRemovals(t, dir)
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		tx.End(true)
		if want := []string{ShardPath(0, 1)}; !slices.Equal(*removed, want) {
			t.Errorf("rollback removed %v, want %v", *removed, want)
		}
		if got, want := listedShards(t, dir), []string{ShardPath(0, 0)}; !slices.Equal(got, want) {
			t.Errorf("restored manifest lists %v, want %v", got, want)
		}
	})
}

// TestFailedDirSyncLeavesNothing pins fault "a failed directory fsync leaves
// an unlisted shard in an existing set": the shard was renamed into place
// before the fsync failed; Commit fails, and Rollback removes it, so the set
// is as it was.
func TestFailedDirSyncLeavesNothing(t *testing.T) {
	dir := buildSet(t, [2]int{0, 0})
	before, _ := os.ReadFile(filepath.Join(dir, ManifestName))
	tx := resume(t, dir)
	w, err := tx.CreateShard(0, 1, writerOptions(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	fillShard(t, w, 0, 1)
	atomicfile.SyncDirHook = func(string) error { return errors.New("injected EIO") }
	_, err = tx.Commit(w, shardfmt.ShardEntry{Epoch: 0, Rank: 1, Batches: 3})
	atomicfile.SyncDirHook = nil
	if !errors.Is(err, shardfmt.ErrNotDurable) {
		t.Fatalf("Commit = %v, want ErrNotDurable", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	tx.End(true)
	if _, err := os.Lstat(filepath.Join(dir, "epoch-00000", "rank-00001.shard")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("shard of the failed commit left: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, ManifestName)); string(after) != string(before) {
		t.Error("manifest changed")
	}
	// The same for the plan copy: written, fsync failed, rolled back.
	tx = resume(t, dir)
	atomicfile.SyncDirHook = func(string) error { return errors.New("injected EIO") }
	err = tx.WritePlan([]byte("{\"other\": 1}\n"))
	atomicfile.SyncDirHook = nil
	if !errors.Is(err, shardfmt.ErrNotDurable) {
		t.Fatalf("WritePlan = %v, want ErrNotDurable", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	tx.End(true)
	if b, _ := os.ReadFile(filepath.Join(dir, PlanName)); string(b) != "{}\n" {
		t.Errorf("plan copy after rollback %q, want the old one", b)
	}
}

// TestBeginRemovesLeftoversNeverFollowing: Begin removes the staging
// directory and unfinished atomic writes of killed runs; links at those
// names are removed themselves, and their targets stay.
func TestBeginRemovesLeftoversNeverFollowing(t *testing.T) {
	dir := buildSet(t, [2]int{0, 0})
	outside := t.TempDir()
	keep := filepath.Join(outside, "spill.bin")
	if err := os.WriteFile(keep, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, TempDirName)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"manifest.json.tmp-1", "plan.json.tmp-2", "epoch-00000/rank-00003.shard.tmp-3"} {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(keep, filepath.Join(dir, "epoch-00000", "rank-00004.shard.tmp-4")); err != nil {
		t.Fatal(err)
	}
	tx, err := Begin(dir)
	if err != nil {
		t.Fatal(err)
	}
	tx.End(false)
	var left []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			left = append(left, filepath.ToSlash(rel))
		}
		return nil
	})
	// The link named like a temporary shard is a link, not a temporary
	// file: it is left to verify to report.
	if want := []string{"epoch-00000/rank-00000.shard", "epoch-00000/rank-00004.shard.tmp-4", ManifestName, PlanName}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
	if b, err := os.ReadFile(keep); err != nil || string(b) != "keep" {
		t.Errorf("file behind the linked staging directory: %q, %v", b, err)
	}
}

// TestBeginRefusesLinkedNames: a lock, manifest or plan copy that is a
// symbolic link makes Begin fail before anything changes; the link's target
// is neither read nor written.
func TestBeginRefusesLinkedNames(t *testing.T) {
	for _, name := range []string{LockName, ManifestName, PlanName} {
		t.Run(name, func(t *testing.T) {
			dir := buildSet(t, [2]int{0, 0})
			target := filepath.Join(t.TempDir(), "target")
			if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
				t.Fatal(err)
			}
			os.Remove(filepath.Join(dir, name))
			if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
			if tx, err := Begin(dir); err == nil {
				tx.End(false)
				t.Fatal("Begin succeeded")
			}
			if b, _ := os.ReadFile(target); string(b) != "keep" {
				t.Errorf("target rewritten: %q", b)
			}
			if fi, err := os.Lstat(filepath.Join(dir, name)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("link changed: %v", err)
			}
		})
	}
}
