package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/source"
	"github.com/prepml/prep/verify"
	"github.com/prepml/prep/verify/verifytest"
)

func TestVerifyCommandClean(t *testing.T) {
	f := verifytest.Build(t)
	code, out, errs := runCLI("verify", f.Dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if !strings.HasPrefix(out, "0 findings (4 shards, 16 batches, ") {
		t.Fatalf("stdout %q", out)
	}
}

// TestVerifyReadModesSameJSON: a set with one flipped block byte and a
// stray file gives the same --json report, its seconds aside, read with
// pread and through the mapping.
func TestVerifyReadModesSameJSON(t *testing.T) {
	f := verifytest.Build(t)
	verifytest.FlipByte(t, f.ShardPath(1), verifytest.BlockOffset(t, f.ShardPath(1), 2)+5)
	if err := os.WriteFile(filepath.Join(f.Dir, "stray.bin"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	reports := map[string]map[string]any{}
	for _, mode := range []string{"pread", "mmap"} {
		code, out, errs := runCLI("verify", f.Dir, "--json", "--read-mode", mode)
		if code != 1 {
			t.Fatalf("%s: exit %d, want 1\n%s%s", mode, code, out, errs)
		}
		var rep map[string]any
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%s: %v\n%s", mode, err, out)
		}
		delete(rep, "seconds")
		reports[mode] = rep
	}
	pread, mmap := fmt.Sprint(reports["pread"]), fmt.Sprint(reports["mmap"])
	if pread != mmap || reports["pread"]["finding_count"] != 2.0 {
		t.Errorf("pread: %s\nmmap:  %s\nwant the same, with 2 findings", pread, mmap)
	}
}

// TestCaseB33TruncatedShard is field case B33: a shard cut by 4096
// bytes after it was built is reported with its name, expected size and
// actual size, exit 1, and never mapped (no SIGBUS).
func TestCaseB33TruncatedShard(t *testing.T) {
	f := verifytest.Build(t)
	e := f.Man.Shards[2]
	if err := os.Truncate(f.ShardPath(2), e.Size-4096); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCLI("verify", f.Dir)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "1 finding (") {
		t.Fatalf("stdout %q", out)
	}
	want := fmt.Sprintf("%s: size_mismatch: epoch 1 rank 0: shard is truncated (4096 bytes missing) (expected size %d, actual size %d)",
		e.Path, e.Size, e.Size-4096)
	if lines[0] != want {
		t.Fatalf("line\n got %q\nwant %q", lines[0], want)
	}
}

func TestVerifyCommandJSON(t *testing.T) {
	f := verifytest.Build(t)
	if err := os.WriteFile(filepath.Join(f.Dir, "stray.bin"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCLI("verify", f.Dir, "--json", "--jobs", "3")
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	var rep struct {
		Dir          string  `json:"dir"`
		Plan         string  `json:"plan"`
		Shards       int     `json:"shards"`
		Batches      int     `json:"batches"`
		Bytes        int64   `json:"bytes"`
		DeepBatches  int     `json:"deep_batches"`
		DeepParts    int     `json:"deep_parts"`
		Seconds      float64 `json:"seconds"`
		OK           bool    `json:"ok"`
		FindingCount int     `json:"finding_count"`
		Findings     []map[string]any
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	r, err := shardfmt.Open(f.ShardPath(0))
	if err != nil {
		t.Fatal(err)
	}
	block := int64(r.Geometry().BlockSize)
	r.Close()
	if rep.Dir != f.Dir || rep.Plan != filepath.Join(f.Dir, "plan.json") || rep.Shards != 4 || rep.Batches != 16 ||
		rep.Bytes != 16*block || rep.DeepBatches != 0 || rep.DeepParts != 0 || rep.Seconds <= 0 || rep.OK || rep.FindingCount != 1 {
		t.Errorf("report %+v", rep)
	}
	want := map[string]any{"kind": "unlisted_file", "shard": "stray.bin", "message": "file is not listed in the manifest"}
	if len(rep.Findings) != 1 || fmt.Sprint(rep.Findings[0]) != fmt.Sprint(want) {
		t.Errorf("findings %v, want [%v]", rep.Findings, want)
	}
}

func TestVerifyCommandUsage(t *testing.T) {
	f := verifytest.Build(t)
	for _, args := range [][]string{
		{"verify"},
		{"verify", f.Dir, "--deep=1.5"},
		{"verify", f.Dir, "--deep=abc"},
		{"verify", f.Dir, "--jobs", "-1"},
		{"verify", f.Dir, "--read-mode", "direct"},
	} {
		if code, out, errs := runCLI(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s%s", args, code, out, errs)
		}
	}
	if code, _, errs := runCLI("verify", filepath.Join(f.Dir, "nope")); code != 1 || !strings.Contains(errs, "not a shard set directory") {
		t.Errorf("missing dir: exit %d, %q", code, errs)
	}
}

func TestVerifyCommandDeep(t *testing.T) {
	f := verifytest.Build(t)
	old := sourceOpener
	defer func() { sourceOpener = old }()
	sourceOpener = func(func(*plan.Plan, string) (source.Store, error), int64) verify.SourceOpener {
		return verifytest.OpenSource
	}
	if code, out, _ := runCLI("verify", f.Dir, "--deep=0.5", "--seed", "3"); code != 0 || !strings.Contains(out, "0 findings") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	code, out, _ := runCLI("verify", f.Dir, "--deep")
	if code != 0 || !strings.Contains(out, "16 batches compared with the source") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

func TestInspectCommand(t *testing.T) {
	f := verifytest.Build(t)
	// Shard set table.
	code, out, errs := runCLI("inspect", f.Dir)
	if code != 0 {
		t.Fatalf("exit %d %s", code, errs)
	}
	for _, s := range []string{"shard set", "1.0 (the manifest records none)", "EPOCH", "RANK 0", "RANK 1", fmt.Sprintf("ok %d B 4 batches", f.Man.Shards[0].Size), "x F32 [3], y I64 []"} {
		if !strings.Contains(out, s) {
			t.Errorf("set output lacks %q:\n%s", s, out)
		}
	}
	// One shard, JSON.
	code, out, _ = runCLI("inspect", f.ShardPath(1), "--json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var in struct {
		Kind  string `json:"kind"`
		Shard struct {
			ShardFormat string `json:"shard_format"`
			Size        int64  `json:"size"`
			NumBatches  int    `json:"num_batches"`
			BatchSize   int    `json:"batch_size"`
			Regions     []struct {
				Name         string
				Offset, Size uint64
			}
			Tensors []struct {
				Name        string
				DType       string
				SampleBytes uint64 `json:"sample_bytes"`
			}
			Batches []struct {
				Count, Pads int
			}
			Provenance struct{ Epoch, Rank int }
		}
	}
	if err := json.Unmarshal([]byte(out), &in); err != nil {
		t.Fatal(err)
	}
	s := in.Shard
	if in.Kind != "shard" || s.ShardFormat != "1.0" || s.Size != f.Man.Shards[1].Size || s.NumBatches != 4 || s.BatchSize != 2 ||
		len(s.Tensors) != 2 || s.Tensors[0].SampleBytes != 12 || s.Tensors[1].SampleBytes != 8 ||
		len(s.Batches) != 4 || s.Provenance.Epoch != 0 || s.Provenance.Rank != 1 {
		t.Errorf("shard view %+v", in)
	}
	var end uint64
	for _, r := range s.Regions {
		if r.Offset != end {
			t.Errorf("region %s at %d, want %d", r.Name, r.Offset, end)
		}
		end = r.Offset + r.Size
	}
	if end != uint64(s.Size) {
		t.Errorf("regions end at %d, file is %d", end, s.Size)
	}
	// Plan.
	code, out, _ = runCLI("inspect", filepath.Join(f.Dir, "plan.json"))
	if code != 0 || !strings.Contains(out, "(1 file, 2 row groups, 13 samples)") || !strings.Contains(out, "4 per rank per epoch") {
		t.Errorf("plan: exit %d\n%s", code, out)
	}
}

func TestExportCommand(t *testing.T) {
	f := verifytest.Build(t)
	out := t.TempDir()
	code, stdout, errs := runCLI("export", f.Dir, "--epoch", "1", "--rank", "0", "--step", "3", "-o", out)
	if code != 0 {
		t.Fatalf("exit %d %s", code, errs)
	}
	for _, name := range []string{"x.npy", "y.npy", "sample_ids.npy", "pad_mask.npy"} {
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Error(err)
		}
	}
	if !strings.Contains(stdout, "epoch 1 rank 0 step 3: 2 samples") {
		t.Errorf("stdout %q", stdout)
	}
	if code, _, _ := runCLI("export", f.Dir, "--epoch", "0", "--rank", "0", "--step", "0"); code != 2 {
		t.Errorf("missing -o: exit %d, want 2", code)
	}
}

// TestExportCommandJagged exports a batch with jagged tensors: each gives
// a values file and an offsets file, listed with their shapes, and --json
// names their part.
func TestExportCommandJagged(t *testing.T) {
	f := verifytest.BuildJagged(t)
	ids, _, _ := f.Plan.RankBatch(0, 0, 0, nil)
	var nh, np int
	for _, id := range ids {
		nh += int(id % 4)
		np += int(id % 3)
	}
	out := t.TempDir()
	code, stdout, errs := runCLI("export", f.Dir, "--epoch", "0", "--rank", "0", "--step", "0", "-o", out)
	if code != 0 {
		t.Fatalf("exit %d %s", code, errs)
	}
	for _, line := range []string{
		filepath.Join(out, "h.npy") + "\t<i4 [" + strconv.Itoa(nh) + "]\n",
		filepath.Join(out, "h_offsets.npy") + "\t<i8 [3]\n",
		filepath.Join(out, "p.npy") + "\t<f4 [" + strconv.Itoa(np) + " 2]\n",
		filepath.Join(out, "p_offsets.npy") + "\t<i8 [3]\n",
	} {
		if !strings.Contains(stdout, line) {
			t.Errorf("stdout lacks %q:\n%s", line, stdout)
		}
	}
	code, stdout, errs = runCLI("export", f.Dir, "--epoch", "0", "--rank", "0", "--step", "0", "-o", out, "--json")
	if code != 0 {
		t.Fatalf("exit %d %s", code, errs)
	}
	var res struct {
		Files []struct {
			Tensor, Part, DType, Descr string
			Shape                      []int
		}
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range res.Files {
		got = append(got, fmt.Sprintf("%s/%s %s %s %v", x.Tensor, x.Part, x.DType, x.Descr, x.Shape))
	}
	want := []string{"x/ F32 <f4 [2 3]", "y/ I64 <i8 [2]", fmt.Sprintf("h/values I32 <i4 [%d]", nh), "h/offsets I64 <i8 [3]",
		fmt.Sprintf("p/values F32 <f4 [%d 2]", np), "p/offsets I64 <i8 [3]", "/  <i8 [2]", "/  |b1 [2]"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("--json files\n got %q\nwant %q", got, want)
	}
}

// TestVerifyDeepSpecV1ShardSet: verify --deep accepts a shard set written
// before spec hash version 2 (testdata/shards/spec-v1): the manifest's
// version 1 hash is recognised, not rejected.
func TestVerifyDeepSpecV1ShardSet(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("..", "..", "testdata", "shards", "spec-v1")
	for _, name := range []string{"src/d.parquet", "out/manifest.json", "out/plan.json",
		"out/epoch-00000/rank-00000.shard", "out/epoch-00000/rank-00001.shard",
		"out/epoch-00001/rank-00000.shard", "out/epoch-00001/rank-00001.shard"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errs := runCLI("verify", "--deep", "--source-root", filepath.Join(dir, "src"), filepath.Join(dir, "out"))
	if code != 0 || !strings.HasPrefix(out, "0 findings (4 shards, 20 batches, ") || !strings.Contains(out, "20 batches compared with the source") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
}

// TestVerifyDeepHashBucketsBeyondFloat64 pins a fault: a shard set made
// with bytes.buckets above 2^53 (the documented maximum is 2^63-1) failed
// verify --deep, because the manifest's spec was read back through
// float64 and no longer matched its hash. Spec integers round-trip exactly.
func TestVerifyDeepHashBucketsBeyondFloat64(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	type row struct {
		ID    int64  `parquet:"id"`
		Label string `parquet:"label"`
	}
	rows := make([]row, 40)
	for i := range rows {
		rows[i] = row{int64(i), fmt.Sprintf("label-%d", i%9)}
	}
	pqfixture.Of(rows...).WriteFile(t, filepath.Join(src, "d.parquet"))
	pp := filepath.Join(dir, "plan.json")
	if code, _, errs := runCLI("plan", "--source", src, "--seed", "1", "--epochs", "1", "--global-batch", "8", "--world-size", "2", "-o", pp, "-q"); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
	for _, buckets := range []string{"9007199254740993", "9223372036854775807"} {
		spec := filepath.Join(dir, "spec-"+buckets+".yaml")
		if err := os.WriteFile(spec, []byte("tensors:\n  - {name: l, column: label, dtype: I64, bytes: {mode: hash, buckets: "+buckets+"}}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "out-"+buckets)
		if code, _, errs := runCLI("convert", "--plan", pp, "--spec", spec, "-o", out, "-q"); code != 0 {
			t.Fatalf("buckets %s: convert exit %d: %s", buckets, code, errs)
		}
		man, err := os.ReadFile(filepath.Join(out, "manifest.json"))
		if err != nil || !strings.Contains(string(man), `"buckets": `+buckets+",") {
			t.Fatalf("buckets %s: manifest does not record them exactly (%v):\n%s", buckets, err, man)
		}
		code, stdout, errs := runCLI("verify", "--deep", out)
		if code != 0 || !strings.Contains(stdout, "0 findings") || !strings.Contains(stdout, "10 batches compared with the source") {
			t.Errorf("buckets %s: verify --deep exit %d\n%s%s", buckets, code, stdout, errs)
		}
	}
}
