package verify_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prepml/prep/internal/testutil"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/verify"
	"github.com/prepml/prep/verify/verifytest"
)

func TestCleanSet(t *testing.T) {
	f := verifytest.Build(t)
	for _, deep := range []bool{false, true} {
		rep := verifytest.Run(t, verify.Options{Dir: f.Dir, Deep: deep, Source: verifytest.OpenSource, Jobs: 2})
		if !rep.OK {
			for _, x := range rep.Findings {
				t.Errorf("deep=%v: %s", deep, x)
			}
		}
		steps := f.Plan.Steps()
		if rep.Shards != 4 || rep.Batches != 4*steps {
			t.Errorf("deep=%v: shards %d batches %d, want 4 and %d", deep, rep.Shards, rep.Batches, 4*steps)
		}
		wantDeep := 0
		if deep {
			wantDeep = 4 * steps
		}
		if rep.DeepBatches != wantDeep {
			t.Errorf("deep=%v: deep batches %d, want %d", deep, rep.DeepBatches, wantDeep)
		}
	}
}

// TestCorruption damages a good shard set one way each and checks that
// exactly the expected findings appear, with their locations.
func TestCorruption(t *testing.T) {
	type tc struct {
		name   string
		deep   bool
		damage func(t *testing.T, f *verifytest.Fixture) []string // returns expected keys
		check  func(t *testing.T, f *verifytest.Fixture, rep *verify.Report)
	}
	cases := []tc{
		{name: "flip one data byte", damage: func(t *testing.T, f *verifytest.Fixture) []string {
			off := verifytest.BlockOffset(t, f.ShardPath(1), 2)
			verifytest.FlipByte(t, f.ShardPath(1), off+5)
			return []string{"batch_checksum " + f.Man.Shards[1].Path + " b2"}
		}, check: func(t *testing.T, f *verifytest.Fixture, rep *verify.Report) {
			// Expected: the batch table's CRC; actual: the damaged block's.
			r, err := shardfmt.Open(f.ShardPath(1))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			bi, err := r.Batch(2)
			if err != nil {
				t.Fatal(err)
			}
			block, err := r.Block(2)
			if err != nil {
				t.Fatal(err)
			}
			want, got := fmt.Sprintf("%08x", bi.CRC), fmt.Sprintf("%08x", crc32.Checksum(block, crc32.MakeTable(crc32.Castagnoli)))
			x := rep.Findings[0]
			if x.What != "crc32c" || x.Expected != want || x.Actual != got || want == got {
				t.Errorf("crc finding %+v, want expected %s actual %s", x, want, got)
			}
		}},
		{name: "truncate a shard", damage: func(t *testing.T, f *verifytest.Fixture) []string {
			if err := os.Truncate(f.ShardPath(2), f.Man.Shards[2].Size-4096); err != nil {
				t.Fatal(err)
			}
			return []string{"size_mismatch " + f.Man.Shards[2].Path}
		}, check: func(t *testing.T, f *verifytest.Fixture, rep *verify.Report) {
			x := rep.Findings[0]
			size := f.Man.Shards[2].Size
			if x.Expected != fmt.Sprint(size) || x.Actual != fmt.Sprint(size-4096) {
				t.Errorf("expected/actual = %s/%s, want %d/%d", x.Expected, x.Actual, size, size-4096)
			}
			// B33: the line names the shard, expected size and actual size.
			line := x.String()
			for _, s := range []string{filepath.Base(f.Man.Shards[2].Path), fmt.Sprintf("expected size %d", size), fmt.Sprintf("actual size %d", size-4096)} {
				if !strings.Contains(line, s) {
					t.Errorf("line %q lacks %q", line, s)
				}
			}
		}},
		{name: "delete a shard", damage: func(t *testing.T, f *verifytest.Fixture) []string {
			if err := os.Remove(f.ShardPath(3)); err != nil {
				t.Fatal(err)
			}
			return []string{"shard_missing " + f.Man.Shards[3].Path}
		}},
		{name: "stray and temporary files", damage: func(t *testing.T, f *verifytest.Fixture) []string {
			write(t, filepath.Join(f.Dir, "notes.txt"), "hello")
			tmp := filepath.Join(filepath.Dir(f.ShardPath(0)), "half-written.shard.tmp")
			write(t, tmp, "partial")
			write(t, filepath.Join(f.Dir, ".prep.lock"), "4242 node-7\n")
			rel, _ := filepath.Rel(f.Dir, tmp)
			return []string{"unlisted_file notes.txt", "temp_file " + filepath.ToSlash(rel), "temp_file .prep.lock"}
		}, check: func(t *testing.T, f *verifytest.Fixture, rep *verify.Report) {
			for _, x := range rep.Findings {
				if x.Shard == ".prep.lock" && x.Message != "output-directory lock of a running or killed convert or gc (pid 4242 on host node-7)" {
					t.Errorf("lock finding %q", x.Message)
				}
			}
		}},
		// A killed (or running) convert's spill file was reported as an
		// unlisted file, not as a temporary one that prep gc removes.
		{name: "spill file of a killed convert", damage: func(t *testing.T, f *verifytest.Fixture) []string {
			if err := os.MkdirAll(filepath.Join(f.Dir, ".prep-tmp", "4242"), 0o755); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(f.Dir, ".prep-tmp", "4242", "spill.bin"), "staged records")
			return []string{"temp_file .prep-tmp/4242/spill.bin"}
		}, check: func(t *testing.T, f *verifytest.Fixture, rep *verify.Report) {
			if x := rep.Findings[0]; !strings.Contains(x.Message, "prep gc") {
				t.Errorf("spill finding %q does not say prep gc removes it", x.Message)
			}
		}},
		{name: "change a manifest digest", damage: func(t *testing.T, f *verifytest.Fixture) []string {
			m := *f.Man
			m.Shards = append([]shardfmt.ShardEntry(nil), f.Man.Shards...)
			m.Shards[0].Digest = "sha256:" + strings.Repeat("ab", 32)
			if err := shardfmt.WriteManifest(f.Dir, &m); err != nil {
				t.Fatal(err)
			}
			return []string{"digest_mismatch " + f.Man.Shards[0].Path}
		}, check: func(t *testing.T, f *verifytest.Fixture, rep *verify.Report) {
			x := rep.Findings[0]
			if x.Expected != "sha256:"+strings.Repeat("ab", 32) || x.Actual != f.Man.Shards[0].Digest {
				t.Errorf("digest expected %s actual %s", x.Expected, x.Actual)
			}
		}},
		{name: "swap two shards of different ranks", damage: func(t *testing.T, f *verifytest.Fixture) []string {
			a, b := f.ShardPath(0), f.ShardPath(1) // epoch 0 ranks 0 and 1
			tmp := a + ".swap"
			for _, mv := range [][2]string{{a, tmp}, {b, a}, {tmp, b}} {
				if err := os.Rename(mv[0], mv[1]); err != nil {
					t.Fatal(err)
				}
			}
			p0, p1 := f.Man.Shards[0].Path, f.Man.Shards[1].Path
			return []string{"digest_mismatch " + p0, "shard_identity " + p0, "digest_mismatch " + p1, "shard_identity " + p1}
		}, check: func(t *testing.T, f *verifytest.Fixture, rep *verify.Report) {
			for _, x := range rep.Findings {
				if x.Kind == verify.KindShardIdentity && x.Shard == f.Man.Shards[0].Path && (x.Expected != "(0, 0)" || x.Actual != "(0, 1)") {
					t.Errorf("identity %+v", x)
				}
			}
		}},
		{name: "manifest lists too few steps", damage: func(t *testing.T, f *verifytest.Fixture) []string {
			m := *f.Man
			m.Shards = append([]shardfmt.ShardEntry(nil), f.Man.Shards...)
			m.Shards[3].Batches--
			if err := shardfmt.WriteManifest(f.Dir, &m); err != nil {
				t.Fatal(err)
			}
			return []string{"steps_unequal " + m.Shards[3].Path, "shard_identity " + m.Shards[3].Path}
		}},
		// Regression: a manifest whose batch_size was edited by hand
		// verified clean (0 findings).
		{name: "manifest batch size edited", damage: func(t *testing.T, f *verifytest.Fixture) []string {
			m := *f.Man
			m.BatchSize = f.Plan.BatchSize() + 1
			if err := shardfmt.WriteManifest(f.Dir, &m); err != nil {
				t.Fatal(err)
			}
			want := []string{"plan_mismatch manifest.json"}
			for _, s := range m.Shards {
				want = append(want, "shard_identity "+s.Path)
			}
			return want
		}, check: func(t *testing.T, f *verifytest.Fixture, rep *verify.Report) {
			// The manifest's edited size against the plan's, and each
			// shard's own (the plan's) against the manifest's.
			planned, edited := fmt.Sprint(f.Plan.BatchSize()), fmt.Sprint(f.Plan.BatchSize()+1)
			for _, x := range rep.Findings {
				exp, act := planned, edited
				if x.Kind == verify.KindShardIdentity {
					exp, act = edited, planned
				}
				if x.What != "batch size" || x.Expected != exp || x.Actual != act {
					t.Errorf("finding %s, want expected %s actual %s", x, exp, act)
				}
			}
		}},
		{name: "no plan and unequal steps", damage: func(t *testing.T, f *verifytest.Fixture) []string {
			if err := os.Remove(filepath.Join(f.Dir, verify.PlanFileName)); err != nil {
				t.Fatal(err)
			}
			m := *f.Man
			m.Shards = append([]shardfmt.ShardEntry(nil), f.Man.Shards...)
			m.Shards[1].Batches++
			if err := shardfmt.WriteManifest(f.Dir, &m); err != nil {
				t.Fatal(err)
			}
			return []string{"plan_invalid " + filepath.Join(f.Dir, verify.PlanFileName), "steps_unequal " + m.Shards[1].Path, "shard_identity " + m.Shards[1].Path}
		}},
		{name: "manifest missing", damage: func(t *testing.T, f *verifytest.Fixture) []string {
			if err := os.Remove(filepath.Join(f.Dir, shardfmt.ManifestName)); err != nil {
				t.Fatal(err)
			}
			return []string{"manifest_invalid manifest.json"}
		}},
		{name: "plan with another seed", damage: func(t *testing.T, f *verifytest.Fixture) []string {
			cfg := f.Plan.Config
			cfg.Seed++
			p, err := plan.New(f.Plan.Source, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Save(filepath.Join(f.Dir, verify.PlanFileName)); err != nil {
				t.Fatal(err)
			}
			want := []string{"plan_mismatch manifest.json"}
			// Every batch whose ids differ under the new seed: one finding
			// at its first differing slot.
			for i, s := range f.Man.Shards {
				r, err := shardfmt.Open(f.ShardPath(i))
				if err != nil {
					t.Fatal(err)
				}
				for k := 0; k < p.Steps(); k++ {
					got, _ := r.SampleIDs(k)
					exp, _, _ := p.RankBatch(s.Epoch, s.Rank, k, nil)
					for j := range exp {
						if got[j] != exp[j] {
							want = append(want, fmt.Sprintf("plan_mismatch %s b%d id%d", s.Path, k, got[j]))
							break
						}
					}
				}
				r.Close()
			}
			if len(want) < 5 {
				t.Fatalf("seed change moved only %d batches", len(want)-1)
			}
			return want
		}},
		{name: "edit one source value after convert", deep: true, damage: func(t *testing.T, f *verifytest.Fixture) []string {
			const id = 5
			path := filepath.Join(f.SrcDir, verifytest.SourceFile)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			binary.LittleEndian.PutUint64(data[4+8*id:], 77) // was 1015; size and footer unchanged
			write(t, path, string(data))
			var want []string
			for _, b := range batchesHolding(f, id) {
				want = append(want, fmt.Sprintf("value_mismatch %s b%d x id5", b.path, b.k), fmt.Sprintf("value_mismatch %s b%d y id5", b.path, b.k))
			}
			if len(want) < 4 {
				t.Fatalf("sample 5 appears %d times", len(want)/2)
			}
			return want
		}, check: func(t *testing.T, f *verifytest.Fixture, rep *verify.Report) {
			for _, x := range rep.Findings {
				switch x.Tensor {
				case "x":
					if x.Expected != "77 (0x429a0000)" || x.Actual != "1015 (0x447dc000)" || *x.Element != 0 {
						t.Errorf("x: %s", x)
					}
				case "y":
					if x.Expected != "-77" || x.Actual != "-1015" || *x.Element != 0 {
						t.Errorf("y: %s", x)
					}
				}
			}
		}},
		// A source that moved since the plan only said "source file is
		// missing", not how to point verify at it.
		{name: "source file moved", deep: true, damage: func(t *testing.T, f *verifytest.Fixture) []string {
			path := filepath.Join(f.SrcDir, verifytest.SourceFile)
			if err := os.Rename(path, path+".moved"); err != nil {
				t.Fatal(err)
			}
			want := []string{"source_changed " + path}
			for _, s := range f.Man.Shards {
				want = append(want, "source_unreadable "+s.Path)
			}
			return want
		}, check: func(t *testing.T, f *verifytest.Fixture, rep *verify.Report) {
			x := rep.Findings[0]
			if x.Kind != verify.KindSourceChanged || !strings.Contains(x.Message, "source file is missing") || !strings.Contains(x.Message, "--source-root") {
				t.Errorf("first finding %s, want source_changed naming --source-root", x)
			}
		}},
		{name: "source file replaced", deep: true, damage: func(t *testing.T, f *verifytest.Fixture) []string {
			path := filepath.Join(f.SrcDir, verifytest.SourceFile)
			data, _ := os.ReadFile(path)
			write(t, path, string(data)+"x")
			return []string{"source_changed " + path}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := verifytest.Build(t)
			want := c.damage(t, f)
			sort.Strings(want)
			rep := verifytest.Run(t, verify.Options{Dir: f.Dir, Deep: c.deep, Source: verifytest.OpenSource, Jobs: 2, MaxPerShard: 100})
			got := verifytest.Keys(rep.Findings)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("findings\n got %q\nwant %q\n%s", got, want, verifytest.Lines(rep))
			}
			if c.check != nil {
				c.check(t, f, rep)
			}
		})
	}
}

func TestFindingOrderDeterministic(t *testing.T) {
	f := verifytest.Build(t)
	for i := range f.Man.Shards {
		verifytest.FlipByte(t, f.ShardPath(i), verifytest.BlockOffset(t, f.ShardPath(i), 1))
	}
	write(t, filepath.Join(f.Dir, "zz.txt"), "z")
	var first string
	for jobs := 1; jobs <= 4; jobs++ {
		rep := verifytest.Run(t, verify.Options{Dir: f.Dir, Jobs: jobs})
		got := verifytest.Lines(rep)
		if jobs == 1 {
			first = got
			if len(rep.Findings) != 5 || rep.Findings[0].Kind != verify.KindUnlistedFile {
				t.Fatalf("findings:\n%s", got)
			}
		} else if got != first {
			t.Fatalf("jobs=%d order differs:\n%s\nvs\n%s", jobs, got, first)
		}
	}
}

// TestPerShardCap lists MaxPerShard findings of one kind per shard and
// counts the rest in one summary finding.
func TestPerShardCap(t *testing.T) {
	f := verifytest.Build(t)
	for k := 0; k < f.Plan.Steps(); k++ {
		verifytest.FlipByte(t, f.ShardPath(0), verifytest.BlockOffset(t, f.ShardPath(0), k))
	}
	rep := verifytest.Run(t, verify.Options{Dir: f.Dir, MaxPerShard: 1})
	if len(rep.Findings) != 2 {
		t.Fatalf("findings:\n%s", verifytest.Lines(rep))
	}
	want := fmt.Sprintf("%d more batch_checksum findings in this shard not listed", f.Plan.Steps()-1)
	if rep.Findings[1].Message != want {
		t.Fatalf("summary %q, want %q", rep.Findings[1].Message, want)
	}
}

func TestJSONReport(t *testing.T) {
	f := verifytest.Build(t)
	if err := os.Truncate(f.ShardPath(1), 100); err != nil {
		t.Fatal(err)
	}
	rep := verifytest.Run(t, verify.Options{Dir: f.Dir})
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got["ok"] != false || got["finding_count"] != 1.0 || got["shards"] != 4.0 || got["dir"] != f.Dir ||
		got["plan"] != filepath.Join(f.Dir, verify.PlanFileName) || got["batches"] != float64(3*f.Plan.Steps()) {
		t.Errorf("report fields: %s", b)
	}
	fs := got["findings"].([]any)
	x := fs[0].(map[string]any)
	want := map[string]any{"kind": "size_mismatch", "shard": f.Man.Shards[1].Path, "epoch": 0.0, "rank": 1.0,
		"what": "size", "expected": fmt.Sprint(f.Man.Shards[1].Size), "actual": "100",
		"message": fmt.Sprintf("shard is truncated (%d bytes missing)", f.Man.Shards[1].Size-100)}
	if len(x) != len(want) {
		t.Errorf("finding has keys %v, want %v", x, want)
	}
	for k, v := range want {
		if x[k] != v {
			t.Errorf("finding[%q] = %v, want %v", k, x[k], v)
		}
	}
}

func TestRunNotADirectory(t *testing.T) {
	_, err := verify.Run(context.Background(), verify.Options{Dir: filepath.Join(t.TempDir(), "nope")})
	if err == nil || !strings.Contains(err.Error(), "not a shard set directory") {
		t.Fatalf("err = %v", err)
	}
}

// shardBatch is batch k of the shard at path (relative to the set).
type shardBatch struct {
	path string
	k    int
}

// batchesHolding returns each batch of f's shards, in manifest and step
// order, once per slot of it that holds sample id.
func batchesHolding(f *verifytest.Fixture, id uint64) []shardBatch {
	var out []shardBatch
	for _, s := range f.Man.Shards {
		for k := 0; k < f.Plan.Steps(); k++ {
			ids, _, _ := f.Plan.RankBatch(s.Epoch, s.Rank, k, nil)
			for _, x := range ids {
				if x == id {
					out = append(out, shardBatch{s.Path, k})
				}
			}
		}
	}
	return out
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDeepSampleSeeded checks that --deep=FRACTION compares a seeded,
// repeatable subset of batches.
func TestDeepSampleSeeded(t *testing.T) {
	f := verifytest.Build(t)
	counts := map[uint64]int{}
	for seed := uint64(0); seed < 8; seed++ {
		var n []int
		for rep := 0; rep < 2; rep++ {
			r := verifytest.Run(t, verify.Options{Dir: f.Dir, Deep: true, DeepFraction: 0.5, Seed: seed, Source: verifytest.OpenSource})
			if !r.OK {
				t.Fatal(verifytest.Lines(r))
			}
			n = append(n, r.DeepBatches)
		}
		if n[0] != n[1] {
			t.Fatalf("seed %d: %d then %d batches", seed, n[0], n[1])
		}
		if n[0] == 0 || n[0] == 16 {
			t.Errorf("seed %d: fraction 0.5 compared %d of 16 batches", seed, n[0])
		}
		counts[seed] = n[0]
	}
	distinct := map[int]bool{}
	for _, c := range counts {
		distinct[c] = true
	}
	if len(distinct) < 2 {
		t.Errorf("every seed compared the same number of batches: %v", counts)
	}
}

func TestDeepWithoutSourceReader(t *testing.T) {
	f := verifytest.Build(t)
	rep := verifytest.Run(t, verify.Options{Dir: f.Dir, Deep: true})
	if got := verifytest.Keys(rep.Findings); len(got) != 1 || got[0] != "source_unreadable " {
		t.Fatalf("findings %q", got)
	}
	if rep.Findings[0].Message != "values not compared: this build has no source reader for --deep" || rep.DeepBatches != 0 {
		t.Fatalf("%s", verifytest.Lines(rep))
	}
}

func TestPlanElsewhere(t *testing.T) {
	f := verifytest.Build(t)
	moved := filepath.Join(t.TempDir(), "the-plan.json")
	if err := os.Rename(filepath.Join(f.Dir, verify.PlanFileName), moved); err != nil {
		t.Fatal(err)
	}
	rep := verifytest.Run(t, verify.Options{Dir: f.Dir})
	if len(rep.Findings) != 1 || rep.Findings[0].Kind != verify.KindPlanInvalid ||
		rep.Findings[0].Message != "plan conformance not checked: the shard set holds no plan.json; name the plan with --plan" {
		t.Fatalf("without plan:\n%s", verifytest.Lines(rep))
	}
	if rep := verifytest.Run(t, verify.Options{Dir: f.Dir, PlanPath: moved}); !rep.OK || rep.Plan != moved {
		t.Fatalf("with --plan:\n%s", verifytest.Lines(rep))
	}
}

// TestPartialSet checks a set holding some of the plan's ranks: each absent
// (epoch, rank) is a rank_missing finding unless AllowPartial (one node's
// share) is set.
func TestPartialSet(t *testing.T) {
	f := verifytest.Build(t)
	m := *f.Man
	m.Shards = append([]shardfmt.ShardEntry(nil), f.Man.Shards[0], f.Man.Shards[2]) // rank 0 of both epochs
	if err := shardfmt.WriteManifest(f.Dir, &m); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 3} {
		if err := os.Remove(f.ShardPath(i)); err != nil {
			t.Fatal(err)
		}
	}
	rep := verifytest.Run(t, verify.Options{Dir: f.Dir})
	want := []string{"rank_missing " + shardfmt.ShardFileName(0, 1), "rank_missing " + shardfmt.ShardFileName(1, 1)}
	if got := verifytest.Keys(rep.Findings); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q", got, want)
	}
	if rep := verifytest.Run(t, verify.Options{Dir: f.Dir, AllowPartial: true}); !rep.OK || rep.Batches != 2*f.Plan.Steps() {
		t.Fatalf("partial:\n%s", verifytest.Lines(rep))
	}
}

// atimeSentinel sets path's access time far in the past and returns a
// function reporting whether the file was read since (the file system
// updates a stale access time on read under relatime and strictatime).
func atimeSentinel(t *testing.T, path string) (read func() bool) {
	t.Helper()
	old := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	return func() bool {
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		return time.Unix(st.Atim.Unix()).After(old.Add(time.Hour))
	}
}

// TestUnsafeManifestPathNeverOpened pins fault "verify reads files outside
// the set": a manifest path leaving the set ("../x/keep.shard",
// "epoch-00000/../../x/keep.shard") is one manifest_invalid finding and the
// file it names is never opened, and a shard that is a symbolic link to an
// outside file is a finding, not 0 findings.
func TestUnsafeManifestPathNeverOpened(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(f *verifytest.Fixture, outside string, m *shardfmt.Manifest)
		want []string
	}{
		{"dot-dot path", func(f *verifytest.Fixture, outside string, m *shardfmt.Manifest) {
			m.Shards[1].Path = "../x/keep.shard"
		}, []string{"manifest_invalid manifest.json", "unlisted_file epoch-00000/rank-00001.shard"}},
		{"path through the epoch directory", func(f *verifytest.Fixture, outside string, m *shardfmt.Manifest) {
			m.Shards[1].Path = "epoch-00000/../../x/keep.shard"
		}, []string{"manifest_invalid manifest.json", "unlisted_file epoch-00000/rank-00001.shard"}},
		{"shard is a link to an outside file", func(f *verifytest.Fixture, outside string, m *shardfmt.Manifest) {
			p := f.ShardPath(1)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, p); err != nil {
				t.Fatal(err)
			}
		}, []string{"header_invalid epoch-00000/rank-00001.shard"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := verifytest.Build(t)
			// The outside file is a valid shard: reading it would show.
			x := filepath.Join(filepath.Dir(f.Dir), "x")
			if err := os.MkdirAll(x, 0o755); err != nil {
				t.Fatal(err)
			}
			outside := filepath.Join(x, "keep.shard")
			b, err := os.ReadFile(f.ShardPath(1))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(outside, b, 0o644); err != nil {
				t.Fatal(err)
			}
			m := *f.Man
			m.Shards = append([]shardfmt.ShardEntry(nil), f.Man.Shards...)
			tc.edit(f, outside, &m)
			if err := shardfmt.WriteManifest(f.Dir, &m); err != nil {
				t.Fatal(err)
			}
			read := atimeSentinel(t, outside)
			rep := verifytest.Run(t, verify.Options{Dir: f.Dir, Jobs: 2, AllowPartial: true})
			if got := verifytest.Keys(rep.Findings); strings.Join(got, "; ") != strings.Join(tc.want, "; ") {
				t.Errorf("findings %q, want %q", got, tc.want)
			}
			if rep.Batches != 3*f.Plan.Steps() {
				t.Errorf("checked %d batches, want %d (the outside file's excluded)", rep.Batches, 3*f.Plan.Steps())
			}
			if read() {
				t.Error("the file outside the set was read")
			}
		})
	}
}

// TestSymlinkedSetDirNoFalseFinding pins fault "verify through a symlinked
// output path reports a false unlisted_file finding for '.'": a clean set
// reached through a link verifies clean, with and without a trailing slash.
func TestSymlinkedSetDirNoFalseFinding(t *testing.T) {
	f := verifytest.Build(t)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(f.Dir, link); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{link, link + "/"} {
		rep := verifytest.Run(t, verify.Options{Dir: dir, Jobs: 2})
		if !rep.OK || rep.Batches != 4*f.Plan.Steps() {
			t.Errorf("%s: findings %v, %d batches; want none, %d", dir, verifytest.Keys(rep.Findings), rep.Batches, 4*f.Plan.Steps())
		}
	}
}

// TestShardTruncatedDuringVerify pins fault "a shard truncated while verify
// reads it kills verify with SIGBUS": the shard is cut to its first block
// after verify checked batch 0's block; every batch whose block or sample
// ids lie past the cut (batch 0's ids too: they follow the blocks) is a
// finding (size_mismatch, naming the batch) and verify returns. Mapped
// (ReadMmap), the same findings: each fault on the mapping is recovered,
// and its message names the section and the page of the file that could
// not be read.
func TestShardTruncatedDuringVerify(t *testing.T) {
	for _, mode := range readModes {
		t.Run(string(mode), func(t *testing.T) { shardTruncatedDuringVerify(t, mode) })
	}
}

func shardTruncatedDuringVerify(t *testing.T, mode verify.ReadMode) {
	f := verifytest.BuildSize(t, verifytest.Size{Rows: 64, Dim: 1024, GlobalBatch: 8})
	path := f.ShardPath(0)
	r, err := shardfmt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	b0, _ := r.Batch(0)
	b1, _ := r.Batch(1)
	cut := int64(b0.Offset) + int64(r.Geometry().BlockSize)
	steps := r.NumBatches()
	r.Close()
	m := *f.Man
	m.Shards = f.Man.Shards[:1] // only this shard, so the cut lands mid-shard
	if err := shardfmt.WriteManifest(f.Dir, &m); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(f.Man.Shards); i++ {
		if err := os.Remove(f.ShardPath(i)); err != nil {
			t.Fatal(err)
		}
	}
	calls := 0
	rep := verifytest.Run(t, verify.Options{Dir: f.Dir, Jobs: 1, AllowPartial: true, RecomputePlan: true, ReadMode: mode, Progress: func(int64) {
		if calls++; calls == 1 {
			if err := os.Truncate(path, cut); err != nil {
				t.Error(err)
			}
		}
	}})
	var want []string
	for k := 0; k < steps; k++ {
		want = append(want, fmt.Sprintf("size_mismatch epoch-00000/rank-00000.shard b%d", k))
	}
	sort.Strings(want)
	if got := verifytest.Keys(rep.Findings); strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("findings %q, want %q", got, want)
	}
	if mode != verify.ReadMmap || cut%int64(os.Getpagesize()) != 0 {
		return
	}
	if int64(b1.Offset) != cut {
		t.Fatalf("batch 1's block at %d, want it at the cut (%d)", b1.Offset, cut)
	}
	// Batch 1's block starts at the cut, a page boundary: the fault is on
	// its first page.
	msg := fmt.Sprintf("shard changed while being read: block at offset %d: wrong file size: memory fault reading the mapping (file cut short after open?)", cut)
	if x := rep.Findings[1]; *x.Batch != 1 || x.Message != msg {
		t.Errorf("finding %s, want batch 1: %s", x, msg)
	}
}

// TestJaggedBytesCounted pins that a jagged shard's report counts each
// block's own bytes, not the largest block's for every batch: of 3
// blocks, the first holds 3000 I32 values (12 KiB with its offsets), the others none
// (4 KiB each).
func TestJaggedBytesCounted(t *testing.T) {
	dir := t.TempDir()
	_, err := testutil.WriteShardSet(dir, testutil.ShardSet{Epochs: 1, Ranks: 1, Steps: 3, BatchSize: 2,
		Tensors:    []shardfmt.TensorInfo{{Name: "h", DType: shardfmt.I32, Jagged: true}},
		Provenance: shardfmt.Provenance{PlanFingerprint: "sha256:p", SourceFingerprint: "sha256:s", SpecHash: "sha256:spec", WorldSize: 1, Workers: 1},
		Manifest:   shardfmt.Manifest{Format: "prep-manifest/v1", PlanFingerprint: "sha256:p", SourceFingerprint: "sha256:s", SpecHash: "sha256:spec"},
		Batch:      func(e, r, k int) ([]uint64, int, error) { return []uint64{uint64(2 * k), uint64(2*k + 1)}, 0, nil },
		Values: func(_, _, _ int, ids []uint64) []uint64 {
			if ids[0] == 0 {
				return []uint64{3000}
			}
			return []uint64{0}
		},
		Fill: func(g shardfmt.Geometry, ids []uint64, block []byte) {
			if ids[0] == 0 {
				for j := 1; j <= 2; j++ {
					binary.LittleEndian.PutUint64(block[g.SlabOffset[0]+8*uint64(j):], 3000)
				}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	rep := verifytest.Run(t, verify.Options{Dir: dir, Jobs: 1})
	if rep.Batches != 3 || rep.Bytes != 12288+2*4096 {
		t.Fatalf("batches %d bytes %d, want 3 and %d\n%s", rep.Batches, rep.Bytes, 12288+2*4096, verifytest.Lines(rep))
	}
}
