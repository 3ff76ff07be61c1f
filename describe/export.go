package describe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/prepml/prep/internal/npy"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/shardset"
)

// Names of the extra files Export writes beside the tensors.
const (
	SampleIDsFile = "sample_ids.npy" // <i8 [count]: global sample id of each present sample
	PadMaskFile   = "pad_mask.npy"   // |b1 [count]: true for pad samples (the last Pads of them)
	// SampleSourcesFile is written for a plan with a mixture: <i4 [count],
	// each sample's source as an index into ExportResult.Sources (-1 for a
	// packed row of scope across, which may hold several sources'
	// documents: see DocumentsSourcesFile).
	SampleSourcesFile = "sample_sources.npy"
)

// ErrNotShardSet is returned by Export when the directory does not exist
// or is not a directory.
var ErrNotShardSet = errors.New("not a shard set directory")

// ErrNoShard is returned by Export when the shard set has no shard for the
// requested (epoch, rank) or the shard has no such step.
var ErrNoShard = errors.New("no such shard or step")

// ExportOptions selects the batch Export writes.
type ExportOptions struct {
	Dir    string // shard set directory
	Epoch  int
	Rank   int
	Step   int    // batch index within the (epoch, rank) shard
	OutDir string // created if missing; existing files of the same names are replaced
	// Pieces, for a packed shard set (PLAN.md §12), returns the
	// documents of each packed row id in order; Export then writes
	// documents.npy and documents_offsets.npy (see exportPieces). nil:
	// not packed.
	Pieces func(ids []uint64) ([][]plan.Piece, error)
}

// OffsetsSuffix is appended to a jagged tensor's name for the file of its
// offsets: tensor "h" gives h.npy (values) and h_offsets.npy.
const OffsetsSuffix = "_offsets"

// ExportedFile is one .npy file written by Export.
type ExportedFile struct {
	File   string `json:"file"`             // path written
	Tensor string `json:"tensor,omitempty"` // tensor name; "" for sample_ids and pad_mask
	// Part is "values" or "offsets" for the two files of a jagged tensor,
	// "" otherwise.
	Part  string `json:"part,omitempty"`
	DType string `json:"dtype,omitempty"` // shard dtype name (I64 for offsets)
	Descr string `json:"descr"`           // NumPy descr written
	// Shape is [count, per-sample shape...] for a fixed-shape tensor,
	// [N, per-value shape...] for a jagged tensor's values (N = the
	// batch's values count) and [count+1] for its offsets.
	Shape []int `json:"shape"`
}

// ExportResult describes what Export wrote.
type ExportResult struct {
	Shard string         `json:"shard"` // shard file read
	Epoch int            `json:"epoch"`
	Rank  int            `json:"rank"`
	Step  int            `json:"step"`
	Count int            `json:"count"` // present samples, pads included
	Pads  int            `json:"pads"`  // trailing pad samples among count
	Files []ExportedFile `json:"files"`
	// Rows lists, for a packed shard set, the documents of each present
	// packed row (ExportOptions.Pieces); absent otherwise.
	Rows []PackedRow `json:"rows,omitempty"`
	// Sources names the plan's mixture sources in order (the values of
	// sample_sources.npy index it); absent for a plan without a mixture.
	Sources []string `json:"sources,omitempty"`
}

// Export writes batch Step of the (Epoch, Rank) shard as NumPy files: one
// <tensor>.npy per tensor with shape [count, shape...] holding exactly the
// bytes the trainer receives (BF16 as '<u2' and FP8 as '|u1' raw bits, see
// npy.Descr), plus sample_ids.npy and pad_mask.npy. count is the number of
// present samples, pad samples included (pad_mask flags them); unused slots
// of a short batch are not written. The batch checksum is verified first;
// a corrupt batch is an error (a *shardfmt.FormatError wrapping
// shardfmt.ErrChecksum, or ErrCorrupt for bad offsets), not exported.
//
// A jagged tensor (shard format 2.0) gives two files: <tensor>.npy, its
// values, shape [N, per-value shape...] in its dtype, the values of the
// count samples one after another (N = offsets[count]); and
// <tensor>_offsets.npy, '<i8' [count+1]: sample i's values are rows
// [offsets[i], offsets[i+1]) of the values, offsets[0] = 0. The offsets of
// unused slots (all equal to N) are not written, as the unused slots of a
// fixed-shape tensor are not.
//
// Tensor names are used as file names with '/', '\\' and NUL replaced by
// '_'; a clash between names (a jagged tensor's offsets file included) is
// an error found before any file is written. A shard whose header names
// another (epoch, rank) than requested (renamed or swapped) is an error
// wrapping shardfmt.ErrProvenance.
func Export(opts ExportOptions) (*ExportResult, error) {
	set, err := shardset.OpenDir(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrNotShardSet, opts.Dir)
	}
	defer set.Close()
	r, err := exportShard(set, opts.Epoch, opts.Rank)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	path := r.Path()
	// A shard renamed or swapped with another rank's holds other samples:
	// its header, not its file name, says which (epoch, rank) it is.
	if opts.Epoch < 0 || opts.Rank < 0 || opts.Epoch > 1<<32-1 || opts.Rank > 1<<32-1 {
		return nil, fmt.Errorf("%w: epoch %d rank %d", ErrNoShard, opts.Epoch, opts.Rank)
	}
	if err := r.CheckProvenance(shardfmt.Provenance{Epoch: uint32(opts.Epoch), Rank: uint32(opts.Rank)}); err != nil {
		return nil, err
	}
	if opts.Step < 0 || opts.Step >= r.NumBatches() {
		return nil, fmt.Errorf("%w: step %d of %s (it has %d steps)", ErrNoShard, opts.Step, path, r.NumBatches())
	}
	k := opts.Step
	bi, err := r.Batch(k)
	if err != nil {
		return nil, err
	}
	if err := r.VerifyBatch(k); err != nil {
		return nil, err
	}
	block, err := r.Block(k)
	if err != nil {
		return nil, err
	}
	ids, err := r.SampleIDs(k)
	if err != nil {
		return nil, err
	}
	// Every file name is settled before the first file is written, so a
	// clash leaves nothing half-exported.
	used := map[string]string{SampleIDsFile: "sample ids", PadMaskFile: "pad mask", SampleSourcesFile: "sample sources"}
	var pieces [][]plan.Piece
	if opts.Pieces != nil {
		used[DocumentsFile], used[DocumentsOffsetsFile], used[DocumentsSourcesFile] = "documents", "documents offsets", "documents sources"
		if pieces, err = opts.Pieces(ids); err != nil {
			return nil, err
		}
	}
	// A plan with a mixture names each sample's source; the shard set's
	// own plan.json says (a set without one exports without the names).
	var mixPlan *plan.Plan
	if p, err := set.Plan(); err == nil && p.Mixture != nil {
		mixPlan = p
	}
	g := r.Geometry()
	names := make([]string, len(r.Tensors()))
	offNames := make([]string, len(r.Tensors()))
	for t, ti := range r.Tensors() {
		name := fileNameFor(ti.Name)
		if other, dup := used[name]; dup {
			return nil, fmt.Errorf("tensor %q: file name %s already used by %s", ti.Name, name, other)
		}
		used[name] = fmt.Sprintf("tensor %q", ti.Name)
		names[t] = name
	}
	for t, ti := range r.Tensors() {
		if !g.IsJagged(t) {
			continue
		}
		name := fileNameFor(ti.Name + OffsetsSuffix)
		if other, dup := used[name]; dup {
			return nil, fmt.Errorf("tensor %q: file name %s for its offsets already used by %s", ti.Name, name, other)
		}
		used[name] = fmt.Sprintf("tensor %q's offsets", ti.Name)
		offNames[t] = name
	}
	// The offsets are checked (as VerifyBatch did) before anything is
	// written.
	slabs := make([]shardfmt.JaggedSlab, len(r.Tensors()))
	for t := range r.Tensors() {
		if g.IsJagged(t) {
			if slabs[t], err = r.Jagged(k, block, t); err != nil {
				return nil, err
			}
		}
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, err
	}
	res := &ExportResult{Shard: path, Epoch: opts.Epoch, Rank: opts.Rank, Step: k, Count: bi.Count, Pads: bi.Pads}
	for t, ti := range r.Tensors() {
		name := names[t]
		descr, err := npy.Descr(ti.DType)
		if err != nil {
			return nil, err
		}
		rows := bi.Count
		if g.IsJagged(t) {
			rows = int(slabs[t].N)
		}
		shape := []int{rows}
		for _, d := range ti.Shape {
			shape = append(shape, int(d))
		}
		data := g.Slab(block, t, bi.Count)
		part := ""
		if g.IsJagged(t) {
			data, part = slabs[t].Values, "values"
		}
		file := filepath.Join(opts.OutDir, name)
		if err := npy.WriteFile(file, descr, shape, data); err != nil {
			return nil, err
		}
		res.Files = append(res.Files, ExportedFile{File: file, Tensor: ti.Name, Part: part, DType: ti.DType.String(), Descr: descr, Shape: shape})
		if g.IsJagged(t) {
			file := filepath.Join(opts.OutDir, offNames[t])
			shape := []int{bi.Count + 1}
			if err := npy.WriteFile(file, "<i8", shape, slabs[t].Offsets); err != nil {
				return nil, err
			}
			res.Files = append(res.Files, ExportedFile{File: file, Tensor: ti.Name, Part: "offsets", DType: shardfmt.I64.String(), Descr: "<i8", Shape: shape})
		}
	}
	idb := make([]byte, 0, 8*len(ids))
	mask := make([]byte, len(ids))
	for i, id := range ids {
		idb = binary.LittleEndian.AppendUint64(idb, id)
		if i >= len(ids)-bi.Pads {
			mask[i] = 1
		}
	}
	extra := []struct {
		name, descr string
		data        []byte
	}{{SampleIDsFile, "<i8", idb}, {PadMaskFile, "|b1", mask}}
	if mixPlan != nil {
		srcb := make([]byte, 0, 4*len(ids))
		for _, id := range ids {
			srcb = binary.LittleEndian.AppendUint32(srcb, uint32(mixPlan.SourceOf(id)))
		}
		extra = append(extra, struct {
			name, descr string
			data        []byte
		}{SampleSourcesFile, "<i4", srcb})
		for _, ms := range mixPlan.Mixture.Sources {
			res.Sources = append(res.Sources, ms.Name)
		}
	}
	for _, f := range extra {
		file := filepath.Join(opts.OutDir, f.name)
		if err := npy.WriteFile(file, f.descr, []int{len(ids)}, f.data); err != nil {
			return nil, err
		}
		res.Files = append(res.Files, ExportedFile{File: file, Descr: f.descr, Shape: []int{len(ids)}})
	}
	if opts.Pieces != nil {
		if err := exportPieces(opts.OutDir, ids, pieces, mixPlan, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// fileNameFor maps a tensor name to "<name>.npy" (shardfmt.FileStem:
// characters that cannot appear in a file name replaced).
func fileNameFor(name string) string { return shardfmt.FileStem(name) + ".npy" }

// exportShard opens the (epoch, rank) shard through the manifest with every
// check of shardset.Set.Shard (no link followed, size, provenance), or by
// its canonical name when the manifest is unreadable. The shard is read
// with pread, never mapped, so a shard cut short under export is an error.
func exportShard(set *shardset.Set, epoch, rank int) (*shardfmt.Reader, error) {
	if _, err := set.ReadManifest(); err != nil {
		name := shardset.ShardPath(epoch, rank)
		f, ferr := set.OpenFile(name)
		if ferr != nil {
			return nil, fmt.Errorf("reading manifest: %w", err)
		}
		return shardfmt.OpenFile(f, set.Path(name), false)
	}
	r, _, err := set.Shard(epoch, rank, false)
	if errors.Is(err, shardset.ErrNoShard) {
		return nil, fmt.Errorf("%w: %w", ErrNoShard, err)
	}
	return r, err
}
