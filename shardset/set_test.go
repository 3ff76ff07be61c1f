package shardset

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prepml/prep/shardfmt"
)

const testPlanFP = "plan:test"

var testTensors = []shardfmt.TensorInfo{{Name: "x", DType: shardfmt.I64}}

// writerOptions are the options of the (epoch, rank) shard of the test sets:
// batch size 2, 3 batches of one I64 tensor.
func writerOptions(epoch, rank int) shardfmt.WriterOptions {
	return shardfmt.WriterOptions{BatchSize: 2, NumBatches: 3, Tensors: testTensors,
		Provenance: shardfmt.Provenance{PlanFingerprint: testPlanFP, Epoch: uint32(epoch), Rank: uint32(rank)}}
}

// writeShard writes the complete (epoch, rank) shard through w.
func fillShard(t *testing.T, w *shardfmt.Writer, epoch, rank int) {
	t.Helper()
	block := make([]byte, w.Geometry().BlockSize)
	for k := range 3 {
		id := uint64(100*epoch + 10*rank + k)
		if err := w.WriteBatch(block, []uint64{id, id}, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// newManifest is an empty manifest of the test plan.
func newManifest() *shardfmt.Manifest {
	return &shardfmt.Manifest{PlanFingerprint: testPlanFP, BatchSize: 2, Tensors: testTensors, Shards: []shardfmt.ShardEntry{}}
}

// buildSet makes a committed set in a new directory holding the given
// (epoch, rank) shards, through a Txn, and returns its directory.
func buildSet(t *testing.T, pairs ...[2]int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "set")
	tx, err := Begin(dir)
	if err != nil {
		t.Fatal(err)
	}
	tx.SetManifest(newManifest())
	commitPairs(t, tx, pairs...)
	if err := tx.WritePlan([]byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	if err := tx.End(false); err != nil {
		t.Fatal(err)
	}
	return dir
}

// commitPairs writes and commits the given shards through tx.
func commitPairs(t *testing.T, tx *Txn, pairs ...[2]int) {
	t.Helper()
	for _, p := range pairs {
		w, err := tx.CreateShard(p[0], p[1], writerOptions(p[0], p[1]))
		if err != nil {
			t.Fatal(err)
		}
		fillShard(t, w, p[0], p[1])
		if _, err := tx.Commit(w, shardfmt.ShardEntry{Epoch: p[0], Rank: p[1], Batches: 3}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestShardChecks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, dir string)
		epoch   int
		want    error
		mention string
	}{
		{name: "ok"},
		{name: "not listed", epoch: 7, want: ErrNoShard, mention: "epoch 7 rank 0 not in manifest.json"},
		{name: "missing file", want: ErrNoShard, damage: func(t *testing.T, dir string) {
			rm(t, filepath.Join(dir, "epoch-00000", "rank-00000.shard"))
		}},
		{name: "truncated", want: ErrDamaged, mention: "actual size 4096", damage: func(t *testing.T, dir string) {
			if err := os.Truncate(filepath.Join(dir, "epoch-00000", "rank-00000.shard"), 4096); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "swapped", want: shardfmt.ErrProvenance, mention: "shard is epoch 0 rank 1", damage: func(t *testing.T, dir string) {
			a, b := filepath.Join(dir, "epoch-00000", "rank-00000.shard"), filepath.Join(dir, "epoch-00000", "rank-00001.shard")
			if err := os.Rename(b, a); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "shard is a link", want: ErrUnsafe, mention: "rank-00000.shard: a symbolic link", damage: func(t *testing.T, dir string) {
			p := filepath.Join(dir, "epoch-00000", "rank-00000.shard")
			rm(t, p)
			if err := os.Symlink("rank-00001.shard", p); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "epoch directory is a link", want: ErrUnsafe, mention: "epoch-00000: a symbolic link", damage: func(t *testing.T, dir string) {
			other := filepath.Join(filepath.Dir(dir), "elsewhere")
			if err := os.Rename(filepath.Join(dir, "epoch-00000"), other); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(other, filepath.Join(dir, "epoch-00000")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := buildSet(t, [2]int{0, 0}, [2]int{0, 1})
			if tc.damage != nil {
				tc.damage(t, dir)
			}
			s, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			r, ent, err := s.Shard(tc.epoch, 0, false)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				if ent.Path != "epoch-00000/rank-00000.shard" || r.NumBatches() != 3 || r.Mapped() {
					t.Fatalf("entry %+v, %d batches, mapped %v", ent, r.NumBatches(), r.Mapped())
				}
				return
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("Shard = %v, want %v mentioning %q", err, tc.want, tc.mention)
			}
		})
	}
}

func rm(t *testing.T, p string) {
	t.Helper()
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
}

// TestManifestAndPlanLinksRefused: manifest.json and plan.json that are
// symbolic links (to a file of the set or outside) are refused, not read.
func TestManifestAndPlanLinksRefused(t *testing.T) {
	dir := buildSet(t, [2]int{0, 0})
	outside := filepath.Join(t.TempDir(), "manifest.json")
	b, _ := os.ReadFile(filepath.Join(dir, ManifestName))
	if err := os.WriteFile(outside, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ManifestName, PlanName} {
		rm(t, filepath.Join(dir, name))
		if err := os.Symlink(outside, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.ReadManifest(); !errors.Is(err, ErrUnsafe) {
		t.Errorf("ReadManifest = %v, want ErrUnsafe", err)
	}
	if _, err := s.Plan(); !errors.Is(err, ErrUnsafe) {
		t.Errorf("Plan = %v, want ErrUnsafe", err)
	}
	if _, err := Open(dir); !errors.Is(err, ErrUnsafe) {
		t.Errorf("Open = %v, want ErrUnsafe", err)
	}
	if _, err := s.CheckName("../x"); !errors.Is(err, ErrUnsafe) {
		t.Errorf("CheckName(../x) = %v, want ErrUnsafe", err)
	}
	if _, err := OpenDir(filepath.Join(dir, "missing")); !errors.Is(err, ErrNotSet) {
		t.Errorf("OpenDir(missing) = %v, want ErrNotSet", err)
	}
	if _, err := s.ReadFile("epoch-00000"); !errors.Is(err, ErrUnsafe) {
		t.Errorf("ReadFile(directory) = %v, want ErrUnsafe", err)
	}
	if _, err := s.ReadFile("nothing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile(missing) = %v, want ErrNotExist", err)
	}
}

// TestRemoveNeverThroughLinks: Remove takes a link away itself and refuses
// a name whose directory is a link.
func TestRemoveNeverThroughLinks(t *testing.T) {
	dir := buildSet(t, [2]int{0, 0})
	outside := t.TempDir()
	keep := filepath.Join(outside, "rank-00000.shard")
	if err := os.WriteFile(keep, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "epoch-00001")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(keep, filepath.Join(dir, "epoch-00000", "rank-00001.shard")); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Remove("epoch-00001/rank-00000.shard"); !errors.Is(err, ErrUnsafe) {
		t.Errorf("Remove through a linked directory = %v, want ErrUnsafe", err)
	}
	if err := s.RemoveAll("epoch-00001/rank-00000.shard"); !errors.Is(err, ErrUnsafe) {
		t.Errorf("RemoveAll through a linked directory = %v, want ErrUnsafe", err)
	}
	if err := s.Remove("epoch-00000/rank-00001.shard"); err != nil {
		t.Errorf("Remove of a link: %v", err)
	}
	if err := s.Remove("epoch-00001"); err != nil {
		t.Errorf("Remove of a linked directory: %v", err)
	}
	if b, err := os.ReadFile(keep); err != nil || string(b) != "keep" {
		t.Fatalf("file outside the set: %q, %v", b, err)
	}
}
