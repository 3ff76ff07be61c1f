package ops

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// linkDataset is a small private dataset for the symbolic-link tests: 3
// files of 3000 rows, 2 epochs, world size 2.
func linkDataset(t *testing.T) *dataset {
	t.Helper()
	d := &dataset{dir: t.TempDir(), epochs: 2, world: 2}
	d.src = filepath.Join(d.dir, "src")
	if err := os.Mkdir(d.src, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 3; i++ {
		writeParquet(t, filepath.Join(d.src, fmt.Sprintf("part-%d.parquet", i)), i*3000, 3000, 1024, 0)
	}
	d.spec = filepath.Join(d.dir, "spec.yaml")
	if err := os.WriteFile(d.spec, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	d.plan = filepath.Join(d.dir, "plan.json")
	prep(t, nil, "plan", "--source", d.src, "--seed", "3", "--epochs", "2", "--global-batch", "64", "--world-size", "2", "-o", d.plan).MustExit(t, 0)
	return d
}

// outsideFiles lists every file and link under dir (relative, sorted) with
// its digest (links: their target), reading nothing until after atimes are
// checked.
type outsideState struct {
	dir    string
	digest map[string]string
}

// snapshot records the digests of everything under dir, then sets every
// regular file's access and modification time far in the past so that a
// later read shows (the file system updates a stale access time on read).
func snapshot(t *testing.T, dir string) *outsideState {
	t.Helper()
	s := &outsideState{dir: dir, digest: tree(t, dir)}
	old := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	for p := range s.digest {
		if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(p)), old, old); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// check asserts that since snapshot no file under the directory was read,
// written, removed or added, then re-arms the access times.
func (s *outsideState) check(t *testing.T, what string) {
	t.Helper()
	for p := range s.digest {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(s.dir, filepath.FromSlash(p)), &st); err != nil {
			t.Errorf("%s: outside file %s: %v", what, p, err)
			continue
		}
		if time.Unix(st.Atim.Unix()).Year() != 2000 {
			t.Errorf("%s: outside file %s was read", what, p)
		}
	}
	got := tree(t, s.dir)
	var diffs []string
	for p, d := range s.digest {
		if got[p] != d {
			diffs = append(diffs, p+" changed or removed")
		}
	}
	for p := range got {
		if _, ok := s.digest[p]; !ok {
			diffs = append(diffs, p+" created")
		}
	}
	slices.Sort(diffs)
	if len(diffs) > 0 {
		t.Errorf("%s: outside the set: %s", what, strings.Join(diffs, "; "))
	}
	*s = *snapshot(t, s.dir)
}

// TestNoSymlinkFollowedOutOfShardSet plants a symbolic link at each name a
// shard-set directory holds (the lock, the staging directory, an epoch
// directory, a shard file, the manifest, the plan copy), pointing at a
// directory or file outside the set that holds what the name would (a copy
// of the real content), and runs inspect, verify, export, load, gc (dry run
// and real) and convert over the set: no command reads, writes, removes or
// creates anything outside the set, and none dies (exit 2 or a signal).
func TestNoSymlinkFollowedOutOfShardSet(t *testing.T) {
	d := linkDataset(t)
	ref := filepath.Join(t.TempDir(), "ref")
	prep(t, nil, d.convertArgs(ref)...).MustExit(t, 0)
	for _, name := range []string{".prep.lock", ".prep-tmp", "epoch-00000", "epoch-00000/rank-00000.shard", "manifest.json", "plan.json"} {
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			base := t.TempDir()
			out, outside, exp := filepath.Join(base, "out"), filepath.Join(base, "outside"), filepath.Join(base, "export")
			copyTree(t, ref, out)
			if err := os.Mkdir(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			// The link's target outside holds what the name would: the real
			// content moved out, or a decoy where the set has none.
			planted := filepath.Join(out, filepath.FromSlash(name))
			target := filepath.Join(outside, filepath.Base(name))
			switch name {
			case ".prep.lock":
				writeFile(t, target, "4242 elsewhere\n")
			case ".prep-tmp":
				writeFile(t, filepath.Join(target, "4242", "spill.bin"), "staged bytes")
			default:
				if err := os.Rename(planted, target); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink(target, planted); err != nil {
				t.Fatal(err)
			}
			outsideNow := snapshot(t, outside)
			for _, args := range [][]string{
				{"inspect", out},
				{"inspect", out, "--json"},
				{"verify", out},
				{"verify", "--plan", d.plan, out},
				{"export", out, "--epoch", "0", "--rank", "0", "--step", "0", "-o", exp},
				{"load", out, "--epoch", "0", "--rank", "0", "--verify-checksums"},
				{"gc", out, "--keep-from-epoch", "1", "--dry-run"},
				d.convertArgs(out),
				{"verify", out},
				{"gc", out, "--keep-from-epoch", "1"},
				{"verify", "--partial", out},
			} {
				r := prep(t, nil, args...)
				if r.Signal != 0 || r.Code == 2 {
					t.Errorf("prep %s: exit %d, signal %v: %s", strings.Join(args, " "), r.Code, r.Signal, r.Stderr)
				}
				outsideNow.check(t, "prep "+strings.Join(args[:min(2, len(args))], " "))
			}
		})
	}
}

// copyTree copies the regular files under src to dst, directories made as
// needed.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if e.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
