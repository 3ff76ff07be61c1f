package shardfmt

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCRC32CCheckValue pins the checksum parameters stated in FORMAT.md.
func TestCRC32CCheckValue(t *testing.T) {
	if got := crc32c([]byte("123456789")); got != 0xE3069283 {
		t.Errorf("crc32c(123456789) = %08x, want e3069283", got)
	}
}

func TestShardFileName(t *testing.T) {
	for _, tt := range []struct {
		e, r int
		want string
	}{
		{0, 0, "epoch-00000/rank-00000.shard"},
		{3, 12, "epoch-00003/rank-00012.shard"},
		{123456, 7, "epoch-123456/rank-00007.shard"},
	} {
		if got := ShardFileName(tt.e, tt.r); got != tt.want {
			t.Errorf("ShardFileName(%d, %d) = %q, want %q", tt.e, tt.r, got, tt.want)
		}
	}
}

func TestDTypeJSON(t *testing.T) {
	ti := TensorInfo{Name: "x", DType: BF16, Shape: []uint64{2}}
	b, err := json.Marshal(ti)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"name":"x","dtype":"BF16","shape":[2]}` {
		t.Errorf("Marshal = %s", b)
	}
	var back TensorInfo
	if err := json.Unmarshal(b, &back); err != nil || back.DType != BF16 {
		t.Errorf("Unmarshal = %+v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"dtype":"bf16"}`), &back); err == nil || !strings.Contains(err.Error(), `unknown dtype "bf16"`) {
		t.Errorf("lower-case dtype name: %v, want unknown dtype \"bf16\"", err)
	}
	if _, err := json.Marshal(TensorInfo{DType: 99}); err == nil || !strings.Contains(err.Error(), "invalid dtype code 99") {
		t.Errorf("invalid dtype marshalled: %v, want invalid dtype code 99", err)
	}
}

func TestManifestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	m := &Manifest{
		ToolVersion: "v1", PlanFingerprint: "p", SourceFingerprint: "s", SpecHash: "h",
		Spec:    map[string]any{"tensors": []any{"x"}},
		Tensors: []TensorInfo{{Name: "Тест", DType: F16, Shape: []uint64{4}}},
		Shards: []ShardEntry{
			{Path: ShardFileName(1, 0), Epoch: 1, Rank: 0},
			{Path: ShardFileName(0, 1), Epoch: 0, Rank: 1},
			{Path: ShardFileName(0, 0), Epoch: 0, Rank: 0, Batches: 3, Size: 100, Digest: "sha256:00"},
		},
	}
	if err := WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(filepath.Join(dir, ManifestName))
	got, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Format != ManifestFormat || len(got.Shards) != 3 {
		t.Fatalf("read back %+v", got)
	}
	for i, want := range []string{"epoch-00000/rank-00000.shard", "epoch-00000/rank-00001.shard", "epoch-00001/rank-00000.shard"} {
		if got.Shards[i].Path != want {
			t.Errorf("shard %d = %q, want %q", i, got.Shards[i].Path, want)
		}
	}
	if s := got.Shards[0]; s.Epoch != 0 || s.Rank != 0 || s.Digest != "sha256:00" || s.Batches != 3 {
		t.Errorf("shard (0, 0) = %+v", s)
	}
	if !strings.Contains(string(first), `"name": "Тест"`) || !strings.Contains(string(first), `"dtype": "F16"`) {
		t.Errorf("manifest does not keep names byte-exact or dtype names:\n%s", first)
	}
	// Rewriting the decoded manifest gives the same bytes.
	if err := WriteManifest(dir, got); err != nil {
		t.Fatal(err)
	}
	second, _ := os.ReadFile(filepath.Join(dir, ManifestName))
	if string(first) != string(second) {
		t.Errorf("manifest not byte-identical on rewrite:\n%s\n%s", first, second)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("directory holds %v", ents)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestName), []byte(`{"format":"other"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadManifest(dir); !errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), `format "other", want "prep-manifest/v1"`) {
		t.Errorf("foreign manifest format: %v, want ErrManifest naming both formats", err)
	}
}

func TestFileDigestCoversData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.shard")
	writeShard(t, path, testOpts(3, 2), nil, nil, 4)
	d1, err := FileDigest(path)
	if err != nil {
		t.Fatal(err)
	}
	// Changing one data byte and its batch CRC (a consistent rewrite) must
	// change the digest through the batch table.
	img, _ := os.ReadFile(path)
	r, _ := Open(path)
	l := r.Layout()
	r.Close()
	blk := img[l.Block(1).Offset : l.Block(1).Offset+l.BlockSize]
	blk[0] ^= 1
	bt := l.Regions[5]
	le.PutUint32(img[bt.Offset+BatchEntryLen+bBlockCRC:], crc32c(blk))
	reseal(img)
	os.WriteFile(path, img, 0o644)
	d2, err := FileDigest(path)
	if err != nil {
		t.Fatal(err)
	}
	if d1 == d2 {
		t.Error("digest unchanged after a data change")
	}
}

// TestReadManifestRejectsPathsOutsideSet pins the fault where a hand-edited
// manifest entry such as "../x" or "/etc/x" made prep gc delete, and
// convert --force replace, a file outside the shard set: ReadManifest now
// refuses every entry whose path is not ShardFileName(epoch, rank), while
// ReadManifestUnchecked still decodes it for prep verify to report.
func TestReadManifestRejectsPathsOutsideSet(t *testing.T) {
	good := ShardEntry{Path: ShardFileName(0, 0), Epoch: 0, Rank: 0, Batches: 1, Size: 10, Digest: "sha256:00"}
	for _, tt := range []struct {
		name string
		edit func(*Manifest)
		want string
	}{
		{"parent path", func(m *Manifest) { m.Shards[0].Path = "../canary" }, `path "../canary" is not "epoch-00000/rank-00000.shard"`},
		{"absolute path", func(m *Manifest) { m.Shards[0].Path = "/etc/passwd" }, `path "/etc/passwd" is not`},
		{"unclean path", func(m *Manifest) { m.Shards[0].Path = "epoch-00000/../epoch-00000/rank-00000.shard" }, "is not"},
		{"reserved name", func(m *Manifest) { m.Shards[0].Path = "manifest.json" }, `path "manifest.json" is not`},
		{"path of another rank", func(m *Manifest) { m.Shards[0].Rank = 1 }, `is not "epoch-00000/rank-00001.shard", the name of epoch 0 rank 1`},
		{"negative epoch", func(m *Manifest) { m.Shards[0].Epoch = -1 }, "negative epoch"},
		{"negative size", func(m *Manifest) { m.Shards[0].Size = -1 }, "negative epoch, rank, batch count or size"},
		{"duplicate entry", func(m *Manifest) { m.Shards = append(m.Shards, m.Shards[0]) }, "shards 0 and 1 both have path"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			m := &Manifest{PlanFingerprint: "p", Shards: []ShardEntry{good}}
			tt.edit(m)
			if err := WriteManifest(dir, m); err != nil {
				t.Fatal(err)
			}
			_, err := ReadManifest(dir)
			if !errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ReadManifest error = %v, want ErrManifest containing %q", err, tt.want)
			}
			if !strings.Contains(err.Error(), filepath.Join(dir, ManifestName)) {
				t.Errorf("error %q does not name the manifest", err)
			}
			u, err := ReadManifestUnchecked(dir)
			if err != nil || len(u.Shards) != len(m.Shards) {
				t.Fatalf("ReadManifestUnchecked = %v, %v; want the %d entries decoded", u, err, len(m.Shards))
			}
		})
	}
	dir := t.TempDir()
	if err := WriteManifest(dir, &Manifest{Shards: []ShardEntry{good, {Path: ShardFileName(123456, 7), Epoch: 123456, Rank: 7}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadManifest(dir); err != nil {
		t.Errorf("valid manifest refused: %v", err)
	}
}

// TestTensorNameWithNULRefused pins the fault where a feature spec tensor
// named "a\x00b" was written, verified and loaded, while the C ABI and the
// Python binding (NUL-terminated names) saw it as "a".
func TestTensorNameWithNULRefused(t *testing.T) {
	for _, name := range []string{"a\x00b", "\x00", "ab\x00"} {
		_, err := NewGeometry(4, []TensorInfo{{Name: name, DType: F32}})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "contains a NUL byte") {
			t.Errorf("NewGeometry(name %q) = %v; want ErrInvalid naming the NUL byte", name, err)
		}
	}
	if _, err := NewGeometry(4, []TensorInfo{{Name: "features/emb-Тест.a b", DType: F32}}); err != nil {
		t.Errorf("name with '/', '-', '.', space and Cyrillic refused: %v", err)
	}
}

// TestManifestSpecIntegersExact pins a fault: a manifest's feature spec was
// decoded through float64, so bytes.buckets 2^63-1 (the documented maximum)
// came back as 9223372036854775808 and the spec no longer matched its hash.
// Reading and rewriting a manifest keeps every spec integer exact.
func TestManifestSpecIntegersExact(t *testing.T) {
	dir := t.TempDir()
	spec := `{"tensors":[{"bytes":{"buckets":9223372036854775807,"mode":"hash"},"column":"s","dtype":"I64","name":"h"},{"bytes":{"buckets":9007199254740993,"mode":"hash"},"column":"s","dtype":"I64","name":"g"}]}`
	m := &Manifest{ToolVersion: "v1", PlanFingerprint: "p", SourceFingerprint: "s", SpecHash: "h",
		Spec: json.RawMessage(spec), Tensors: []TensorInfo{{Name: "h", DType: I64}}, Shards: []ShardEntry{}}
	if err := WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(filepath.Join(dir, ManifestName))
	got, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(got.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != spec {
		t.Errorf("spec read back as\n%s\nwant\n%s", b, spec)
	}
	if err := WriteManifest(dir, got); err != nil {
		t.Fatal(err)
	}
	if second, _ := os.ReadFile(filepath.Join(dir, ManifestName)); string(second) != string(first) {
		t.Errorf("manifest not byte-identical on rewrite:\n%s\n%s", first, second)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestName), append(first, `{}`...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadManifest(dir); err == nil || !strings.Contains(err.Error(), "data after the JSON object") {
		t.Errorf("manifest with trailing data: %v", err)
	}
}
