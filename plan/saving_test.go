package plan

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

// TestSaveRefusesStreams pins a fault: -o /dev/stdout, with stdout
// redirected to a file, passed as a regular file; the plan was written to
// a temporary file in /dev and renamed over the /dev/stdout link itself
// (as root), and the stream got nothing. A link to /proc/self/fd/N of a
// file this test holds open is the same without touching /dev: it was
// replaced by the plan file; it must stay a link.
func TestSaveRefusesStreams(t *testing.T) {
	dir := t.TempDir()
	// A stream redirected to a file: this process's descriptor of one.
	f, err := os.Create(filepath.Join(dir, "captured"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	link := filepath.Join(dir, "out")
	if err := os.Symlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), link); err != nil {
		t.Skipf("symlink: %v", err)
	}
	rel := filepath.Join(dir, "rel")
	if err := os.Symlink("../../../../../../../../../../dev/fd/1", rel); err != nil {
		t.Fatal(err)
	}
	p := &Plan{}
	for _, path := range []string{"/dev/stdout", "/dev/null", "/proc/self/fd/1", link, rel} {
		err := p.Save(path)
		want := path + ": names a device or a stream (under /dev or /proc), not a file: the plan is written to a temporary file beside it and renamed over it; give a file path: " + ErrConfig.Error()
		if !errors.Is(err, ErrConfig) || err.Error() != want {
			t.Errorf("Save(%s) = %v, want %s", path, err, want)
		}
		if err := CheckOutput(path); !errors.Is(err, ErrConfig) {
			t.Errorf("CheckOutput(%s) = %v, want ErrConfig", path, err)
		}
	}
	for _, path := range []string{"/dev/shm/plan.json", "/devices/plan.json", filepath.Join(dir, "plan.json")} {
		if streamPath(path) {
			t.Errorf("streamPath(%s) = true, want false", path)
		}
	}
	for _, l := range []string{link, rel} {
		if fi, err := os.Lstat(l); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is no longer a symbolic link (%v)", l, err)
		}
	}
}
