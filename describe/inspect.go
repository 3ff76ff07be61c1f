package describe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/shardset"
)

// Kinds of path Inspect understands.
const (
	InspectShard    = "shard"     // one shard file
	InspectShardSet = "shard_set" // a directory holding manifest.json
	InspectPlan     = "plan"      // a plan file (prep-plan/v1 JSON)
)

// ErrUnknownKind is returned by Inspect when PATH is neither a shard, a shard
// set directory nor a plan file.
var ErrUnknownKind = errors.New("not a shard, shard set or plan")

// Inspection is what `prep inspect` shows: exactly one of Shard, Set and
// Plan is set, as Kind says.
type Inspection struct {
	Kind  string     `json:"kind"`
	Shard *ShardView `json:"shard,omitempty"`
	Set   *SetView   `json:"set,omitempty"`
	Plan  *PlanView  `json:"plan,omitempty"`
	// Parquet is a Parquet file's columns (Kind InspectParquet).
	Parquet *ParquetView `json:"parquet,omitempty"`
}

// ShardView is the structure of one shard file.
type ShardView struct {
	Path        string              `json:"path"`
	Size        int64               `json:"size"`         // bytes
	ShardFormat string              `json:"shard_format"` // "major.minor" of the header: "1.0", or "2.0" with a jagged tensor
	Provenance  shardfmt.Provenance `json:"provenance"`
	BatchSize   int                 `json:"batch_size"` // sample slots per batch (b)
	BlockSize   uint64              `json:"block_size"` // bytes per batch block
	NumBatches  int                 `json:"num_batches"`
	Regions     []shardfmt.Region   `json:"regions"` // file layout in offset order, no gaps
	Tensors     []TensorView        `json:"tensors"`
	Batches     []BatchView         `json:"batches"`
}

// TensorView is one tensor table entry and its slab inside a block.
type TensorView struct {
	Name        string   `json:"name"`
	DType       string   `json:"dtype"`
	Shape       []uint64 `json:"shape"`        // per sample
	SampleBytes uint64   `json:"sample_bytes"` // bytes per sample
	SlabOffset  uint64   `json:"slab_offset"`  // within a block
	SlabSize    uint64   `json:"slab_size"`    // bytes of the [b, shape...] slab
	// Jagged marks a jagged tensor (format 2.0): Shape and SampleBytes are
	// then those of one value, and the slab at SlabOffset is the offsets
	// slab, (b+1) int64 (SlabSize bytes).
	Jagged bool `json:"jagged,omitempty"`
}

// BatchView is one batch table entry.
type BatchView struct {
	Index    int    `json:"index"`
	Offset   uint64 `json:"offset"` // file offset of the block
	Size     uint64 `json:"size"`   // bytes of the block (every block alike in format 1.0)
	Count    int    `json:"count"`  // present samples, pads included
	Pads     int    `json:"pads"`   // trailing pad samples
	CRC      string `json:"crc32c"` // stored CRC-32C, 8 hex digits
	FirstID  uint64 `json:"first_id"`
	LastID   uint64 `json:"last_id"`
	IDsError string `json:"ids_error,omitempty"`
}

// SetView is a shard set: its manifest and an epochs x ranks table.
type SetView struct {
	Dir               string                `json:"dir"`
	Format            string                `json:"format"`
	ShardFormat       string                `json:"shard_format,omitempty"` // the manifest's shard_format ("2.0" for a set with jagged tensors); "" when it records none (format 1.0)
	ToolVersion       string                `json:"tool_version"`
	PlanFingerprint   string                `json:"plan_fingerprint"`
	SourceFingerprint string                `json:"source_fingerprint"`
	SpecHash          string                `json:"spec_hash"`
	Tensors           []shardfmt.TensorInfo `json:"tensors"`
	Epochs            []int                 `json:"epochs"`          // row labels, ascending
	Ranks             []int                 `json:"ranks"`           // column labels, ascending
	Cells             [][]SetCell           `json:"cells"`           // [len(Epochs)][len(Ranks)]
	TotalBytes        int64                 `json:"total_bytes"`     // sum of listed sizes
	Extra             []string              `json:"extra,omitempty"` // files not in the manifest
}

// SetCell is one (epoch, rank) of a shard set. Status is "ok" (present, the
// listed size, header and tables valid), "absent" (not listed), "missing"
// (listed, no file), "size_mismatch" (listed, other size; not opened) or
// "invalid" (header or tables fail validation). Batch checksums are not
// read: that is verify's job.
type SetCell struct {
	Path    string `json:"path,omitempty"`
	Size    int64  `json:"size"`
	Batches int    `json:"batches"`
	Status  string `json:"status"`
	Detail  string `json:"detail,omitempty"`
}

// Damaged returns one line per shard the manifest lists that is not
// "ok" ("epoch E rank R: STATUS"), in epoch then rank order; nil when every
// listed shard is ok.
func (s *SetView) Damaged() []string {
	var out []string
	for i, e := range s.Epochs {
		for j, c := range s.Cells[i] {
			if c.Status != "ok" && c.Status != "absent" {
				out = append(out, fmt.Sprintf("epoch %d rank %d: %s", e, s.Ranks[j], c.Status))
			}
		}
	}
	return out
}

// PlanView summarizes a plan: its inputs and derived counts.
type PlanView struct {
	Path        string      `json:"path"`
	Fingerprint string      `json:"fingerprint"`
	SourceRoot  string      `json:"source_root"`
	SourceFP    string      `json:"source_fingerprint"`
	Files       int         `json:"files"`
	RowGroups   int         `json:"row_groups"`
	Samples     uint64      `json:"samples"` // N
	Config      plan.Config `json:"config"`
	BatchSize   int         `json:"batch_size"` // per rank, G / R
	Steps       int         `json:"steps"`      // per rank per epoch
	// Mixture is the plan's mixture (plan.Mixture, its selections left
	// out); nil for a plan of one source. Samples above is then the
	// sample id space (every row of every source's files), not the
	// samples of an epoch, which is Mixture.EpochSamples.
	Mixture *MixtureView `json:"mixture,omitempty"`
	// Packed tells a plan that packs token lists (PLAN.md §12): its
	// samples are packed rows, and a mixture's EpochSamples counts the
	// documents drawn.
	Packed bool `json:"packed,omitempty"`
}

// MixtureView is what inspect shows of a plan's mixture (PLAN.md §11).
type MixtureView struct {
	EpochSamples uint64          `json:"epoch_samples"`
	Sources      []MixSourceView `json:"sources"`
}

// MixSourceView is one source of a mixture: its name, weight ("" when it
// weighs its rows), filter ("" for none), rows (selected rows with a
// filter) and samples drawn per epoch.
type MixSourceView struct {
	Name            string `json:"name"`
	Weight          string `json:"weight,omitempty"`
	Filter          string `json:"filter,omitempty"`
	Files           int    `json:"files"`
	Rows            uint64 `json:"rows"`
	SamplesPerEpoch uint64 `json:"samples_per_epoch"`
}

// Inspect describes PATH: a shard set directory (manifest.json inside), a
// shard file, or a plan file. It reads only headers, tables and the
// manifest, never batch data.
func Inspect(path string) (*Inspection, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		v, err := inspectSet(path)
		if err != nil {
			return nil, err
		}
		return &Inspection{Kind: InspectShardSet, Set: v}, nil
	}
	if filepath.Base(path) == shardfmt.ManifestName {
		v, err := inspectSet(filepath.Dir(path))
		if err != nil {
			return nil, err
		}
		return &Inspection{Kind: InspectShardSet, Set: v}, nil
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s: not a regular file (%s)", ErrUnknownKind, path, st.Mode().Type())
	}
	head := readHead(path, 64)
	if !bytes.HasPrefix(head, []byte("PAR1")) && strings.EqualFold(filepath.Ext(path), ".parquet") {
		if st.Size() == 0 {
			return nil, fmt.Errorf("%s: an empty file (0 bytes), not a Parquet file: its write was cut short or never made", path)
		}
		return nil, fmt.Errorf("%s: a truncated or corrupt Parquet file: its %d bytes do not start with the magic PAR1", path, st.Size())
	}
	if bytes.HasPrefix(head, []byte("PAR1")) {
		v, err := inspectParquet(path)
		if err != nil {
			return nil, err
		}
		return &Inspection{Kind: InspectParquet, Parquet: v}, nil
	}
	if bytes.HasPrefix(bytes.TrimLeft(head, " \t\r\n"), []byte("{")) { // a plan file
		p, err := plan.Load(path)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrUnknownKind, path, err)
		}
		return &Inspection{Kind: InspectPlan, Plan: planView(path, p)}, nil
	}
	if !bytes.HasPrefix(head, []byte(shardfmt.Magic)) {
		return nil, notAShard(path, head)
	}
	v, err := inspectShard(path)
	if err != nil {
		return nil, err
	}
	return &Inspection{Kind: InspectShard, Shard: v}, nil
}

// notAShard is Inspect's error for a file that is none of the kinds it
// reads (it starts with neither a shard's magic, PAR1 nor a plan's '{'):
// it names the file's kind where its extension says it (a CSV, TSV, JSON
// lines or text file) and what prep reads instead.
func notAShard(path string, head []byte) error {
	kind := ""
	switch strings.ToLower(filepath.Ext(path)) {
	case ".csv":
		kind = "a CSV file"
	case ".tsv":
		kind = "a TSV file"
	case ".jsonl", ".ndjson":
		kind = "a JSON lines file"
	case ".txt":
		kind = "a text file"
	}
	if kind != "" {
		return fmt.Errorf("%w: %s is %s; inspect reads shards, shard sets, plans and Parquet files (convert it to Parquet first to plan from it)", ErrUnknownKind, path, kind)
	}
	return fmt.Errorf("%w: %s starts with %q, neither a shard's magic, PAR1 (Parquet) nor a plan's JSON", ErrUnknownKind, path, head[:min(len(head), 8)])
}

// readHead returns up to the first n bytes of the file at path (none if it
// cannot be read: the reader chosen after it reports the error).
func readHead(path string, n int) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	b := make([]byte, n)
	m, _ := io.ReadFull(f, b)
	return b[:m]
}

func planView(path string, p *plan.Plan) *PlanView {
	v := &PlanView{Path: path, Fingerprint: p.Fingerprint, SourceRoot: p.Source.Root, SourceFP: p.Source.Fingerprint(),
		Files: len(p.Source.Files), Samples: p.NumSamples(), Config: p.Config, BatchSize: p.BatchSize(), Steps: p.Steps()}
	for _, f := range p.Source.Files {
		v.RowGroups += len(f.RowGroups)
	}
	v.Packed = p.Packing != nil
	if m := p.Mixture; m != nil {
		v.Mixture = &MixtureView{EpochSamples: m.EpochSamples}
		for _, s := range m.Sources {
			v.Mixture.Sources = append(v.Mixture.Sources, MixSourceView{Name: s.Name, Weight: s.Weight, Filter: s.Filter,
				Files: len(s.Files), Rows: s.Rows, SamplesPerEpoch: s.SamplesPerEpoch})
		}
	}
	return v
}

// inspectShard describes the shard file at path. It is read with pread,
// never mapped, so a shard cut short while it is inspected is an error
// (shardfmt.ErrSize), not a memory fault.
func inspectShard(path string) (*ShardView, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s: not a regular file (%s)", ErrUnknownKind, path, st.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening shard: %w", err)
	}
	r, err := shardfmt.OpenFile(f, path, false)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	g := r.Geometry()
	major, minor := r.Version()
	v := &ShardView{Path: path, Size: st.Size(), ShardFormat: fmt.Sprintf("%d.%d", major, minor), Provenance: r.Provenance(), BatchSize: g.BatchSize,
		BlockSize: g.BlockSize, NumBatches: r.NumBatches(), Regions: r.Layout().Regions}
	for t, ti := range r.Tensors() {
		v.Tensors = append(v.Tensors, TensorView{Name: ti.Name, DType: ti.DType.String(), Shape: ti.Shape,
			SampleBytes: g.SampleBytes[t], SlabOffset: g.SlabOffset[t], SlabSize: g.SlabSize[t], Jagged: ti.Jagged})
	}
	for k := 0; k < v.NumBatches; k++ {
		bi, err := r.Batch(k)
		if err != nil {
			return nil, err
		}
		bv := BatchView{Index: k, Offset: bi.Offset, Size: bi.Size, Count: bi.Count, Pads: bi.Pads, CRC: fmt.Sprintf("%08x", bi.CRC)}
		if ids, err := r.SampleIDs(k); err != nil {
			bv.IDsError = err.Error()
		} else if len(ids) > 0 {
			bv.FirstID, bv.LastID = ids[0], ids[len(ids)-1]
		}
		v.Batches = append(v.Batches, bv)
	}
	return v, nil
}

// inspectSet summarizes the set in dir. Every name is reached through
// shardset (no symbolic link inside the set followed): a linked shard shows
// as invalid and is not opened.
func inspectSet(dir string) (*SetView, error) {
	set, err := shardset.OpenDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnknownKind, dir, err)
	}
	defer set.Close()
	m, err := set.ReadManifest()
	if errors.Is(err, shardfmt.ErrManifest) {
		return nil, fmt.Errorf("%s: %w (run prep verify for every finding)", dir, err)
	}
	if errors.Is(err, fs.ErrNotExist) && uncommitted(set) {
		return nil, fmt.Errorf("%s: an uncommitted shard set: %s is missing, the set was never committed (a convert was killed, or is running, before its first shard was committed; rerun the convert, or remove its leftovers with prep gc)", dir, shardfmt.ManifestName)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnknownKind, dir, err)
	}
	v := &SetView{Dir: dir, Format: m.Format, ToolVersion: m.ToolVersion, PlanFingerprint: m.PlanFingerprint,
		SourceFingerprint: m.SourceFingerprint, SpecHash: m.SpecHash, Tensors: m.Tensors, ShardFormat: m.ShardFormat}
	epochs, ranks := map[int]bool{}, map[int]bool{}
	for _, s := range m.Shards {
		epochs[s.Epoch], ranks[s.Rank] = true, true
		v.TotalBytes += s.Size
	}
	v.Epochs, v.Ranks = sortedKeys(epochs), sortedKeys(ranks)
	for range v.Epochs {
		row := make([]SetCell, len(v.Ranks))
		for j := range row {
			row[j].Status = "absent"
		}
		v.Cells = append(v.Cells, row)
	}
	ei, ri := index(v.Epochs), index(v.Ranks)
	listed := map[string]bool{shardfmt.ManifestName: true, shardset.PlanName: true}
	for _, s := range m.Shards {
		listed[s.Path] = true
		c := &v.Cells[ei[s.Epoch]][ri[s.Rank]]
		*c = SetCell{Path: s.Path, Size: s.Size, Batches: s.Batches, Status: "ok"}
		path := set.Path(s.Path)
		st, err := set.CheckName(s.Path)
		switch {
		case errors.Is(err, shardset.ErrUnsafe):
			c.Status, c.Detail = "invalid", err.Error()
		case err != nil:
			c.Status, c.Detail = "missing", err.Error()
		case !st.Mode().IsRegular():
			c.Status, c.Detail = "invalid", fmt.Sprintf("not a regular file (%s)", st.Mode().Type())
		case st.Size() != s.Size:
			c.Status, c.Detail = "size_mismatch", fmt.Sprintf("expected size %d, actual size %d", s.Size, st.Size())
		default:
			r, err := openInSet(set, s.Path, path)
			if err != nil {
				c.Status, c.Detail = "invalid", err.Error()
				break
			}
			// A renamed or swapped shard opens cleanly but holds another
			// (epoch, rank) than its manifest entry.
			if p := r.Provenance(); int64(p.Epoch) != int64(s.Epoch) || int64(p.Rank) != int64(s.Rank) {
				c.Status, c.Detail = "invalid", fmt.Sprintf("shard holds epoch %d rank %d (renamed or swapped file)", p.Epoch, p.Rank)
			} else if r.NumBatches() != s.Batches {
				c.Status, c.Detail = "invalid", fmt.Sprintf("shard has %d batches, manifest %d", r.NumBatches(), s.Batches)
			}
			r.Close()
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !e.IsDir() && !listed[e.Name()] {
			v.Extra = append(v.Extra, e.Name())
		}
	}
	return v, nil
}

// uncommitted reports whether set's directory, which has no manifest,
// holds what a convert leaves before its first commit: the plan copy, a
// lock, staging, a temporary file or a shard file.
func uncommitted(set *shardset.Set) bool {
	if _, err := set.CheckName(shardset.PlanName); err == nil {
		return true
	}
	for _, st := range set.Strays(nil) {
		switch st.Kind {
		case shardset.StrayShard, shardset.StrayTemp, shardset.StrayStaging, shardset.StrayLock:
			return true
		}
	}
	return false
}

// openInSet opens the shard name of set (no link followed) for reading its
// header and tables with pread; path names it in errors.
func openInSet(set *shardset.Set, name, path string) (*shardfmt.Reader, error) {
	f, err := set.OpenFile(name)
	if err != nil {
		return nil, err
	}
	return shardfmt.OpenFile(f, path, false)
}

func sortedKeys(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

func index(xs []int) map[int]int {
	m := make(map[int]int, len(xs))
	for i, x := range xs {
		m[x] = i
	}
	return m
}
