package gc

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/shardset"
)

// makeSet writes a fake shard set: a manifest listing epochs x ranks, and a
// file per shard of size 100*epoch + 10*rank + 1 bytes. gc never opens the
// shards, so their contents do not matter.
func makeSet(t *testing.T, epochs, ranks int) string {
	t.Helper()
	dir := t.TempDir()
	m := &shardfmt.Manifest{PlanFingerprint: "sha256:p", SourceFingerprint: "sha256:s", SpecHash: "sha256:x"}
	for e := 0; e < epochs; e++ {
		for r := 0; r < ranks; r++ {
			rel := shardfmt.ShardFileName(e, r)
			p := filepath.Join(dir, filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			size := int64(100*e + 10*r + 1)
			if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
				t.Fatal(err)
			}
			m.Shards = append(m.Shards, shardfmt.ShardEntry{Path: rel, Epoch: e, Rank: r, Batches: 3, Size: size, Digest: "sha256:0"})
		}
	}
	if err := shardfmt.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	return dir
}

// listFiles returns every regular file under dir, relative and sorted.
func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func listedPaths(t *testing.T, dir string) []string {
	t.Helper()
	m, err := shardfmt.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range m.Shards {
		out = append(out, s.Path)
	}
	return out
}

func TestKeepFromEpoch(t *testing.T) {
	dir := makeSet(t, 4, 2)
	res, err := Run(dir, Options{KeepFromEpoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := []Shard{
		{Path: "epoch-00000/rank-00000.shard", Epoch: 0, Rank: 0, Size: 1, Listed: true},
		{Path: "epoch-00000/rank-00001.shard", Epoch: 0, Rank: 1, Size: 11, Listed: true},
		{Path: "epoch-00001/rank-00000.shard", Epoch: 1, Rank: 0, Size: 101, Listed: true},
		{Path: "epoch-00001/rank-00001.shard", Epoch: 1, Rank: 1, Size: 111, Listed: true},
	}
	if !reflect.DeepEqual(res.Removed, want) {
		t.Fatalf("removed %+v\nwant %+v", res.Removed, want)
	}
	if res.FreedBytes != 224 || res.Kept != 4 || !reflect.DeepEqual(res.KeptEpochs, []int{2, 3}) {
		t.Fatalf("freed %d kept %d epochs %v", res.FreedBytes, res.Kept, res.KeptEpochs)
	}
	if !reflect.DeepEqual(res.RemovedDirs, []string{"epoch-00000", "epoch-00001"}) {
		t.Fatalf("removed dirs %v", res.RemovedDirs)
	}
	wantFiles := []string{"epoch-00002/rank-00000.shard", "epoch-00002/rank-00001.shard", "epoch-00003/rank-00000.shard", "epoch-00003/rank-00001.shard", "manifest.json"}
	if got := listFiles(t, dir); !reflect.DeepEqual(got, wantFiles) {
		t.Fatalf("files %v\nwant %v", got, wantFiles)
	}
	if got := listedPaths(t, dir); !reflect.DeepEqual(got, wantFiles[:4]) {
		t.Fatalf("manifest lists %v", got)
	}
	for _, d := range []string{"epoch-00000", "epoch-00001"} {
		if _, err := os.Stat(filepath.Join(dir, d)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists: %v", d, err)
		}
	}
	// The manifest keeps its other fields.
	m, _ := shardfmt.ReadManifest(dir)
	if m.PlanFingerprint != "sha256:p" || m.SourceFingerprint != "sha256:s" || m.SpecHash != "sha256:x" {
		t.Fatalf("manifest fields changed: %+v", m)
	}

	// A second run has nothing to do.
	res, err = Run(dir, Options{KeepFromEpoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 0 || res.FreedBytes != 0 || res.Kept != 4 {
		t.Fatalf("second run: %+v", res)
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	dir := makeSet(t, 3, 1)
	before := listFiles(t, dir)
	man, _ := os.ReadFile(filepath.Join(dir, shardfmt.ManifestName))
	res, err := Run(dir, Options{KeepFromEpoch: 1, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.DryRun || len(res.Removed) != 1 || res.Removed[0].Path != "epoch-00000/rank-00000.shard" || res.FreedBytes != 1 {
		t.Fatalf("dry run result %+v", res)
	}
	if !reflect.DeepEqual(res.RemovedDirs, []string{"epoch-00000"}) {
		t.Fatalf("predicted dirs %v", res.RemovedDirs)
	}
	if got := listFiles(t, dir); !reflect.DeepEqual(got, before) {
		t.Fatalf("dry run changed files: %v", got)
	}
	after, _ := os.ReadFile(filepath.Join(dir, shardfmt.ManifestName))
	if string(after) != string(man) {
		t.Fatal("dry run rewrote the manifest")
	}
}

// TestStrayAfterCrash pins the crash-safety rule: a gc killed after its
// manifest rewrite leaves unlisted shards behind, and a convert killed mid
// write leaves a temporary shard; the next gc deletes both, and only those.
func TestStrayAfterCrash(t *testing.T) {
	dir := makeSet(t, 3, 2)
	// State after a crashed gc --keep-from-epoch 1: manifest rewritten, one
	// old file already deleted, one still there.
	m, _ := shardfmt.ReadManifest(dir)
	m.Shards = m.Shards[2:]
	if err := shardfmt.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "epoch-00000", "rank-00000.shard")); err != nil {
		t.Fatal(err)
	}
	write := func(rel string, n int) {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(rel)), make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("epoch-00001/rank-00001.shard.tmp-4242", 7) // killed convert, old epoch
	write("epoch-00002/rank-00000.shard.tmp-99", 5)   // killed convert, kept epoch: not gc's
	write("epoch-00000/notes.txt", 3)                 // not a shard: never touched
	// Every shard the manifest lists exists (the invariant a crash keeps).
	for _, p := range listedPaths(t, dir) {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p))); err != nil {
			t.Fatalf("manifest lists missing %s", p)
		}
	}

	res, err := Run(dir, Options{KeepFromEpoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := []Shard{
		{Path: "epoch-00000/rank-00001.shard", Epoch: 0, Rank: 1, Size: 11, Listed: false},
		{Path: "epoch-00001/rank-00000.shard", Epoch: 1, Rank: 0, Size: 101, Listed: true},
		{Path: "epoch-00001/rank-00001.shard", Epoch: 1, Rank: 1, Size: 111, Listed: true},
		{Path: "epoch-00001/rank-00001.shard.tmp-4242", Epoch: 1, Rank: 1, Size: 7, Listed: false},
	}
	if !reflect.DeepEqual(res.Removed, want) {
		t.Fatalf("removed %+v\nwant %+v", res.Removed, want)
	}
	if !reflect.DeepEqual(res.RemovedDirs, []string{"epoch-00001"}) {
		t.Fatalf("removed dirs %v", res.RemovedDirs)
	}
	wantFiles := []string{
		"epoch-00000/notes.txt",
		"epoch-00002/rank-00000.shard", "epoch-00002/rank-00000.shard.tmp-99", "epoch-00002/rank-00001.shard",
		"manifest.json",
	}
	if got := listFiles(t, dir); !reflect.DeepEqual(got, wantFiles) {
		t.Fatalf("files %v\nwant %v", got, wantFiles)
	}
}

func TestKeepEverythingAndNothing(t *testing.T) {
	dir := makeSet(t, 2, 1)
	res, err := Run(dir, Options{KeepFromEpoch: 0})
	want := &Result{Dir: dir, Removed: []Shard{}, RemovedDirs: []string{}, Kept: 2, KeptEpochs: []int{0, 1}}
	if err != nil || !reflect.DeepEqual(res, want) {
		t.Fatalf("keep from 0: %+v, %v\nwant %+v", res, err, want)
	}
	res, err = Run(dir, Options{KeepFromEpoch: 9})
	want = &Result{Dir: dir, KeepFromEpoch: 9,
		Removed: []Shard{
			{Path: "epoch-00000/rank-00000.shard", Epoch: 0, Rank: 0, Size: 1, Listed: true},
			{Path: "epoch-00001/rank-00000.shard", Epoch: 1, Rank: 0, Size: 101, Listed: true},
		},
		RemovedDirs: []string{"epoch-00000", "epoch-00001"}, FreedBytes: 102, KeptEpochs: []int{}}
	if err != nil || !reflect.DeepEqual(res, want) {
		t.Fatalf("keep from 9: %+v, %v\nwant %+v", res, err, want)
	}
	if got := listFiles(t, dir); !reflect.DeepEqual(got, []string{"manifest.json"}) {
		t.Fatalf("files %v", got)
	}
	if got := listedPaths(t, dir); len(got) != 0 {
		t.Fatalf("manifest lists %v", got)
	}
}

func TestErrors(t *testing.T) {
	if _, err := Run(t.TempDir(), Options{KeepFromEpoch: 1}); !errors.Is(err, ErrNoManifest) {
		t.Errorf("empty dir: %v, want ErrNoManifest", err)
	}
	if _, err := Run(t.TempDir(), Options{KeepFromEpoch: -1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative epoch: %v, want ErrInvalid", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, shardfmt.ManifestName), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Run(dir, Options{KeepFromEpoch: 1})
	var ge *Error
	if !errors.As(err, &ge) || ge.Op != "reading manifest" {
		t.Errorf("corrupt manifest: %v", err)
	}
}

func TestParseShardPath(t *testing.T) {
	tests := []struct {
		in          string
		epoch, rank int
		ok          bool
	}{
		{"epoch-00003/rank-00012.shard", 3, 12, true},
		{"epoch-00003/rank-00012.shard.tmp-123456", 3, 12, true},
		{"epoch-00003/.rank-00012.shard.tmp", 3, 12, true},
		{"epoch-00003/rank-00012.shard.partial", 3, 12, true},
		{"epoch-123456/rank-00001.shard", 123456, 1, true},
		{"epoch-3/rank-12.shard", 0, 0, false},
		{"epoch-00003/rank-00012.shardx", 0, 0, false},
		{"epoch-00003/notes.txt", 0, 0, false},
		{"manifest.json", 0, 0, false},
		{"manifest.json.tmp-1", 0, 0, false},
	}
	for _, tc := range tests {
		e, r, ok := ParseShardPath(tc.in)
		if e != tc.epoch || r != tc.rank || ok != tc.ok {
			t.Errorf("ParseShardPath(%q) = %d, %d, %v; want %d, %d, %v", tc.in, e, r, ok, tc.epoch, tc.rank, tc.ok)
		}
	}
}

// TestRunKeepsFilesOutsideSetListedByEditedManifest pins the fault where a
// manifest entry edited to "../canary" made gc delete a file outside the
// shard set: the manifest is refused, nothing is deleted and the manifest
// is left as it was.
func TestRunKeepsFilesOutsideSetListedByEditedManifest(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "set")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	canary := filepath.Join(parent, "canary")
	if err := os.WriteFile(canary, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	rel := shardfmt.ShardFileName(0, 0)
	if err := os.MkdirAll(filepath.Join(dir, "epoch-00000"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(rel)), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := &shardfmt.Manifest{Shards: []shardfmt.ShardEntry{
		{Path: "../canary", Epoch: 0, Rank: 1, Size: 8},
		{Path: rel, Epoch: 0, Rank: 0, Size: 1},
	}}
	if err := shardfmt.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, shardfmt.ManifestName))
	for _, dry := range []bool{true, false} {
		res, err := Run(dir, Options{KeepFromEpoch: 1, DryRun: dry})
		if !errors.Is(err, shardfmt.ErrManifest) {
			t.Fatalf("dry run %v: Run = %+v, %v; want an error wrapping shardfmt.ErrManifest", dry, res, err)
		}
	}
	if b, err := os.ReadFile(canary); err != nil || string(b) != "precious" {
		t.Errorf("file outside the shard set: %q, %v; want it untouched", b, err)
	}
	if got := listFiles(t, dir); !reflect.DeepEqual(got, []string{rel, shardfmt.ManifestName}) {
		t.Errorf("shard set holds %v after a refused gc", got)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, shardfmt.ManifestName)); string(after) != string(before) {
		t.Error("refused gc rewrote the manifest")
	}
}

// TestRemovesKilledConvertTemporaries checks that Run deletes the temporary
// directory a killed convert leaves (its spill file can be as large as the
// decoded input), counts its bytes, and that a dry run only reports them.
func TestRemovesKilledConvertTemporaries(t *testing.T) {
	dir := makeSet(t, 2, 1)
	spill := filepath.Join(dir, TempDirName, "4242", "spill.bin")
	if err := os.MkdirAll(filepath.Dir(spill), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spill, make([]byte, 5000), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := Run(dir, Options{KeepFromEpoch: 0, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.TempBytes != 5000 || res.FreedBytes != 5000 || len(res.Removed) != 0 {
		t.Fatalf("dry run: temp %d, freed %d, removed %v; want 5000, 5000, none", res.TempBytes, res.FreedBytes, res.Removed)
	}
	if _, err := os.Stat(spill); err != nil {
		t.Fatalf("dry run removed the temporary file: %v", err)
	}
	res, err = Run(dir, Options{KeepFromEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Epoch 0's shard (1 byte) and the temporaries.
	if res.TempBytes != 5000 || res.FreedBytes != 5001 || len(res.Removed) != 1 {
		t.Fatalf("run: temp %d, freed %d, removed %v; want 5000, 5001, one shard", res.TempBytes, res.FreedBytes, res.Removed)
	}
	if _, err := os.Stat(filepath.Join(dir, TempDirName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary directory still there: %v", err)
	}
	if got, want := listFiles(t, dir), []string{"epoch-00001/rank-00000.shard", shardfmt.ManifestName}; !reflect.DeepEqual(got, want) {
		t.Fatalf("files left %v, want %v", got, want)
	}
}

// TestTempDirSymlinksNotFollowed checks that removing the temporary
// directory never reaches through a symbolic link: links inside it (to a
// directory and to a file outside the shard set) and a temporary directory
// that is itself a link go, their targets stay and are not counted; a
// temporary path that is a plain file is removed and counted.
func TestTempDirSymlinksNotFollowed(t *testing.T) {
	outside := t.TempDir()
	keepFile := filepath.Join(outside, "keep.bin")
	if err := os.MkdirAll(filepath.Join(outside, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keepFile, make([]byte, 700), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "sub", "keep2.bin"), make([]byte, 900), 0o644); err != nil {
		t.Fatal(err)
	}
	outsideFiles := listFiles(t, outside)

	// Links inside the temporary directory.
	dir := makeSet(t, 1, 1)
	tmp := filepath.Join(dir, TempDirName, "4242")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "spill.bin"), make([]byte, 300), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "sub"), filepath.Join(tmp, "dirlink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(keepFile, filepath.Join(tmp, "filelink")); err != nil {
		t.Fatal(err)
	}
	res, err := Run(dir, Options{KeepFromEpoch: 0})
	if err != nil {
		t.Fatal(err)
	}
	if res.TempBytes != 300 {
		t.Errorf("links inside: temp bytes %d, want 300 (link targets not counted)", res.TempBytes)
	}
	if _, err := os.Lstat(filepath.Join(dir, TempDirName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("links inside: temporary directory still there: %v", err)
	}
	if got := listFiles(t, outside); !reflect.DeepEqual(got, outsideFiles) {
		t.Fatalf("links inside: files outside the set %v, want %v", got, outsideFiles)
	}

	// The temporary directory itself a link to a directory outside.
	dir = makeSet(t, 1, 1)
	if err := os.Symlink(outside, filepath.Join(dir, TempDirName)); err != nil {
		t.Fatal(err)
	}
	if res, err = Run(dir, Options{KeepFromEpoch: 0}); err != nil {
		t.Fatal(err)
	}
	if res.TempBytes != 0 {
		t.Errorf("linked directory: temp bytes %d, want 0", res.TempBytes)
	}
	if _, err := os.Lstat(filepath.Join(dir, TempDirName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("linked directory: link still there: %v", err)
	}
	if got := listFiles(t, outside); !reflect.DeepEqual(got, outsideFiles) {
		t.Fatalf("linked directory: files outside the set %v, want %v", got, outsideFiles)
	}

	// A plain file where the directory would be.
	dir = makeSet(t, 1, 1)
	if err := os.WriteFile(filepath.Join(dir, TempDirName), make([]byte, 50), 0o644); err != nil {
		t.Fatal(err)
	}
	if res, err = Run(dir, Options{KeepFromEpoch: 0}); err != nil {
		t.Fatal(err)
	}
	if res.TempBytes != 50 || res.FreedBytes != 50 {
		t.Errorf("plain file: temp bytes %d, freed %d; want 50, 50", res.TempBytes, res.FreedBytes)
	}
	if _, err := os.Lstat(filepath.Join(dir, TempDirName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("plain file: still there: %v", err)
	}
}

// TestEmptyEpochDirOfAKilledGCRemoved pins directories a crash left for
// good: a gc killed after deleting an old epoch's files but before removing
// its directory left an empty epoch-NNNNN/ that no later gc removed (it
// removes only the directories its own deletions empty). An empty
// directory of an epoch below the kept ones is removed too (and listed by
// a dry run); one holding anything, or of a kept epoch, is left.
func TestEmptyEpochDirOfAKilledGCRemoved(t *testing.T) {
	dir := makeSet(t, 4, 1)
	// State after a gc --keep-from-epoch 2 killed after its deletions: the
	// manifest lists epochs 2-3, epochs 0-1 have no files left.
	m, _ := shardfmt.ReadManifest(dir)
	m.Shards = m.Shards[2:]
	if err := shardfmt.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"epoch-00000/rank-00000.shard", "epoch-00001/rank-00000.shard"} {
		if err := os.Remove(filepath.Join(dir, filepath.FromSlash(p))); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "epoch-00001", "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "epoch-00009"), 0o755); err != nil { // a later epoch's, empty: kept
		t.Fatal(err)
	}
	res, err := Run(dir, Options{KeepFromEpoch: 2, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.RemovedDirs, []string{"epoch-00000"}) {
		t.Fatalf("dry run: removed dirs %v, want [epoch-00000]", res.RemovedDirs)
	}
	if res, err = Run(dir, Options{KeepFromEpoch: 2}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.RemovedDirs, []string{"epoch-00000"}) {
		t.Fatalf("removed dirs %v, want [epoch-00000]", res.RemovedDirs)
	}
	for d, want := range map[string]bool{"epoch-00000": false, "epoch-00001": true, "epoch-00009": true} {
		if _, err := os.Stat(filepath.Join(dir, d)); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", d, err == nil, want)
		}
	}
}

// TestSymlinkedEpochDirRefused pins fault "gc deletes files outside the set
// through a symlinked epoch directory": with epoch-00000 a link to another
// directory holding files of the same names (outside the set, or another
// epoch inside it), gc refuses before changing anything, and no file the
// link points to is removed.
func TestSymlinkedEpochDirRefused(t *testing.T) {
	for name, target := range map[string]func(dir, outside string) string{
		"outside": func(_, outside string) string { return outside },
		"inside":  func(string, string) string { return "epoch-00001" },
	} {
		t.Run(name, func(t *testing.T) {
			dir := makeSet(t, 2, 2)
			outside := t.TempDir()
			for _, f := range []string{"rank-00000.shard", "rank-00001.shard"} {
				if err := os.WriteFile(filepath.Join(outside, f), []byte("keep"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.RemoveAll(filepath.Join(dir, "epoch-00000")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target(dir, outside), filepath.Join(dir, "epoch-00000")); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(filepath.Join(dir, shardfmt.ManifestName))
			for _, dry := range []bool{true, false} {
				if _, err := Run(dir, Options{KeepFromEpoch: 1, DryRun: dry}); !errors.Is(err, shardset.ErrUnsafe) {
					t.Fatalf("dry run %v: err = %v, want ErrUnsafe", dry, err)
				}
			}
			if got := listFiles(t, outside); !reflect.DeepEqual(got, []string{"rank-00000.shard", "rank-00001.shard"}) {
				t.Fatalf("files outside the set: %v", got)
			}
			want := []string{"epoch-00000", "epoch-00001/rank-00000.shard", "epoch-00001/rank-00001.shard", "manifest.json"}
			if got := listFiles(t, dir); !reflect.DeepEqual(got, want) {
				t.Fatalf("files in the set: %v, want %v", got, want)
			}
			if after, _ := os.ReadFile(filepath.Join(dir, shardfmt.ManifestName)); string(after) != string(before) {
				t.Fatal("manifest changed")
			}
		})
	}
}

// TestKilledGCTemporariesRemoved pins fault "a killed gc leaves
// manifest.json.tmp-* that later gc runs never remove": gc removes the
// unfinished atomic writes of the manifest and the plan copy, counts their
// bytes, and leaves other files alone.
func TestKilledGCTemporariesRemoved(t *testing.T) {
	dir := makeSet(t, 1, 1)
	for name, size := range map[string]int{"manifest.json.tmp-123456": 7, "plan.json.tmp-42": 5, "notes.tmp-1": 3} {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dry, err := Run(dir, Options{KeepFromEpoch: 0, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"manifest.json.tmp-123456", "plan.json.tmp-42"}; !reflect.DeepEqual(dry.TempFiles, want) || dry.FreedBytes != 12 {
		t.Fatalf("dry run: temp files %v, freed %d; want %v, 12", dry.TempFiles, dry.FreedBytes, want)
	}
	res, err := Run(dir, Options{KeepFromEpoch: 0})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.TempFiles, dry.TempFiles) || res.FreedBytes != 12 {
		t.Fatalf("temp files %v, freed %d", res.TempFiles, res.FreedBytes)
	}
	want := []string{"epoch-00000/rank-00000.shard", "manifest.json", "notes.tmp-1"}
	if got := listFiles(t, dir); !reflect.DeepEqual(got, want) {
		t.Fatalf("files %v, want %v", got, want)
	}
}
