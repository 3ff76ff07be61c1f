package shardfmt

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"unsafe"
)

var errNoMmap = errors.New("mmap unavailable")

// BatchInfo is one batch table entry.
type BatchInfo struct {
	Count  int    // samples present (real + pad), <= BatchSize; slots [Count, b) are unused and zero
	Pads   int    // pad samples among Count; they are always the last Pads of the Count samples
	CRC    uint32 // CRC-32C of the whole block, padding included
	Offset uint64 // file offset of the block: data_off + k*block_size (format 1), from the batch table (format 2)
	Size   uint64 // bytes of the block: block_size (format 1), from the batch table (format 2); a multiple of 4096
}

// Real returns the number of real (non-pad) samples, Count - Pads.
func (b BatchInfo) Real() int { return b.Count - b.Pads }

// Reader reads a shard. Open and OpenReaderAt validate the header, footer and
// tables (no I/O proportional to the sample count); batch blocks and sample
// ids are checked on demand (VerifyBatch, SampleIDs, VerifySampleIDs).
// Methods are safe for concurrent use, except Close, which must not race with
// them. Slices returned by Block and BatchSlab alias the file mapping and are
// valid until Close; they must not be written.
type Reader struct {
	path    string
	f       *os.File    // nil for OpenReaderAt
	ra      io.ReaderAt // f, or the caller's reader
	data    []byte      // read-only mapping of the whole file; nil when not mapped
	size    int64
	h       header
	hdr     []byte // raw header (h.headerLen bytes)
	tensors []TensorInfo
	geo     Geometry
	prov    Provenance
	meta    []byte
	bt      []byte // raw batch table
	closed  bool
}

func (r *Reader) fail(section string, off uint64, sentinel error, format string, args ...any) *FormatError {
	return ferr(r.path, section, int64(off), -1, sentinel, format, args...)
}

// read returns n bytes at off: a view of the mapping, or a fresh buffer.
// Callers guarantee off+n <= size.
func (r *Reader) read(off, n uint64) ([]byte, error) {
	if r.data != nil {
		return r.data[off : off+n : off+n], nil
	}
	b := make([]byte, n)
	if _, err := r.ra.ReadAt(b, int64(off)); err != nil {
		return nil, err
	}
	return b, nil
}

// open runs the validation steps in the order documented in FORMAT.md.
func (r *Reader) open(mmap bool) error {
	size := uint64(r.size)
	// 1. size
	if r.size < HeaderLen+FooterLen {
		return r.fail("file", 0, ErrSize, "file of %d bytes is shorter than the smallest shard (%d bytes)", r.size, HeaderLen+FooterLen)
	}
	hb := make([]byte, HeaderLen)
	if _, err := r.ra.ReadAt(hb, 0); err != nil {
		return r.fail("header", 0, ErrSize, "reading header: %v", err)
	}
	// 2. magic
	if string(hb[:8]) != Magic {
		return r.fail("header", hMagic, ErrMagic, "got % x", hb[:8])
	}
	// 3. byte order
	if bom := le.Uint32(hb[hByteOrder:]); bom != byteOrderMark {
		return r.fail("header", hByteOrder, ErrEndian, "byte-order marker reads %#08x, want %#08x", bom, byteOrderMark)
	}
	// 4. version
	if major := le.Uint16(hb[hMajor:]); major != MajorVersion && major != JaggedMajorVersion {
		return r.fail("header", hMajor, ErrVersion, "format version %d.%d, this reader supports %d.x and %d.x", major, le.Uint16(hb[hMinor:]), MajorVersion, JaggedMajorVersion)
	}
	// 5. header length
	hl := uint64(le.Uint32(hb[hHeaderLen:]))
	if hl < HeaderLen || hl > MaxHeaderLen || hl%8 != 0 || hl > size-FooterLen {
		return r.fail("header", hHeaderLen, ErrCorrupt, "header length %d", hl)
	}
	if hl > HeaderLen {
		full := make([]byte, hl)
		if _, err := r.ra.ReadAt(full, 0); err != nil {
			return r.fail("header", 0, ErrSize, "reading header: %v", err)
		}
		hb = full
	}
	// 6. header checksum
	if got, want := crc32c(hb[:hl-4]), le.Uint32(hb[hl-4:]); got != want {
		return r.fail("header", hl-4, ErrChecksum, "header CRC-32C %08x, stored %08x", got, want)
	}
	r.hdr = hb
	h := &r.h
	h.decode(hb)
	// 7. file length
	if h.fileLen != size {
		return r.fail("file", hFileLen, ErrSize, "expected size %d bytes, actual size %d bytes", h.fileLen, size)
	}
	// 8. section layout
	if err := r.checkLayout(); err != nil {
		return err
	}
	// The file is as long as the header says: it is now safe to map.
	if mmap && r.f != nil {
		if data, err := mmapFile(r.f, r.size); err == nil {
			r.data = data
			if mappedHook != nil {
				mappedHook(r.f)
			}
			// Cut short between the size check and the mapping, the
			// file would fault on the first access past its new end:
			// its size is checked again now that it is mapped (a later
			// cut faults, and the Reader's methods recover it).
			st, err := r.f.Stat()
			if err != nil {
				return r.fail("file", 0, ErrSize, "checking the size after mapping: %v", err)
			}
			if st.Size() != r.size {
				return r.fail("file", hFileLen, ErrSize, "file changed size while being opened: %d bytes, then %d after mapping", r.size, st.Size())
			}
		}
	}
	if r.data != nil && mappedCheckedHook != nil {
		mappedCheckedHook(r.f)
	}
	return r.readSections()
}

// readSections runs validation steps 9 to 12. Mapped, they read the
// mapping: a file cut short since its size was checked again faults, and
// the fault is an error wrapping ErrSize, not a crash (faultGuard).
func (r *Reader) readSections() (err error) {
	defer r.faultGuard("file", -1, &err)()
	// 9. footer
	if err := r.checkFooter(); err != nil {
		return err
	}
	// 10. tensor table
	if err := r.readTensors(); err != nil {
		return err
	}
	// 11. metadata and the zero padding before the data
	if err := r.readMeta(); err != nil {
		return err
	}
	// 12. batch table
	return r.readBatchTable()
}

// checkLayout verifies that every section sits where the lengths before it
// put it, with overflow-checked arithmetic. Since file_len equals the file
// size, every section is then inside the file.
func (r *Reader) checkLayout() error {
	h := &r.h
	bad := func(field uint64, format string, args ...any) error {
		return r.fail("header", field, ErrCorrupt, format, args...)
	}
	if h.tensorEntryLen < TensorEntryLen || h.tensorEntryLen%8 != 0 || h.tensorEntryLen > 1<<12 {
		return bad(hTensorEntry, "tensor entry length %d", h.tensorEntryLen)
	}
	if h.batchEntryLen < BatchEntryLen || h.batchEntryLen%8 != 0 || h.batchEntryLen > 1<<12 {
		return bad(hBatchEntry, "batch entry length %d", h.batchEntryLen)
	}
	if h.numTensors < 1 || h.numTensors > MaxTensors {
		return bad(hNumTensors, "%d tensors, want 1 to %d", h.numTensors, MaxTensors)
	}
	if h.batchSize < 1 || h.batchSize > 1<<32-1 {
		return bad(hBatchSize, "batch size %d", h.batchSize)
	}
	if h.ttOff != uint64(h.headerLen) {
		return bad(hTTOff, "tensor table offset %d, want %d", h.ttOff, h.headerLen)
	}
	end, ok := add64(h.ttOff, h.ttLen)
	if h.ttLen < uint64(h.numTensors)*uint64(h.tensorEntryLen) || h.ttLen%8 != 0 || !ok || end > h.fileLen {
		return bad(hTTLen, "tensor table length %d", h.ttLen)
	}
	if h.metaOff != end {
		return bad(hMetaOff, "metadata offset %d, want %d", h.metaOff, end)
	}
	if h.metaLen > MaxMetaLen {
		return bad(hMetaLen, "metadata length %d exceeds %d", h.metaLen, MaxMetaLen)
	}
	if h.major >= JaggedMajorVersion {
		return r.checkLayoutV2()
	}
	dataOff, _ := alignUp(h.metaOff+h.metaLen, BlockAlign) // both bounded above
	if h.dataOff != dataOff {
		return bad(hDataOff, "data offset %d, want %d", h.dataOff, dataOff)
	}
	if h.blockSize == 0 || h.blockSize%BlockAlign != 0 {
		return bad(hBlockSize, "block size %d is not a positive multiple of %d", h.blockSize, BlockAlign)
	}
	data, ok1 := mul64(h.numBatches, h.blockSize)
	btOff, ok2 := add64(h.dataOff, data)
	if !ok1 || !ok2 || h.btOff != btOff {
		return bad(hBTOff, "batch table offset %d for %d batches of %d bytes", h.btOff, h.numBatches, h.blockSize)
	}
	btLen, ok := mul64(h.numBatches, uint64(h.batchEntryLen))
	if !ok || h.btLen != btLen {
		return bad(hBTLen, "batch table length %d, want %d entries of %d bytes", h.btLen, h.numBatches, h.batchEntryLen)
	}
	idsOff, ok := add64(h.btOff, h.btLen)
	if !ok || h.idsOff != idsOff {
		return bad(hIDsOff, "sample ids offset %d", h.idsOff)
	}
	idsLen, ok := mul64(h.numBatches, h.batchSize*8)
	if !ok || h.idsLen != idsLen {
		return bad(hIDsLen, "sample ids length %d, want %d batches of %d ids", h.idsLen, h.numBatches, h.batchSize)
	}
	footerOff, ok := add64(h.idsOff, h.idsLen)
	if !ok || h.footerOff != footerOff {
		return bad(hFooterOff, "footer offset %d", h.footerOff)
	}
	if fl, ok := add64(h.footerOff, FooterLen); !ok || fl != h.fileLen {
		return bad(hFileLen, "file length %d, footer ends at %d", h.fileLen, fl)
	}
	return nil
}

func (r *Reader) checkFooter() error {
	h := &r.h
	b, err := r.read(h.footerOff, FooterLen)
	if err != nil {
		return r.fail("footer", h.footerOff, ErrSize, "reading footer: %v", err)
	}
	if string(b[:8]) != FooterMagic {
		return r.fail("footer", h.footerOff, ErrMagic, "got % x", b[:8])
	}
	if got, want := crc32c(b[:fCRC]), le.Uint32(b[fCRC:]); got != want {
		return r.fail("footer", h.footerOff+fCRC, ErrChecksum, "footer CRC-32C %08x, stored %08x", got, want)
	}
	if le.Uint64(b[fFileLen:]) != h.fileLen || le.Uint64(b[fBatches:]) != h.numBatches ||
		le.Uint64(b[fDataOff:]) != h.dataOff || le.Uint32(b[fTTCRC:]) != h.ttCRC ||
		le.Uint32(b[fMetaCRC:]) != h.metaCRC || le.Uint32(b[fBTCRC:]) != h.btCRC ||
		le.Uint32(b[fIDsCRC:]) != h.idsCRC || le.Uint32(b[fHeaderCRC:]) != h.crc {
		return r.fail("footer", h.footerOff, ErrCorrupt, "footer commit record disagrees with the header")
	}
	return nil
}

func (r *Reader) readTensors() error {
	h := &r.h
	tt, err := r.read(h.ttOff, h.ttLen)
	if err != nil {
		return r.fail("tensor table", h.ttOff, ErrSize, "reading: %v", err)
	}
	if got := crc32c(tt); got != h.ttCRC {
		return r.fail("tensor table", h.ttOff, ErrChecksum, "CRC-32C %08x, stored %08x", got, h.ttCRC)
	}
	n := int(h.numTensors)
	b := h.batchSize
	r.tensors = make([]TensorInfo, n)
	g := Geometry{
		BatchSize:   int(b),
		BlockSize:   h.blockSize,
		SlabOffset:  make([]uint64, n),
		SlabSize:    make([]uint64, n),
		SampleBytes: make([]uint64, n),
	}
	seen := make(map[string]bool, n)
	pool := uint64(n) * uint64(h.tensorEntryLen)
	var prevEnd uint64
	for i := range n {
		eoff := uint64(i) * uint64(h.tensorEntryLen)
		e := tt[eoff:]
		at := h.ttOff + eoff
		bad := func(field uint64, format string, args ...any) error {
			return r.fail("tensor table", at+field, ErrCorrupt, "tensor %d: "+format, append([]any{i}, args...)...)
		}
		d := DType(le.Uint16(e[tDType:]))
		if !d.Valid() {
			return bad(tDType, "invalid dtype code %d", uint16(d))
		}
		rank := int(le.Uint16(e[tRank:]))
		if rank > MaxRank {
			return bad(tRank, "rank %d exceeds %d", rank, MaxRank)
		}
		shape := make([]uint64, rank)
		for j := range MaxRank {
			dim := le.Uint64(e[tShape+8*j:])
			if j < rank {
				shape[j] = dim
			} else if dim != 0 {
				return bad(uint64(tShape+8*j), "dimension %d beyond rank %d is %d, want 0", j, rank, dim)
			}
		}
		nl := uint64(le.Uint32(e[tNameLen:]))
		no := le.Uint64(e[tNameOff:])
		if nl < 1 || nl > MaxNameLen || no < pool || no > h.ttLen || nl > h.ttLen-no {
			return bad(tNameOff, "name of %d bytes at pool offset %d outside the name pool", nl, no)
		}
		name := string(tt[no : no+nl])
		if err := checkName(name); err != nil {
			return bad(tNameOff, "%v", err)
		}
		if seen[name] {
			return bad(tNameOff, "duplicate name %q", name)
		}
		seen[name] = true
		sb, err := sampleBytes(d, shape)
		if err != nil {
			return bad(tShape, "%v", err)
		}
		if got := le.Uint64(e[tSampleBytes:]); got != sb {
			return bad(tSampleBytes, "sample bytes %d, want %d", got, sb)
		}
		ss, ok := mul64(sb, b)
		jagged := false
		if h.major >= JaggedMajorVersion {
			switch kind := le.Uint16(e[tKind:]); kind {
			case kindFixed:
			case kindJagged:
				jagged, ss, ok = true, (b+1)*8, true
			default:
				return bad(tKind, "unknown tensor kind %d", kind)
			}
		}
		if got := le.Uint64(e[tSlabSize:]); !ok || got != ss {
			return bad(tSlabSize, "slab size %d, want %d", got, ss)
		}
		so := le.Uint64(e[tSlabOff:])
		end, ok := add64(so, ss)
		if so%SlabAlign != 0 || so < prevEnd || !ok || end > h.blockSize {
			return bad(tSlabOff, "slab [%d, +%d) not %d-aligned, overlapping or outside the %d-byte block", so, ss, SlabAlign, h.blockSize)
		}
		prevEnd = end
		r.tensors[i] = TensorInfo{Name: name, DType: d, Shape: shape, Jagged: jagged}
		g.SampleBytes[i], g.SlabSize[i], g.SlabOffset[i] = sb, ss, so
		if jagged {
			if g.Jagged == nil {
				g.Jagged = make([]bool, n)
			}
			g.Jagged[i] = true
		}
	}
	r.geo = g
	return nil
}

func (r *Reader) readMeta() error {
	h := &r.h
	gapOff := h.metaOff + h.metaLen // format 2: the sample ids come first
	if h.major >= JaggedMajorVersion {
		gapOff = h.idsOff + h.idsLen
	}
	meta, err := r.read(h.metaOff, h.metaLen)
	if err != nil {
		return r.fail("metadata", h.metaOff, ErrSize, "reading: %v", err)
	}
	gap, err := r.read(gapOff, h.dataOff-gapOff)
	if err != nil {
		return r.fail("padding", gapOff, ErrSize, "reading: %v", err)
	}
	if got := crc32c(meta); got != h.metaCRC {
		return r.fail("metadata", h.metaOff, ErrChecksum, "CRC-32C %08x, stored %08x", got, h.metaCRC)
	}
	if err := json.Unmarshal(meta, &r.prov); err != nil {
		return r.fail("metadata", h.metaOff, ErrCorrupt, "decoding provenance: %v", err)
	}
	r.meta = bytes.Clone(meta) // a copy: valid whatever happens to the file
	if p := firstNonZero(gap); p >= 0 {
		return r.fail("padding", gapOff+uint64(p), ErrCorrupt, "nonzero byte before the data section")
	}
	return nil
}

func (r *Reader) readBatchTable() error {
	h := &r.h
	bt, err := r.read(h.btOff, h.btLen)
	if err != nil {
		return r.fail("batch table", h.btOff, ErrSize, "reading: %v", err)
	}
	if got := crc32c(bt); got != h.btCRC {
		return r.fail("batch table", h.btOff, ErrChecksum, "CRC-32C %08x, stored %08x", got, h.btCRC)
	}
	stride := uint64(h.batchEntryLen)
	for k := uint64(0); k < h.numBatches; k++ {
		e := bt[k*stride:]
		count, pads := uint64(le.Uint32(e[bCount:])), uint64(le.Uint32(e[bPads:]))
		if count > h.batchSize || pads > count {
			return ferr(r.path, "batch table", int64(h.btOff+k*stride), int(k), ErrCorrupt,
				"count %d, pads %d for batch size %d", count, pads, h.batchSize)
		}
	}
	if h.major >= JaggedMajorVersion {
		if err := r.checkBlocksV2(bt); err != nil {
			return err
		}
	}
	// Kept as a copy, like the metadata: Batch and SampleIDs' checks read
	// it for every step, and a view of the mapping would fault (SIGBUS) once
	// the file is cut short after Open. It is small (one entry per batch)
	// and already read once for its CRC.
	r.bt = bytes.Clone(bt)
	return nil
}

// Path returns the file path (or the name given to OpenReaderAt).
func (r *Reader) Path() string { return r.path }

// FileSize returns the file length in bytes.
func (r *Reader) FileSize() int64 { return r.size }

// File returns the open shard file, or nil for a Reader from
// OpenReaderAt. The Reader keeps owning it (Close closes it): use it to
// read, or to open the same file again (as /proc/self/fd/N) with other
// flags, never to close it.
func (r *Reader) File() *os.File { return r.f }

// Version returns the major and minor format version of the file.
func (r *Reader) Version() (major, minor int) { return int(r.h.major), int(r.h.minor) }

// HeaderExtension returns the header bytes a later minor version may define
// ([160, header_len-4)), which this reader ignores; a tool that rewrites a
// shard preserves them.
func (r *Reader) HeaderExtension() []byte { return r.hdr[hKnownEnd : r.h.headerLen-4] }

// Mapped reports whether the file is memory-mapped (Block is zero-copy).
func (r *Reader) Mapped() bool { return r.data != nil }

// Provenance returns the shard's provenance metadata.
func (r *Reader) Provenance() Provenance { return r.prov }

// Metadata returns the raw metadata section (JSON), unknown fields included.
func (r *Reader) Metadata() []byte { return r.meta }

// CheckProvenance checks the shard's provenance against want (see
// Provenance.CheckProvenance) and prefixes the shard path to the error.
func (r *Reader) CheckProvenance(want Provenance) error {
	if err := r.prov.CheckProvenance(want); err != nil {
		return fmt.Errorf("%s: %w", r.path, err)
	}
	return nil
}

// Tensors returns the tensor table (a copy).
func (r *Reader) Tensors() []TensorInfo {
	out := make([]TensorInfo, len(r.tensors))
	for i, t := range r.tensors {
		t.Shape = append([]uint64{}, t.Shape...)
		out[i] = t
	}
	return out
}

// Geometry returns the block geometry.
func (r *Reader) Geometry() Geometry { return r.geo }

// NumBatches returns the number of batches.
func (r *Reader) NumBatches() int { return int(r.h.numBatches) }

func (r *Reader) check(k int) error {
	if r.closed {
		return ferr(r.path, "reader", -1, k, ErrClosed, "")
	}
	if k < 0 || uint64(k) >= r.h.numBatches {
		return ferr(r.path, "batch table", -1, k, ErrRange, "batch %d of %d", k, r.h.numBatches)
	}
	return nil
}

func (r *Reader) entry(k int) []byte { return r.bt[uint64(k)*uint64(r.h.batchEntryLen):] }

// Batch returns the batch table entry of batch k. Errors wrap ErrRange or
// ErrClosed.
func (r *Reader) Batch(k int) (BatchInfo, error) {
	if err := r.check(k); err != nil {
		return BatchInfo{}, err
	}
	e := r.entry(k)
	off, size := r.block(k)
	return BatchInfo{
		Count:  int(le.Uint32(e[bCount:])),
		Pads:   int(le.Uint32(e[bPads:])),
		CRC:    le.Uint32(e[bBlockCRC:]),
		Offset: off,
		Size:   size,
	}, nil
}

// rawIDs returns batch k's b*8 sample id bytes, checked against their CRC.
func (r *Reader) rawIDs(k int) ([]byte, error) {
	n := r.h.batchSize * 8
	off := r.h.idsOff + uint64(k)*n
	b, err := r.read(off, n)
	if err != nil {
		return nil, ferr(r.path, "sample ids", int64(off), k, ErrSize, "reading: %v", err)
	}
	if got, want := crc32c(b), le.Uint32(r.entry(k)[bIDsCRC:]); got != want {
		return nil, ferr(r.path, "sample ids", int64(off), k, ErrChecksum, "CRC-32C %08x, stored %08x", got, want)
	}
	return b, nil
}

// SampleIDs returns the global sample ids of batch k (len = Count; the last
// Pads are pad samples). The batch's ids are checked against their CRC-32C;
// errors wrap ErrChecksum, ErrRange or ErrClosed.
func (r *Reader) SampleIDs(k int) ([]uint64, error) {
	ids, err := r.AppendSampleIDs(nil, k)
	if err == nil && ids == nil {
		ids = []uint64{}
	}
	return ids, err
}

// AppendSampleIDs is SampleIDs appending to dst: a reader going through
// every batch reuses one buffer instead of allocating Count ids per batch.
// On error dst is returned unchanged.
func (r *Reader) AppendSampleIDs(dst []uint64, k int) (_ []uint64, err error) {
	defer r.faultGuard("sample ids", k, &err)()
	bi, err := r.Batch(k)
	if err != nil {
		return dst, err
	}
	b, err := r.rawIDs(k)
	if err != nil {
		return dst, err
	}
	n := len(dst)
	dst = slices.Grow(dst, bi.Count)[:n+bi.Count]
	for j := range bi.Count {
		dst[n+j] = le.Uint64(b[8*j:])
	}
	return dst, nil
}

// ReadSampleIDs is SampleIDs reading with one positioned read (pread) into
// dst's memory instead of through the mapping, so a reader going through
// every batch reuses one buffer and takes no page faults on the mapped ids.
// It returns dst[:Count], reallocated first when cap(dst) < BatchSize (the
// read covers all BatchSize slots, which the CRC-32C covers). Errors wrap
// ErrChecksum, ErrSize (short read), ErrRange or ErrClosed.
func (r *Reader) ReadSampleIDs(k int, dst []uint64) ([]uint64, error) {
	bi, err := r.Batch(k)
	if err != nil {
		return nil, err
	}
	dst, err = r.ReadSampleIDSlots(k, 1, dst)
	if err != nil {
		return nil, err
	}
	return dst[:bi.Count], nil
}

// ReadSampleIDSlots reads the BatchSize id slots of each of the n batches
// k, k+1, ..., k+n-1 with one positioned read (pread) into dst's memory and
// returns dst[:n*BatchSize] (reallocated first when too small): batch k+i's
// ids are [i*BatchSize, i*BatchSize+Count), its unused slots hold
// UnusedSampleID. Each batch is checked against its CRC-32C. Errors wrap
// ErrChecksum (naming the first failing batch), ErrSize (short read),
// ErrRange or ErrClosed.
func (r *Reader) ReadSampleIDSlots(k, n int, dst []uint64) ([]uint64, error) {
	if err := r.check(k); err != nil {
		return nil, err
	}
	if n < 1 {
		return dst[:0], nil
	}
	if err := r.check(k + n - 1); err != nil {
		return nil, err
	}
	b := int(r.h.batchSize)
	if cap(dst) < n*b {
		dst = make([]uint64, n*b)
	}
	dst = dst[:n*b]
	raw := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst))), 8*n*b)
	off := r.h.idsOff + uint64(k)*uint64(8*b)
	if _, err := r.ra.ReadAt(raw, int64(off)); err != nil {
		return nil, ferr(r.path, "sample ids", int64(off), k, ErrSize, "reading: %v", err)
	}
	for i := range n {
		one := raw[8*b*i : 8*b*(i+1)]
		if got, want := crc32c(one), le.Uint32(r.entry(k + i)[bIDsCRC:]); got != want {
			return nil, ferr(r.path, "sample ids", int64(off)+int64(8*b*i), k+i, ErrChecksum, "CRC-32C %08x, stored %08x", got, want)
		}
	}
	if !nativeLE {
		for j := range dst {
			dst[j] = le.Uint64(raw[8*j:])
		}
	}
	return dst, nil
}

// nativeLE reports whether this machine stores integers little-endian, as
// the file does, so ids read into a []uint64 need no byte swap.
var nativeLE = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// Block returns batch k's block (BatchInfo.Size bytes: BlockSize in a shard
// without jagged tensors). When the file is mapped it
// is a zero-copy read-only view valid until Close; otherwise a fresh copy read
// with ReadAt. The block is not verified; see VerifyBatch. Reading a view
// faults (SIGBUS) if someone truncates the file after Open; ReadBlock (pread)
// returns an error instead, and the Reader's own methods recover such faults
// as ErrSize.
func (r *Reader) Block(k int) ([]byte, error) {
	if err := r.check(k); err != nil {
		return nil, err
	}
	off, size := r.block(k)
	if r.data != nil {
		return r.data[off : off+size : off+size], nil
	}
	dst := make([]byte, size)
	if err := r.ReadBlock(k, dst); err != nil {
		return nil, err
	}
	return dst, nil
}

// ReleaseBlock tells the kernel that batch k's mapped block is not needed
// soon (madvise MADV_DONTNEED), so a reader streaming a shard larger than
// memory keeps its resident set bounded. Views of the block stay valid: the
// pages are read again from the file on the next access. A no-op when the
// file is not mapped. Errors wrap ErrRange or ErrClosed, or are the OS error.
func (r *Reader) ReleaseBlock(k int) error {
	if err := r.check(k); err != nil {
		return err
	}
	if r.data == nil {
		return nil
	}
	off, size := r.block(k)
	return dontNeed(r.data[off : off+size])
}

// ReadBlock copies batch k's block into dst[:BatchInfo.Size] with one
// positioned read (pread), bypassing the mapping; dst may be pinned host
// memory (a buffer of BlockSize bytes holds any block of the shard).
// Errors wrap ErrInvalid (dst too short), ErrRange, ErrClosed or ErrSize
// (short read).
func (r *Reader) ReadBlock(k int, dst []byte) error {
	if err := r.check(k); err != nil {
		return err
	}
	off, size := r.block(k)
	if uint64(len(dst)) < size {
		return ferr(r.path, "block", -1, k, ErrInvalid, "buffer of %d bytes, block is %d", len(dst), size)
	}
	if _, err := r.ra.ReadAt(dst[:size], int64(off)); err != nil {
		return ferr(r.path, "block", int64(off), k, ErrSize, "reading: %v", err)
	}
	return nil
}

// ReadBlocks copies the blocks of batches k, k+1, ..., k+len(dst)-1 into
// dst[i][:BatchInfo.Size], in order. The blocks are consecutive in the file, so
// on Linux a shard opened with Open reads them with one vectored positioned
// read (preadv) instead of one pread each, bypassing the mapping. On error
// nothing is said about which buffers were filled; ReadBlock on each batch
// locates the failing one. Errors wrap ErrInvalid (a buffer too short),
// ErrRange, ErrClosed or ErrSize (short read).
func (r *Reader) ReadBlocks(k int, dst [][]byte) error {
	if len(dst) == 0 {
		return nil
	}
	if err := r.check(k); err != nil {
		return err
	}
	if err := r.check(k + len(dst) - 1); err != nil {
		return err
	}
	bufs := make([][]byte, len(dst))
	var want uint64
	for i, d := range dst {
		_, bs := r.block(k + i)
		if uint64(len(d)) < bs {
			return ferr(r.path, "block", -1, k+i, ErrInvalid, "buffer of %d bytes, block is %d", len(d), bs)
		}
		bufs[i] = d[:bs]
		want += bs
	}
	if r.f == nil {
		for i, d := range dst {
			if err := r.ReadBlock(k+i, d); err != nil {
				return err
			}
		}
		return nil
	}
	off, _ := r.block(k)
	n, err := preadv(r.f, bufs, int64(off))
	if err == nil && uint64(n) != want {
		err = fmt.Errorf("read %d of %d bytes: %w", n, want, io.ErrUnexpectedEOF)
	}
	if err != nil {
		return ferr(r.path, "block", int64(off), k, ErrSize, "reading %d blocks: %v", len(dst), err)
	}
	return nil
}

// BatchSlab returns the [count, shape...] prefix of tensor i's slab in block
// (a slice of block, no copy). It panics if block is shorter than BlockSize,
// i is out of range or count is not in [0, BatchSize].
func (r *Reader) BatchSlab(block []byte, i, count int) []byte { return r.geo.Slab(block, i, count) }

// VerifySampleIDs checks the CRC-32C of the whole sample ids section against
// the header (I/O proportional to the sample count: 8 bytes per slot).
func (r *Reader) VerifySampleIDs() (err error) {
	defer r.faultGuard("sample ids", -1, &err)()
	if r.closed {
		return ferr(r.path, "reader", -1, -1, ErrClosed, "")
	}
	var crc uint32
	err = r.chunks(r.h.idsOff, r.h.idsLen, func(b []byte) { crc = crc32Update(crc, b) })
	if err != nil {
		return ferr(r.path, "sample ids", int64(r.h.idsOff), -1, ErrSize, "reading: %v", err)
	}
	if crc != r.h.idsCRC {
		return ferr(r.path, "sample ids", int64(r.h.idsOff), -1, ErrChecksum, "CRC-32C %08x, stored %08x", crc, r.h.idsCRC)
	}
	return nil
}

// chunks calls fn on consecutive pieces of [off, off+n).
func (r *Reader) chunks(off, n uint64, fn func([]byte)) error {
	if r.data != nil {
		fn(r.data[off : off+n])
		return nil
	}
	buf := make([]byte, min(n, 1<<20))
	for n > 0 {
		c := min(n, uint64(len(buf)))
		if _, err := r.ra.ReadAt(buf[:c], int64(off)); err != nil {
			return err
		}
		fn(buf[:c])
		off, n = off+c, n-c
	}
	return nil
}

// Digest returns the shard digest, "sha256:<hex>" of the bytes [0, data_off)
// followed by [batch_table_off, file_len): everything except the batch
// blocks, which it covers transitively through the per-block CRC-32Cs in the
// batch table.
func (r *Reader) Digest() (_ string, err error) {
	defer r.faultGuard("file", -1, &err)()
	if r.closed {
		return "", ferr(r.path, "reader", -1, -1, ErrClosed, "")
	}
	d := sha256.New()
	write := func(b []byte) { d.Write(b) }
	if err := r.chunks(0, r.h.dataOff, write); err != nil {
		return "", fmt.Errorf("digest of %s: %w", r.path, err)
	}
	if err := r.chunks(r.h.btOff, r.h.fileLen-r.h.btOff, write); err != nil {
		return "", fmt.Errorf("digest of %s: %w", r.path, err)
	}
	return "sha256:" + hex.EncodeToString(d.Sum(nil)), nil
}

// Close unmaps and closes the file. Slices returned by Block must not be used
// afterwards. Calling Close twice returns nil.
func (r *Reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	var err error
	if r.data != nil {
		err = munmap(r.data)
		r.data = nil
	}
	if r.f != nil {
		if cerr := r.f.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
