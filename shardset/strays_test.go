package shardset

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStraysClassified lists every kind of stray a set can hold, each with
// its kind and (epoch, rank), in path order; listed shards, the manifest and
// the plan copy are not strays, and nothing under a link is listed.
func TestStraysClassified(t *testing.T) {
	dir := buildSet(t, [2]int{0, 0})
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "rank-00000.shard"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		LockName:                               "1 host\n",
		TempDirName + "/42/spill.bin":          "spill",
		"epoch-00000/rank-00001.shard":         "unlisted",
		"epoch-00000/rank-00002.shard.tmp-abc": "partial shard",
		"manifest.json.tmp-99":                 "partial manifest",
		"notes.txt":                            "mine",
	}
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(dir, "epoch-00003")); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got []string
	for _, st := range s.Strays(func(p string, err error) { t.Errorf("%s: %v", p, err) }) {
		got = append(got, fmt.Sprintf("%s %s %d %d %d %v", st.Path, st.Kind, st.Epoch, st.Rank, st.Size, st.AtomicTemp()))
	}
	want := []string{
		".prep-tmp/42/spill.bin staging -1 -1 5 false",
		".prep.lock lock -1 -1 7 false",
		"epoch-00000/rank-00001.shard shard 0 1 8 false",
		"epoch-00000/rank-00002.shard.tmp-abc temp 0 2 13 true",
		fmt.Sprintf("epoch-00003 link -1 -1 %d false", len(outside)),
		"manifest.json.tmp-99 temp -1 -1 16 true",
		"notes.txt other -1 -1 4 false",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("strays:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
