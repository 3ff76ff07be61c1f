package main

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/internal/testutil"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/shardset"
)

type inspectRow struct {
	M  map[string]int32 `parquet:"m"`
	LL [][]int64        `parquet:"ll,list"`
	S  []string         `parquet:"s,list"`
}

// inspect of a Parquet file shows a map's key and value leaves as
// MAP<K, V> with their role, and a list of lists as LIST<LIST<T>>.
func TestInspectParquetNestedTypes(t *testing.T) {
	path := pqfixture.Of(inspectRow{M: map[string]int32{"a": 1}, LL: [][]int64{{1}}, S: []string{"x"}}).TempFile(t, "n.parquet")
	code, out, errs := runCLI("inspect", path)
	if code != 0 {
		t.Fatalf("exit %d %s", code, errs)
	}
	for _, want := range [][]string{
		{"m.key", "BYTE_ARRAY", "MAP<STRING, INT(32,true)> (key)", "no"},
		{"m.value", "INT32", "MAP<STRING, INT(32,true)> (value)", "no"},
		{"ll", "INT64", "LIST<LIST<INT(64,true)>>", "no"},
		{"s", "BYTE_ARRAY", "LIST<STRING>", "no"},
	} {
		found := false
		for _, line := range strings.Split(out, "\n") {
			f := strings.Split(strings.Join(strings.Fields(line), " "), " ")
			if len(f) > 0 && f[0] == want[0] {
				found = true
				if got := strings.Join(strings.Fields(line), " "); got != strings.Join(want, " ") {
					t.Errorf("line %q, want %q", got, strings.Join(want, " "))
				}
			}
		}
		if !found {
			t.Errorf("no line for %s in\n%s", want[0], out)
		}
	}
}

// inspect of a shard set and of a shard holding a jagged tensor (format
// 2.0) marks the tensor jagged, gives its per-value shape and the offsets
// slab, and each batch's own block size: with b = 4, "x" F32 takes
// [0, 16), "h"'s offsets (5 int64) [256, 296), its values start at 512, so
// 1000 and 2000 I32 values end at 4512 and 8512: blocks of 8192 and 12288
// bytes (FORMAT.md, block layout 2.0).
func TestInspectJaggedShard(t *testing.T) {
	dir := t.TempDir()
	_, err := testutil.WriteShardSet(dir, testutil.ShardSet{Epochs: 1, Ranks: 1, Steps: 2, BatchSize: 4,
		Tensors:    []shardfmt.TensorInfo{{Name: "x", DType: shardfmt.F32}, {Name: "h", DType: shardfmt.I32, Jagged: true}},
		Provenance: shardfmt.Provenance{PlanFingerprint: "sha256:p", SourceFingerprint: "sha256:s", SpecHash: "sha256:spec", WorldSize: 1, Workers: 1},
		Manifest:   shardfmt.Manifest{Format: "prep-manifest/v1", ShardFormat: "2.0", PlanFingerprint: "sha256:p", SourceFingerprint: "sha256:s", SpecHash: "sha256:spec"},
		Batch: func(e, r, k int) ([]uint64, int, error) {
			return []uint64{uint64(4 * k), uint64(4*k + 1), uint64(4*k + 2), uint64(4*k + 3)}, 0, nil
		},
		Values: func(e, r, k int, ids []uint64) []uint64 { return []uint64{uint64(1000 * (k + 1))} },
		Fill: func(g shardfmt.Geometry, ids []uint64, block []byte) {
			n := 1000 * (ids[0]/4 + 1)
			for j := range 5 {
				binary.LittleEndian.PutUint64(block[256+8*j:], n*uint64(min(j, 4))/4)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	fields := func(out string) [][]string {
		var rows [][]string
		for _, line := range strings.Split(out, "\n") {
			rows = append(rows, strings.Fields(line))
		}
		return rows
	}
	has := func(out string, want ...string) {
		t.Helper()
		for _, f := range fields(out) {
			if slices.Equal(f, want) {
				return
			}
		}
		t.Errorf("no line %q in\n%s", strings.Join(want, " "), out)
	}
	code, out, errs := runCLI("inspect", dir)
	if code != 0 {
		t.Fatalf("exit %d %s", code, errs)
	}
	st, err := os.Stat(filepath.Join(dir, shardfmt.ShardFileName(0, 0)))
	if err != nil {
		t.Fatal(err)
	}
	has(out, "tensors", "x", "F32", "[],", "h", "I32", "jagged", "[]")
	has(out, "shard", "format", "2.0")
	has(out, "total", strconv.FormatInt(st.Size(), 10), "bytes", "in", "1", "epoch", "x", "1", "rank")

	code, out, errs = runCLI("inspect", filepath.Join(dir, shardfmt.ShardFileName(0, 0)))
	if code != 0 {
		t.Fatalf("exit %d %s", code, errs)
	}
	has(out, "h", "I32", "jagged", "[]", "4/value", "256", "40", "(offsets)")
	// Blocks differ in size; the header's block_size is the largest.
	has(out, "batches", "2,", "each", "4", "sample", "slots", "in", "a", "block", "of", "its", "own", "size,", "at", "most", "12288", "bytes")
	has(out, "shard", "format", "2.0")
	for _, path := range []string{dir, filepath.Join(dir, shardfmt.ShardFileName(0, 0))} {
		code, out, errs := runCLI("inspect", path, "--json")
		var in struct {
			Set struct {
				ShardFormat string `json:"shard_format"`
			}
			Shard struct {
				ShardFormat string `json:"shard_format"`
			}
		}
		if err := json.Unmarshal([]byte(out), &in); code != 0 || err != nil || in.Set.ShardFormat+in.Shard.ShardFormat != "2.0" {
			t.Errorf("inspect %s --json: exit %d, %v, shard_format %+v\n%s", path, code, err, in, errs)
		}
	}
	for k, size := range []string{"8192", "12288"} {
		found := false
		for _, f := range fields(out) {
			if len(f) == 8 && f[0] == strconv.Itoa(k) && f[2] == size && f[3] == "4" {
				found = true
			}
		}
		if !found {
			t.Errorf("no batch %d row of size %s in\n%s", k, size, out)
		}
	}
}

// TestInspectUnfinishedInputs: a directory a killed convert left (no
// manifest.json yet, a lock and staging) is named an uncommitted shard
// set, as verify names it; an empty or truncated .parquet file is named
// so, not measured against the smallest shard.
func TestInspectUnfinishedInputs(t *testing.T) {
	dir := t.TempDir()
	killed := filepath.Join(dir, "killed")
	os.MkdirAll(filepath.Join(killed, shardset.TempDirName), 0o755)
	os.WriteFile(filepath.Join(killed, shardset.TempDirName, "x"), []byte("partial"), 0o644)
	os.WriteFile(filepath.Join(killed, shardset.LockName), nil, 0o644)
	empty := filepath.Join(dir, "zero_bytes.parquet")
	os.WriteFile(empty, nil, 0o644)
	cut := filepath.Join(dir, "cut.parquet")
	os.WriteFile(cut, []byte("\x15\x00\x15\x02"), 0o644)
	for _, c := range []struct{ path, want string }{
		{killed, killed + ": an uncommitted shard set: manifest.json is missing, the set was never committed (a convert was killed, or is running, before its first shard was committed; rerun the convert, or remove its leftovers with prep gc)"},
		{empty, empty + ": an empty file (0 bytes), not a Parquet file: its write was cut short or never made"},
		{cut, cut + ": a truncated or corrupt Parquet file: its 4 bytes do not start with the magic PAR1"},
	} {
		code, _, errs := runCLI("inspect", c.path)
		if code != 1 || !strings.Contains(errs, c.want) || strings.Contains(errs, "not a shard") {
			t.Errorf("inspect %s: exit %d, stderr %q; want 1 with %q", c.path, code, errs, c.want)
		}
	}
	// A directory holding none of a convert's leftovers is no shard set.
	plain := filepath.Join(dir, "plain")
	os.MkdirAll(plain, 0o755)
	os.WriteFile(filepath.Join(plain, "notes.txt"), []byte("x"), 0o644)
	if code, _, errs := runCLI("inspect", plain); code != 1 || !strings.Contains(errs, "not a shard, shard set or plan") {
		t.Errorf("inspect of a plain directory: exit %d, %q", code, errs)
	}
}

// TestInspectDamagedSetFails: inspect of a shard set with one shard cut
// short and one removed shows the table, then exits 1 naming both, in text
// and --json; the intact set exits 0.
func TestInspectDamagedSetFails(t *testing.T) {
	dir := t.TempDir()
	_, err := testutil.WriteShardSet(dir, testutil.ShardSet{Epochs: 1, Ranks: 3, Steps: 2, BatchSize: 4,
		Tensors:    []shardfmt.TensorInfo{{Name: "x", DType: shardfmt.F32}},
		Provenance: shardfmt.Provenance{PlanFingerprint: "sha256:p", SourceFingerprint: "sha256:s", SpecHash: "sha256:spec", WorldSize: 3, Workers: 1},
		Manifest:   shardfmt.Manifest{Format: "prep-manifest/v1", PlanFingerprint: "sha256:p", SourceFingerprint: "sha256:s", SpecHash: "sha256:spec"},
		Batch: func(e, r, k int) ([]uint64, int, error) {
			b := uint64(12*k + 4*r)
			return []uint64{b, b + 1, b + 2, b + 3}, 0, nil
		},
		Fill: func(shardfmt.Geometry, []uint64, []byte) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI("inspect", dir); code != 0 {
		t.Fatalf("intact set: exit %d %s", code, errs)
	}
	cut := filepath.Join(dir, shardfmt.ShardFileName(0, 1))
	st, err := os.Stat(cut)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(cut, st.Size()-100); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, shardfmt.ShardFileName(0, 2))); err != nil {
		t.Fatal(err)
	}
	want := dir + ": 2 shards damaged: epoch 0 rank 1: size_mismatch; epoch 0 rank 2: missing (prep verify " + dir + " checks every batch)"
	for _, args := range [][]string{{"inspect", dir}, {"inspect", dir, "--json"}} {
		code, out, errs := runCLI(args...)
		if code != 1 || !strings.Contains(errs, want) {
			t.Errorf("%q: exit %d, stderr %q; want 1 with %q", args, code, errs, want)
		}
		if !strings.Contains(out, "size_mismatch") || !strings.Contains(out, "missing") {
			t.Errorf("%q: the table is not shown:\n%s", args, out)
		}
	}
}

// TestInspectRefusesOtherFiles: a CSV (or any file that is no shard, plan
// or Parquet file) is refused by its extension and magic, not read as a
// shard.
func TestInspectRefusesOtherFiles(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "data.csv")
	os.WriteFile(csv, []byte("id,label\n1,0\n2,1\n"), 0o644)
	blob := filepath.Join(dir, "blob.bin")
	os.WriteFile(blob, []byte("GIF89a\x01\x00\x01\x00\x00\x00\x00"), 0o644)
	for _, c := range []struct{ path, want string }{
		{csv, "not a shard, shard set or plan: " + csv + " is a CSV file; inspect reads shards, shard sets, plans and Parquet files (convert it to Parquet first to plan from it)"},
		{blob, "not a shard, shard set or plan: " + blob + ` starts with "GIF89a\x01\x00", neither a shard's magic, PAR1 (Parquet) nor a plan's JSON`},
	} {
		code, _, errs := runCLI("inspect", c.path)
		if code != 1 || !strings.Contains(errs, c.want) || strings.Contains(errs, "magic") && strings.Contains(errs, "header") {
			t.Errorf("inspect %s: exit %d, stderr %q; want 1 with %q", c.path, code, errs, c.want)
		}
	}
}

// TestInspectPlanShowsMixture: inspect of a mixture plan shows each
// source's weight, draw per epoch, rows and filter, and the samples of an
// epoch beside the id space ("103 samples" of the source line), in text and
// --json; it showed only the id space, which read as the epoch's size.
func TestInspectPlanShowsMixture(t *testing.T) {
	sources := mixDirs(t, "    weight: 0.7\n    filter: \"id >= 10\"\n", "    weight: 0.3\n", "epoch_samples: 100\n")
	pp := filepath.Join(filepath.Dir(sources), "plan.json")
	if code, _, errs := runCLI("plan", "--sources", sources, "--global-batch", "10", "-o", pp); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
	code, out, errs := runCLI("inspect", pp)
	if code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"mixture             100 samples per epoch from 2 sources (ids index all 103 samples above)\n",
		"  web               weight 0.7: 70 per epoch of 70 selected rows in 2 files; filter id >= 10\n",
		"  code              weight 0.3: 30 per epoch of 23 rows in 1 file\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
	code, out, errs = runCLI("inspect", pp, "--json")
	if code != 0 {
		t.Fatalf("inspect --json: exit %d: %s", code, errs)
	}
	var v struct {
		Plan struct {
			Mixture struct {
				EpochSamples uint64 `json:"epoch_samples"`
				Sources      []struct {
					Name            string `json:"name"`
					Rows            uint64 `json:"rows"`
					SamplesPerEpoch uint64 `json:"samples_per_epoch"`
				} `json:"sources"`
			} `json:"mixture"`
		} `json:"plan"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	m := v.Plan.Mixture
	if m.EpochSamples != 100 || len(m.Sources) != 2 || m.Sources[0].Name != "web" || m.Sources[0].Rows != 70 || m.Sources[0].SamplesPerEpoch != 70 ||
		m.Sources[1].Name != "code" || m.Sources[1].Rows != 23 || m.Sources[1].SamplesPerEpoch != 30 {
		t.Errorf("--json mixture %+v", m)
	}
}
