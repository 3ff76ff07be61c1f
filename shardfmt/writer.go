package shardfmt

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/prepml/prep/internal/atomicfile"
)

// TensorInfo describes one tensor of a shard: its name (UTF-8, stored
// byte-exact), dtype and per-sample shape (rank <= 8, every dimension >= 1;
// an empty shape is a scalar per sample). A batch holds a [b, Shape...] slab
// of it. In JSON the dtype is its name ("F32").
//
// A Jagged tensor has a variable number of values per sample instead: Shape
// is then the shape of one value (empty for scalar values), and a batch
// holds a values slab [N, Shape...] (N values in all, N varying by batch)
// and an offsets slab of b+1 int64 (sample j's values are [off[j],
// off[j+1])); see FORMAT.md, "Jagged tensors". A shard with a jagged tensor
// is written as format 2.0.
type TensorInfo struct {
	Name   string   `json:"name"`
	DType  DType    `json:"dtype"`
	Shape  []uint64 `json:"shape"`
	Jagged bool     `json:"jagged,omitempty"`
}

// TensorList renders ts for messages as "[name dtype shape, ...]", a jagged
// tensor's entry ending in " jagged".
func TensorList(ts []TensorInfo) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, t := range ts {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %v %v", t.Name, t.DType, t.Shape)
		if t.Jagged {
			b.WriteString(" jagged")
		}
	}
	return b.String() + "]"
}

// SameTensors reports whether a and b describe the same tensors in the same
// order: equal names (byte-exact), dtypes, shapes and kinds (fixed or
// jagged), a nil and an empty shape (a scalar) being the same.
func SameTensors(a, b []TensorInfo) bool {
	return slices.EqualFunc(a, b, func(x, y TensorInfo) bool {
		return x.Name == y.Name && x.DType == y.DType && slices.Equal(x.Shape, y.Shape) && x.Jagged == y.Jagged
	})
}

// Provenance ties a shard to the plan and feature spec that made it. It is
// stored as JSON in the shard's metadata section; see CheckProvenance.
type Provenance struct {
	PlanFingerprint   string `json:"plan_fingerprint"`
	SourceFingerprint string `json:"source_fingerprint"`
	SpecHash          string `json:"spec_hash"`
	Epoch             uint32 `json:"epoch"`
	Rank              uint32 `json:"rank"`
	WorldSize         uint32 `json:"world_size"`
	Workers           uint32 `json:"workers"`
	ToolVersion       string `json:"tool_version"`
}

// CheckProvenance returns an error wrapping ErrProvenance naming the first
// field of want that differs from p. Empty strings in want are not compared;
// Epoch and Rank are always compared, WorldSize and Workers when nonzero in
// want. ToolVersion is never compared.
func (p Provenance) CheckProvenance(want Provenance) error {
	cmp := func(field, got, w string) error {
		if w != "" && got != w {
			return fmt.Errorf("%w: %s is %q, want %q", ErrProvenance, field, got, w)
		}
		return nil
	}
	cmpN := func(field string, got, w uint32, always bool) error {
		if (always || w != 0) && got != w {
			return fmt.Errorf("%w: %s is %d, want %d", ErrProvenance, field, got, w)
		}
		return nil
	}
	return errors.Join(
		cmp("plan fingerprint", p.PlanFingerprint, want.PlanFingerprint),
		cmp("source fingerprint", p.SourceFingerprint, want.SourceFingerprint),
		cmp("spec hash", p.SpecHash, want.SpecHash),
		cmpN("epoch", p.Epoch, want.Epoch, true),
		cmpN("rank", p.Rank, want.Rank, true),
		cmpN("world size", p.WorldSize, want.WorldSize, false),
		cmpN("workers", p.Workers, want.Workers, false),
	)
}

// WriterOptions fixes the geometry of a shard before any batch is written.
type WriterOptions struct {
	BatchSize  int          // b: sample slots per batch (the per-rank batch size)
	NumBatches int          // number of batches (steps) the shard will hold, >= 0
	Tensors    []TensorInfo // in table order
	Provenance Provenance
}

// Writer streams batches into a new shard file. Batches are appended in step
// order with WriteBatch; Commit makes the file visible at its final path.
// Until then it lives at "<path>.tmp-<random>" in the same directory, so a
// crash never leaves an incomplete file at the final path. A Writer is not
// safe for concurrent use.
type Writer struct {
	path, tmp string   // path names in errors; with root, both are names inside it
	root      *os.Root // CreateIn: every name is resolved inside it; nil for Create
	f         *os.File
	opts      WriterOptions
	geo       Geometry
	h         header
	prefix    []byte   // header placeholder, tensor table, metadata, zero padding: [0, data_off)
	batches   []byte   // batch table, filled as batches arrive
	ids       []byte   // scratch: one batch's sample ids
	allIDs    []byte   // the whole sample ids section, when it is at most idsBufferMax bytes; nil: written per batch
	idsCRC    uint32   // running CRC-32C of the sample ids section
	next      int      // index of the next batch
	dataEnd   uint64   // file offset where the next block goes
	maxBlock  uint64   // largest block written so far
	values    []uint64 // scratch: a batch's values count per jagged tensor
	kicked    uint64   // file offset up to which writeback has been started
	done      bool
	digest    string // set by Commit
}

// idsBufferMax is the largest sample ids section (8 bytes per sample slot)
// a Writer keeps in memory and writes in one piece at Commit, where it also
// feeds the digest; a larger one is written batch by batch and read back
// once at Commit for the digest (from the page cache it was just written
// to). It is small because it is per Writer: convert runs 2*Jobs Writers at
// once, outside its --memory-limit, and 64 MiB each took a run limited to
// 64 MiB to 245 MB of heap. 1 MiB is 131,072 sample slots. A variable so
// tests can cover both paths.
var idsBufferMax uint64 = 1 << 20

// writebackChunk is how many bytes of batch blocks a Writer lets accumulate
// before it asks the kernel to start writing them to disk (startWriteback):
// Commit's fsync then finds little left to write, so the wait at the end of
// a shard is short instead of the time to write the whole shard. A variable
// so benchmarks can compare.
var writebackChunk uint64 = 8 << 20

// FileSize returns the exact length in bytes of the shard Create would
// write with opts (FORMAT.md: header, tensor table, metadata, padding to a
// block boundary, the blocks, the batch table, the sample ids and the
// footer), for a caller that checks free space before writing. Errors are
// Create's for invalid options; with a jagged tensor the size depends on
// the values written, and FileSize fails with ErrInvalid.
func FileSize(opts WriterOptions) (int64, error) {
	geo, err := NewGeometry(opts.BatchSize, opts.Tensors)
	if err != nil {
		return 0, err
	}
	if geo.HasJagged() {
		return 0, fmt.Errorf("%w: the size of a shard with jagged tensors depends on its values", ErrInvalid)
	}
	if opts.NumBatches < 0 {
		return 0, fmt.Errorf("%w: %d batches", ErrInvalid, opts.NumBatches)
	}
	meta, err := json.Marshal(opts.Provenance)
	if err != nil {
		return 0, fmt.Errorf("encoding metadata: %w", err)
	}
	h, _, err := planLayout(geo, opts, meta)
	if err != nil {
		return 0, err
	}
	return int64(h.fileLen), nil
}

// Create starts a shard at path. It creates path's directory if needed and a
// temporary file beside path; nothing appears at path until Commit. Options
// are validated as by NewGeometry; NumBatches must be >= 0. Errors wrap
// ErrInvalid for bad options, or the OS error.
func Create(path string, opts WriterOptions) (*Writer, error) {
	return create(nil, path, opts)
}

// CreateIn is Create for name (slash-separated) inside root: the directory,
// the temporary file (created exclusively), the rename and the directory
// fsync all resolve names through root, so a symbolic link planted in the
// directory can never make the writer create, replace or remove a file
// outside it. Errors name root's directory joined with name.
func CreateIn(root *os.Root, name string, opts WriterOptions) (*Writer, error) {
	return create(root, filepath.FromSlash(name), opts)
}

func create(root *os.Root, path string, opts WriterOptions) (*Writer, error) {
	shown := path
	if root != nil {
		shown = filepath.Join(root.Name(), path)
	}
	geo, err := NewGeometry(opts.BatchSize, opts.Tensors)
	if err != nil {
		return nil, fmt.Errorf("creating shard %s: %w", shown, err)
	}
	if opts.NumBatches < 0 {
		return nil, fmt.Errorf("creating shard %s: %w: %d batches", shown, ErrInvalid, opts.NumBatches)
	}
	meta, err := json.Marshal(opts.Provenance)
	if err != nil {
		return nil, fmt.Errorf("creating shard %s: encoding metadata: %w", shown, err)
	}
	h, prefix, err := planLayout(geo, opts, meta)
	if err != nil {
		return nil, fmt.Errorf("creating shard %s: %w", shown, err)
	}
	f, tmp, err := createTemp(root, path)
	if err != nil {
		return nil, fmt.Errorf("creating shard %s: %w", shown, err)
	}
	w := &Writer{
		path: path, tmp: tmp, root: root, f: f, opts: opts, geo: geo, h: h, prefix: prefix,
		batches: make([]byte, 0, uint64(opts.NumBatches)*uint64(h.batchEntryLen)),
		ids:     make([]byte, 8*opts.BatchSize),
		dataEnd: h.dataOff,
	}
	for i := range opts.Tensors {
		if geo.IsJagged(i) {
			w.values = append(w.values, 0)
		}
	}
	if h.idsLen <= idsBufferMax {
		w.allIDs = make([]byte, h.idsLen)
	}
	if err := f.Chmod(0o644); err != nil {
		w.abort()
		return nil, fmt.Errorf("creating shard %s: %w", path, err)
	}
	// The header is written last, at Commit; until then its bytes are zero,
	// so a stray temporary file never opens as a shard.
	if _, err := f.WriteAt(prefix[h.headerLen:], int64(h.headerLen)); err != nil {
		w.abort()
		return nil, fmt.Errorf("creating shard %s: %w", path, err)
	}
	if geo.HasJagged() { // format 2: the zero padding after the sample ids
		gap := h.idsOff + h.idsLen
		if _, err := f.WriteAt(make([]byte, h.dataOff-gap), int64(gap)); err != nil {
			w.abort()
			return nil, fmt.Errorf("creating shard %s: %w", path, err)
		}
	}
	return w, nil
}

// planLayout computes the header (without checksums) and the bytes
// [0, data_off): a zero header, the tensor table, the metadata and zero
// padding. With jagged tensors (format 2) it computes the header up to the
// data offset (the sample ids come before the data, the rest is fixed at
// Commit) and the bytes up to the end of the metadata.
func planLayout(geo Geometry, opts WriterOptions, meta []byte) (header, []byte, error) {
	if geo.HasJagged() {
		return planLayoutV2(geo, opts, meta)
	}
	n := uint64(len(opts.Tensors))
	var names uint64
	for _, t := range opts.Tensors {
		names += uint64(len(t.Name))
	}
	h := header{
		major: MajorVersion, minor: MinorVersion,
		headerLen: HeaderLen, tensorEntryLen: TensorEntryLen, batchEntryLen: BatchEntryLen,
		numTensors: uint32(n),
		batchSize:  uint64(opts.BatchSize), numBatches: uint64(opts.NumBatches),
		ttOff:     HeaderLen,
		blockSize: geo.BlockSize,
	}
	h.ttLen, _ = alignUp(n*TensorEntryLen+names, 8)
	h.metaOff = h.ttOff + h.ttLen
	h.metaLen = uint64(len(meta))
	if h.metaLen > MaxMetaLen {
		return header{}, nil, fmt.Errorf("%w: metadata of %d bytes exceeds %d", ErrInvalid, h.metaLen, MaxMetaLen)
	}
	h.dataOff, _ = alignUp(h.metaOff+h.metaLen, BlockAlign)
	data, ok1 := mul64(h.numBatches, h.blockSize)
	bt, ok2 := add64(h.dataOff, data)
	ids, ok3 := mul64(h.numBatches, h.batchSize*8)
	if !ok1 || !ok2 || !ok3 {
		return header{}, nil, fmt.Errorf("%w: shard size overflows u64", ErrInvalid)
	}
	h.btOff = bt
	h.btLen = h.numBatches * BatchEntryLen
	h.idsOff = h.btOff + h.btLen
	h.idsLen = ids
	var ok4, ok5 bool
	h.footerOff, ok4 = add64(h.idsOff, h.idsLen)
	h.fileLen, ok5 = add64(h.footerOff, FooterLen)
	if !ok4 || !ok5 || h.fileLen > 1<<63-1 {
		return header{}, nil, fmt.Errorf("%w: shard size overflows", ErrInvalid)
	}

	prefix := make([]byte, h.dataOff)
	fillTables(&h, prefix, geo, opts, meta)
	return h, prefix, nil
}

// planLayoutV2 is planLayout for a shard with jagged tensors.
func planLayoutV2(geo Geometry, opts WriterOptions, meta []byte) (header, []byte, error) {
	n := uint64(len(opts.Tensors))
	var names uint64
	jagged := uint32(0)
	for i, t := range opts.Tensors {
		names += uint64(len(t.Name))
		if geo.IsJagged(i) {
			jagged++
		}
	}
	h := header{
		major: JaggedMajorVersion, minor: JaggedMinorVersion,
		headerLen: HeaderLen, tensorEntryLen: TensorEntryLen, batchEntryLen: BatchEntryLenV2 + 8*jagged,
		numTensors: uint32(n),
		batchSize:  uint64(opts.BatchSize), numBatches: uint64(opts.NumBatches),
		ttOff:     HeaderLen,
		blockSize: geo.BlockSize,
	}
	h.ttLen, _ = alignUp(n*TensorEntryLen+names, 8)
	h.metaOff = h.ttOff + h.ttLen
	h.metaLen = uint64(len(meta))
	if h.metaLen > MaxMetaLen {
		return header{}, nil, fmt.Errorf("%w: metadata of %d bytes exceeds %d", ErrInvalid, h.metaLen, MaxMetaLen)
	}
	h.idsOff = h.metaOff + h.metaLen
	ids, ok1 := mul64(h.numBatches, h.batchSize*8)
	end, ok2 := add64(h.idsOff, ids)
	if !ok1 || !ok2 || end > 1<<62 {
		return header{}, nil, fmt.Errorf("%w: shard size overflows", ErrInvalid)
	}
	h.idsLen = ids
	h.dataOff, _ = alignUp(end, BlockAlign)
	prefix := make([]byte, h.idsOff)
	fillTables(&h, prefix, geo, opts, meta)
	return h, prefix, nil
}

// fillTables writes the tensor table and the metadata into prefix (which
// holds [0, end of metadata) at least) and records their CRCs in h.
func fillTables(h *header, prefix []byte, geo Geometry, opts WriterOptions, meta []byte) {
	n := uint64(len(opts.Tensors))
	tt := prefix[h.ttOff : h.ttOff+h.ttLen]
	pool := n * TensorEntryLen
	for i, t := range opts.Tensors {
		e := tt[uint64(i)*TensorEntryLen:]
		le.PutUint16(e[tDType:], uint16(t.DType))
		le.PutUint16(e[tRank:], uint16(len(t.Shape)))
		le.PutUint32(e[tNameLen:], uint32(len(t.Name)))
		le.PutUint64(e[tNameOff:], pool)
		for j, d := range t.Shape {
			le.PutUint64(e[tShape+8*j:], d)
		}
		le.PutUint64(e[tSampleBytes:], geo.SampleBytes[i])
		le.PutUint64(e[tSlabOff:], geo.SlabOffset[i])
		le.PutUint64(e[tSlabSize:], geo.SlabSize[i])
		if geo.IsJagged(i) {
			le.PutUint16(e[tKind:], kindJagged)
		}
		copy(tt[pool:], t.Name)
		pool += uint64(len(t.Name))
	}
	copy(prefix[h.metaOff:], meta)
	h.ttCRC = crc32c(tt)
	h.metaCRC = crc32c(prefix[h.metaOff : h.metaOff+h.metaLen])
}

// Geometry returns the block geometry used by this writer.
func (w *Writer) Geometry() Geometry { return w.geo }

// TempPath returns the temporary file name the shard is written under until
// Commit.
func (w *Writer) TempPath() string { return w.tmp }

// WriteBatch appends the next batch. block is exactly Geometry().BlockSize
// bytes holding each tensor's slab at its offset; the caller provides the
// zeros: every byte outside the first len(ids) samples of each slab must be
// zero (the writer checks this and zeroes nothing itself). ids holds the
// global sample id of each present sample (len(ids) = count <= BatchSize);
// the last pads of them are pad samples. Errors wrap ErrInvalid (wrong block
// length, count, pads, nonzero padding, more than NumBatches batches),
// ErrClosed after Commit or Abort, or the OS error. An error does not abort
// the writer; the caller decides (usually Abort).
//
// With jagged tensors, block is exactly Geometry().BatchLayout(values).Size
// bytes, values being the last of each jagged tensor's b+1 offsets, which
// the writer reads from the block: each offsets slab holds 0, then never
// decreasing offsets, the one at len(ids) and every later one equal to the
// tensor's values count (ErrInvalid otherwise), and the values slab holds
// that many values at the offset BatchLayout gives.
func (w *Writer) WriteBatch(block []byte, ids []uint64, pads int) error {
	if w.done {
		return fmt.Errorf("writing batch to %s: %w", w.path, ErrClosed)
	}
	k := w.next
	switch {
	case k >= w.opts.NumBatches:
		return fmt.Errorf("writing batch %d to %s: %w: shard holds %d batches", k, w.path, ErrInvalid, w.opts.NumBatches)
	case !w.geo.HasJagged() && uint64(len(block)) != w.geo.BlockSize:
		return fmt.Errorf("writing batch %d to %s: %w: block of %d bytes, want %d", k, w.path, ErrInvalid, len(block), w.geo.BlockSize)
	case len(ids) > w.geo.BatchSize:
		return fmt.Errorf("writing batch %d to %s: %w: %d samples exceed batch size %d", k, w.path, ErrInvalid, len(ids), w.geo.BatchSize)
	case pads < 0 || pads > len(ids):
		return fmt.Errorf("writing batch %d to %s: %w: %d pads for %d samples", k, w.path, ErrInvalid, pads, len(ids))
	}
	if w.geo.HasJagged() {
		if err := w.checkJagged(block, len(ids)); err != nil {
			return fmt.Errorf("writing batch %d to %s: %w", k, w.path, err)
		}
	}
	if p := w.geo.firstNonZeroPadding(block, len(ids), func(j int) uint64 { return w.values[j] }); p >= 0 {
		return fmt.Errorf("writing batch %d to %s: %w: nonzero padding byte at block offset %d", k, w.path, ErrInvalid, p)
	}
	idb := w.ids
	if w.allIDs != nil {
		idb = w.allIDs[uint64(k)*uint64(len(w.ids)):][:len(w.ids)]
	}
	for j := range w.geo.BatchSize {
		id := UnusedSampleID
		if j < len(ids) {
			id = ids[j]
		}
		le.PutUint64(idb[8*j:], id)
	}
	off := w.dataEnd
	if _, err := w.f.WriteAt(block, int64(off)); err != nil {
		return fmt.Errorf("writing batch %d to %s: %w", k, w.path, err)
	}
	if end := off + uint64(len(block)); end-w.kicked >= writebackChunk {
		startWriteback(w.f, w.kicked, end-w.kicked)
		w.kicked = end
	}
	if w.allIDs == nil {
		idsOff := w.h.idsOff + uint64(k)*uint64(len(w.ids))
		if _, err := w.f.WriteAt(idb, int64(idsOff)); err != nil {
			return fmt.Errorf("writing sample ids of batch %d to %s: %w", k, w.path, err)
		}
	}
	n := len(w.batches)
	w.batches = append(w.batches, make([]byte, w.h.batchEntryLen)...)
	e := w.batches[n:]
	le.PutUint32(e[bCount:], uint32(len(ids)))
	le.PutUint32(e[bPads:], uint32(pads))
	le.PutUint32(e[bBlockCRC:], crc32c(block))
	le.PutUint32(e[bIDsCRC:], crc32c(idb))
	if w.geo.HasJagged() {
		le.PutUint64(e[bBlockOff:], off)
		le.PutUint64(e[bBlockLen:], uint64(len(block)))
		for j, v := range w.values {
			le.PutUint64(e[bValues+8*j:], v)
		}
	}
	w.idsCRC = crc32Update(w.idsCRC, idb)
	w.dataEnd = off + uint64(len(block))
	w.maxBlock = max(w.maxBlock, uint64(len(block)))
	w.next++
	return nil
}

// checkJagged reads a batch's values counts (into w.values) from the
// jagged tensors' offsets slabs in block and checks the block's length and
// the offsets.
func (w *Writer) checkJagged(block []byte, count int) error {
	g := w.geo
	if fixed := g.fixedEnd(); uint64(len(block)) < fixed {
		return fmt.Errorf("%w: block of %d bytes is shorter than its fixed part (%d bytes)", ErrInvalid, len(block), fixed)
	}
	j := 0
	for i, off := range g.SlabOffset {
		if g.IsJagged(i) {
			w.values[j] = le.Uint64(block[off+8*uint64(g.BatchSize):])
			j++
		}
	}
	size, ok := g.placeValues(func(j int) uint64 { return w.values[j] }, nil)
	if !ok || uint64(len(block)) != size {
		return fmt.Errorf("%w: block of %d bytes, want %d for values counts %v", ErrInvalid, len(block), size, w.values)
	}
	for i, off := range g.SlabOffset {
		if g.IsJagged(i) {
			n := le.Uint64(block[off+8*uint64(g.BatchSize):])
			if p, why := badOffsets(block, off, g.BatchSize, count, n); p >= 0 {
				return fmt.Errorf("%w: tensor %q at block offset %d: %s", ErrInvalid, w.opts.Tensors[i].Name, p, why)
			}
		}
	}
	return nil
}

// Commit writes the batch table, footer and header, fsyncs the file, renames
// it to its final path (replacing any file there) and fsyncs the directory.
// It fails with ErrInvalid if fewer than NumBatches batches were written. On
// any error the temporary file is removed. After Commit the Writer is done.
func (w *Writer) Commit() error {
	if w.done {
		return fmt.Errorf("committing %s: %w", w.path, ErrClosed)
	}
	if w.next != w.opts.NumBatches {
		err := fmt.Errorf("committing %s: %w: wrote %d of %d batches", w.path, ErrInvalid, w.next, w.opts.NumBatches)
		w.abort()
		return err
	}
	if err := w.commit(); err != nil {
		w.abort()
		return fmt.Errorf("committing %s: %w", w.path, err)
	}
	w.done = true
	return nil
}

func (w *Writer) commit() error {
	h := &w.h
	if w.geo.HasJagged() {
		// Format 2: the data's end, and so the batch table, the footer and
		// the largest block, are known now.
		if w.next > 0 {
			h.blockSize = w.maxBlock
		}
		h.btOff = w.dataEnd
		h.btLen = uint64(len(w.batches))
		h.footerOff = h.btOff + h.btLen
		h.fileLen = h.footerOff + FooterLen
	}
	h.btCRC = crc32c(w.batches)
	h.idsCRC = w.idsCRC
	if _, err := w.f.WriteAt(w.batches, int64(h.btOff)); err != nil {
		return err
	}
	if w.allIDs != nil {
		if _, err := w.f.WriteAt(w.allIDs, int64(h.idsOff)); err != nil {
			return err
		}
	}
	h.encode(w.prefix[:h.headerLen])
	var foot [FooterLen]byte
	h.encodeFooter(foot[:])
	if _, err := w.f.WriteAt(foot[:], int64(h.footerOff)); err != nil {
		return err
	}
	if _, err := w.f.WriteAt(w.prefix[:h.headerLen], 0); err != nil {
		return err
	}
	// The digest of Reader.Digest, from the bytes just written: the prefix
	// (header included), the batch table, the sample ids and the footer.
	d := sha256.New()
	d.Write(w.prefix)
	writeIDs := func() error {
		if w.allIDs != nil {
			d.Write(w.allIDs)
		} else if _, err := io.Copy(d, io.NewSectionReader(w.f, int64(h.idsOff), int64(h.idsLen))); err != nil {
			return fmt.Errorf("reading back sample ids for the digest: %w", err)
		}
		return nil
	}
	if w.geo.HasJagged() { // format 2: ids, then padding, before the data
		if err := writeIDs(); err != nil {
			return err
		}
		d.Write(make([]byte, h.dataOff-h.idsOff-h.idsLen))
		d.Write(w.batches)
	} else {
		d.Write(w.batches)
		if err := writeIDs(); err != nil {
			return err
		}
	}
	d.Write(foot[:])
	w.digest = "sha256:" + hex.EncodeToString(d.Sum(nil))
	if err := w.f.Sync(); err != nil {
		return err
	}
	if err := w.f.Close(); err != nil {
		return err
	}
	w.f = nil
	if err := w.rename(w.tmp, w.path); err != nil {
		return err
	}
	if err := w.syncDir(); err != nil {
		// The shard is in place under its final name: say so, so that a
		// caller undoing its writes removes it too.
		return fmt.Errorf("%w: %w", ErrNotDurable, err)
	}
	return nil
}

// Digest returns the committed shard's digest, "sha256:<hex>", equal to what
// Reader.Digest and FileDigest compute from the file (every byte except the
// batch blocks, which it covers through their CRC-32Cs in the batch table),
// without reading the file back. It is "" before a successful Commit.
func (w *Writer) Digest() string { return w.digest }

// Size returns the shard's file length in bytes: fixed by WriterOptions, or
// with jagged tensors known only once Commit succeeded (0 before).
func (w *Writer) Size() int64 { return int64(w.h.fileLen) }

// Abort discards the shard: it closes and removes the temporary file. It is
// safe to call more than once and after Commit (then a no-op).
func (w *Writer) Abort() error {
	if w.done {
		return nil
	}
	return w.abort()
}

func (w *Writer) abort() error {
	w.done = true
	var err error
	if w.f != nil {
		err = w.f.Close()
		w.f = nil
	}
	remove := os.Remove
	if w.root != nil {
		remove = w.root.Remove
	}
	if rerr := remove(w.tmp); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}

// createTemp creates path's directory if needed and a new temporary file
// "<base>.tmp-<random>" beside path, through root when it is not nil.
func createTemp(root *os.Root, path string) (*os.File, string, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if root == nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, "", err
		}
		f, err := os.CreateTemp(dir, base+".tmp-*")
		if err != nil {
			return nil, "", err
		}
		return f, f.Name(), nil
	}
	if err := root.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	for range 10000 {
		var rnd [8]byte
		rand.Read(rnd[:])
		tmp := filepath.Join(dir, base+".tmp-"+hex.EncodeToString(rnd[:]))
		f, err := root.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			return f, tmp, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, "", err
		}
	}
	return nil, "", fmt.Errorf("creating a temporary file beside %s: too many name clashes", path)
}

// rename moves the committed temporary file to its final name.
func (w *Writer) rename(from, to string) error {
	if w.root != nil {
		return w.root.Rename(from, to)
	}
	return os.Rename(from, to)
}

// syncDir fsyncs the directory holding the shard so its rename is durable.
func (w *Writer) syncDir() error {
	if w.root != nil {
		return atomicfile.SyncDirIn(w.root, filepath.Dir(w.path))
	}
	return atomicfile.SyncDir(filepath.Dir(w.path))
}
