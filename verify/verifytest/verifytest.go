// Package verifytest builds small, real shard sets for tests of verify and
// describe (inspect, export) and their commands, without convert: a synthetic
// source, a real plan and real shards written with shardfmt.
package verifytest

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prepml/prep/internal/testutil"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/verify"
)

// The fixture: a synthetic source of 13 rows in one file with row groups of
// 7 and 6 rows, planned for 2 epochs, global batch 4, world size 2 (b = 2),
// global shuffle, remainder pad: 4 steps per rank, the last global batch
// padded with 3 samples from the epoch start.
//
// The source file is a stand-in for Parquet that keeps what verify looks at:
// it ends in a footer ("PAR1" magic, little-endian length) whose hash the
// plan records, and between header and footer it holds one little-endian
// int64 per row, v[id] = 1000 + 3*id. fakeSource (the --deep reader in these
// tests) re-reads those values, so editing one in place is a source change
// that keeps size and footer: only value comparison can catch it.
//
// BuildSize makes the same kind of set at another size (for benchmarks).
// BuildJagged (Size.Jagged) adds two jagged tensors (shard format 2.0),
// see JaggedTensors.

// Fixture constants: the number of source rows of Build, the source file
// name and its fake footer.
const (
	Rows       = 13
	SourceFile = "part-0.parquet"
	footerText = "fake thrift FileMetaData"
)

// Size sets the dimensions of a fixture made by BuildSize.
type Size struct {
	Rows        int  // source rows
	RowGroups   int  // row groups of about equal rows; < 2 means 2
	Dim         int  // elements of tensor x per sample
	GlobalBatch int  // G; world size is 2, so b = G/2
	Jagged      bool // add the jagged tensors h and p (JaggedTensors)
}

// Small is the size Build uses.
var Small = Size{Rows: Rows, Dim: 3, GlobalBatch: 4}

func tensorsOf(dim int, jagged bool) []shardfmt.TensorInfo {
	ts := []shardfmt.TensorInfo{
		{Name: "x", DType: shardfmt.F32, Shape: []uint64{uint64(dim)}},
		{Name: "y", DType: shardfmt.I64, Shape: nil},
	}
	if jagged {
		ts = append(ts,
			shardfmt.TensorInfo{Name: "h", DType: shardfmt.I32, Jagged: true},
			shardfmt.TensorInfo{Name: "p", DType: shardfmt.F32, Shape: []uint64{2}, Jagged: true})
	}
	return ts
}

// Tensors are the fixture's tensors: x F32 [3] (or [Dim]) with
// x[j] = v + j/2, and y I64 scalar with y = -v, where v = SourceValue(id).
var Tensors = tensorsOf(3, false)

// JaggedTensors are the tensors of BuildJagged: Tensors, then h, jagged
// I32 scalars, id%4 values per sample with h[j] = v + j, and p, jagged F32
// values of shape [2], id%3 values per sample with p[j] = [v + j, -j/4]
// (JaggedValues).
var JaggedTensors = tensorsOf(3, true)

// Config is the fixture's plan configuration.
var Config = plan.Config{Seed: 7, Epochs: 2, GlobalBatch: 4, WorldSize: 2, Workers: 2,
	Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad}

// writeSource writes the source file and returns its plan record.
func writeSource(t testing.TB, dir string, rows, groups int) plan.SourceFile {
	t.Helper()
	b := []byte("PAR1")
	for id := 0; id < rows; id++ {
		b = binary.LittleEndian.AppendUint64(b, uint64(1000+3*id))
	}
	footer := binary.LittleEndian.AppendUint32([]byte(footerText), uint32(len(footerText)))
	footer = append(footer, "PAR1"...)
	b = append(b, footer...)
	path := filepath.Join(dir, SourceFile)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(footer)
	groups = max(groups, 2)
	rg := make([]int64, groups)
	for g := range rg {
		rg[g] = int64(((g+1)*rows+groups-1)/groups - (g*rows+groups-1)/groups)
	}
	return plan.SourceFile{Path: SourceFile, Size: int64(len(b)), FooterSHA256: hex.EncodeToString(sum[:]), RowGroups: rg}
}

// SourceValue reads v[id] from the fake source file.
func SourceValue(data []byte, id uint64) int64 {
	return int64(binary.LittleEndian.Uint64(data[4+8*id:]))
}

// FillBlock lays out the tensors of ids as convert would.
func FillBlock(g shardfmt.Geometry, data []byte, ids []uint64, block []byte) {
	for i, id := range ids {
		v := SourceValue(data, id)
		x := block[g.SlabOffset[0]+uint64(i)*g.SampleBytes[0]:]
		for j := 0; j < int(g.SampleBytes[0]/4); j++ {
			binary.LittleEndian.PutUint32(x[4*j:], math.Float32bits(float32(v)+float32(j)/2))
		}
		binary.LittleEndian.PutUint64(block[g.SlabOffset[1]+uint64(i)*g.SampleBytes[1]:], uint64(-v))
	}
}

// JaggedValues returns sample id's values of jagged tensor name ("h" or
// "p", see JaggedTensors) as little-endian bytes, or nil for another name.
func JaggedValues(data []byte, name string, id uint64) []byte {
	v := SourceValue(data, id)
	var b []byte
	switch name {
	case "h":
		for j := range int64(id % 4) {
			b = binary.LittleEndian.AppendUint32(b, uint32(int32(v+j)))
		}
	case "p":
		for j := range int64(id % 3) {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(v+j)))
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(-float32(j)/4))
		}
	}
	return b
}

// JaggedCounts returns the values count of each jagged tensor of ts
// (table order) for the samples ids.
func JaggedCounts(g shardfmt.Geometry, ts []shardfmt.TensorInfo, data []byte, ids []uint64) []uint64 {
	var counts []uint64
	for t, ti := range ts {
		if !ti.Jagged {
			continue
		}
		var n uint64
		for _, id := range ids {
			n += uint64(len(JaggedValues(data, ti.Name, id))) / g.SampleBytes[t]
		}
		counts = append(counts, n)
	}
	return counts
}

// FillJaggedBlock lays out ids in block (zeroed, of the size
// Geometry.BatchLayout gives for JaggedCounts) as convert does: the fixed
// tensors by FillBlock, each jagged tensor's offsets (b+1 int64, the
// unused slots' equal to the values count) at its SlabOffset and its
// values where BatchLayout places them.
func FillJaggedBlock(g shardfmt.Geometry, ts []shardfmt.TensorInfo, data []byte, ids []uint64, block []byte) {
	lay, err := g.BatchLayout(JaggedCounts(g, ts, data, ids))
	if err != nil {
		panic(err)
	}
	FillBlock(g, data, ids, block)
	for t, ti := range ts {
		if !ti.Jagged {
			continue
		}
		var n uint64
		for i := 0; i <= g.BatchSize; i++ {
			binary.LittleEndian.PutUint64(block[g.SlabOffset[t]+8*uint64(i):], n)
			if i < len(ids) {
				v := JaggedValues(data, ti.Name, ids[i])
				copy(block[lay.ValuesOffset[t]+n*g.SampleBytes[t]:], v)
				n += uint64(len(v)) / g.SampleBytes[t]
			}
		}
	}
}

// fakeSource is a verify.SampleSource (and verify.JaggedSource and
// verify.PartSource) over the fake source file.
type fakeSource struct {
	g       shardfmt.Geometry
	tensors []shardfmt.TensorInfo
	data    []byte
	held    []heldTensor // per tensor, the samples of the last Hold
}

// heldTensor is one tensor's bytes of the ids held: sample i is
// data[offs[i]:offs[i+1]].
type heldTensor struct {
	data []byte
	offs []int
}

func (f *fakeSource) FillBlock(_ context.Context, ids []uint64, block []byte) error {
	for _, id := range ids {
		if 4+8*(id+1) > uint64(len(f.data)) {
			return fmt.Errorf("sample %d beyond the source", id)
		}
	}
	FillBlock(f.g, f.data, ids, block)
	return nil
}

// JaggedValues returns each sample's values of jagged tensor t
// (verify.JaggedSource).
func (f *fakeSource) JaggedValues(_ context.Context, t int, ids []uint64) ([][]byte, error) {
	out := make([][]byte, len(ids))
	for i, id := range ids {
		if 4+8*(id+1) > uint64(len(f.data)) {
			return nil, fmt.Errorf("sample %d beyond the source", id)
		}
		out[i] = JaggedValues(f.data, f.tensors[t].Name, id)
	}
	return out, nil
}

// Hold materializes ids (verify.PartSource): every tensor's bytes of
// each, as FillBlock and JaggedValues give them.
func (f *fakeSource) Hold(_ context.Context, ids []uint64) error {
	for _, id := range ids {
		if 4+8*(id+1) > uint64(len(f.data)) {
			return fmt.Errorf("sample %d beyond the source", id)
		}
	}
	f.held = f.held[:0]
	for t := range f.tensors {
		offs := []int{0}
		var b []byte
		for _, id := range ids {
			b = append(b, SampleBytes(f.g, f.tensors, f.data, t, id)...)
			offs = append(offs, len(b))
		}
		f.held = append(f.held, heldTensor{b, offs})
	}
	return nil
}

// Held returns tensor t's bytes of the i-th id of the last Hold
// (verify.PartSource).
func (f *fakeSource) Held(t, i int) []byte {
	h := f.held[t]
	return h.data[h.offs[i]:h.offs[i+1]]
}

func (f *fakeSource) Close() error { return nil }

// SampleBytes returns sample id's bytes of tensor t of ts, little-endian:
// x and y as FillBlock lays them out, a jagged tensor's values as
// JaggedValues gives them.
func SampleBytes(g shardfmt.Geometry, ts []shardfmt.TensorInfo, data []byte, t int, id uint64) []byte {
	if ts[t].Jagged {
		return JaggedValues(data, ts[t].Name, id)
	}
	v := SourceValue(data, id)
	b := make([]byte, g.SampleBytes[t])
	switch ts[t].Name {
	case "x":
		for j := 0; j < len(b)/4; j++ {
			binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(float32(v)+float32(j)/2))
		}
	case "y":
		binary.LittleEndian.PutUint64(b, uint64(-v))
	}
	return b
}

// OpenSource is a verify.SourceOpener over the fake source file.
func OpenSource(p *plan.Plan, _ *shardfmt.Manifest, root string, g shardfmt.Geometry, ts []shardfmt.TensorInfo) (verify.SampleSource, error) {
	data, err := os.ReadFile(filepath.Join(root, p.Source.Files[0].Path))
	if err != nil {
		return nil, err
	}
	return &fakeSource{g: g, tensors: ts, data: data}, nil
}

// Fixture is a built shard set: Dir holds plan.json, the shards and
// manifest.json; SrcDir holds the source file.
type Fixture struct {
	Dir, SrcDir string
	Plan        *plan.Plan
	Man         *shardfmt.Manifest
}

// Build writes the source, the plan (OUT/plan.json), one shard per
// (epoch, rank) and the manifest, the way convert lays them out.
func Build(t testing.TB) *Fixture {
	t.Helper()
	return BuildSize(t, Small)
}

// BuildJagged is Build with JaggedTensors (shard format 2.0).
func BuildJagged(t testing.TB) *Fixture {
	t.Helper()
	size := Small
	size.Jagged = true
	return BuildSize(t, size)
}

// BuildSize is Build with the given dimensions.
func BuildSize(t testing.TB, size Size) *Fixture {
	t.Helper()
	root := t.TempDir()
	f := &Fixture{Dir: filepath.Join(root, "out"), SrcDir: filepath.Join(root, "src")}
	for _, d := range []string{f.Dir, f.SrcDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sf := writeSource(t, f.SrcDir, size.Rows, size.RowGroups)
	cfg := Config
	cfg.GlobalBatch = size.GlobalBatch
	tensors := tensorsOf(size.Dim, size.Jagged)
	p, err := plan.New(plan.Source{Root: f.SrcDir, Files: []plan.SourceFile{sf}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Save(filepath.Join(f.Dir, verify.PlanFileName)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(f.SrcDir, SourceFile))
	if err != nil {
		t.Fatal(err)
	}
	set := testutil.ShardSet{Epochs: p.Config.Epochs, Ranks: p.Config.WorldSize, Steps: p.Steps(),
		BatchSize: p.BatchSize(), Tensors: tensors,
		Provenance: shardfmt.Provenance{PlanFingerprint: p.Fingerprint, SourceFingerprint: p.Source.Fingerprint(), SpecHash: "sha256:spec",
			WorldSize: uint32(p.Config.WorldSize), Workers: uint32(p.Config.Workers), ToolVersion: "test"},
		Manifest: shardfmt.Manifest{Format: "prep-manifest/v1", ToolVersion: "test", PlanFingerprint: p.Fingerprint,
			SourceFingerprint: p.Source.Fingerprint(), SpecHash: "sha256:spec"},
		Batch: func(e, r, k int) ([]uint64, int, error) { return p.RankBatch(e, r, k, nil) },
		Fill:  func(g shardfmt.Geometry, ids []uint64, block []byte) { FillBlock(g, data, ids, block) },
	}
	if size.Jagged {
		g, err := shardfmt.NewGeometry(p.BatchSize(), tensors)
		if err != nil {
			t.Fatal(err)
		}
		set.Values = func(_, _, _ int, ids []uint64) []uint64 { return JaggedCounts(g, tensors, data, ids) }
		set.Fill = func(g shardfmt.Geometry, ids []uint64, block []byte) { FillJaggedBlock(g, tensors, data, ids, block) }
	}
	m, err := testutil.WriteShardSet(f.Dir, set)
	if err != nil {
		t.Fatal(err)
	}
	f.Plan, f.Man = p, m
	return f
}

// ShardPath returns the file path of manifest shard i.
func (f *Fixture) ShardPath(i int) string {
	return filepath.Join(f.Dir, filepath.FromSlash(f.Man.Shards[i].Path))
}

// RewriteShard rewrites manifest shard i of f as a well-formed shard with
// valid checksums, edit giving each batch's block, sample ids and pad
// count from the stored ones (the block a copy edit may change in place
// or replace), and records the new size and digest in the manifest: only
// a comparison with the plan or the source can tell.
func (f *Fixture) RewriteShard(t testing.TB, i int, edit func(k int, block []byte, ids []uint64, pads int) ([]byte, []uint64, int)) {
	t.Helper()
	RewriteShard(t, f.Dir, f.Man, i, edit)
}

// RewriteShard is Fixture.RewriteShard for manifest m of the shard set in
// dir (m is updated and written back).
func RewriteShard(t testing.TB, dir string, m *shardfmt.Manifest, i int, edit func(k int, block []byte, ids []uint64, pads int) ([]byte, []uint64, int)) {
	t.Helper()
	path := filepath.Join(dir, filepath.FromSlash(m.Shards[i].Path))
	r, err := shardfmt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	opts := shardfmt.WriterOptions{BatchSize: r.Geometry().BatchSize, NumBatches: r.NumBatches(), Tensors: r.Tensors(), Provenance: r.Provenance()}
	type batch struct {
		block []byte
		ids   []uint64
		pads  int
	}
	var bs []batch
	for k := range r.NumBatches() {
		bi, _ := r.Batch(k)
		blk, err := r.Block(k)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := r.SampleIDs(k)
		if err != nil {
			t.Fatal(err)
		}
		b, ids, pads := edit(k, slices.Clone(blk), slices.Clone(ids), bi.Pads)
		bs = append(bs, batch{b, ids, pads})
	}
	r.Close()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	w, err := shardfmt.Create(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if err := w.WriteBatch(b.block, b.ids, b.pads); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	d, err := shardfmt.FileDigest(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	m.Shards[i].Digest, m.Shards[i].Size = d, st.Size()
	if err := shardfmt.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
}

// BlockOffset returns the file offset of batch k's block in the shard at
// path (from its batch table).
func BlockOffset(t testing.TB, path string, k int) int64 {
	t.Helper()
	r, err := shardfmt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	bi, err := r.Batch(k)
	if err != nil {
		t.Fatal(err)
	}
	return int64(bi.Offset)
}

// FlipByte flips bit 6 (0x40) of the byte at offset off of the file at
// path, in place: a corruption that keeps the file's size.
func FlipByte(t testing.TB, path string, off int64) {
	t.Helper()
	fh, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var b [1]byte
	if _, err := fh.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := fh.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}
