package shardfmt

// Shard file layout, format v1 (the full specification is FORMAT.md; this is
// a summary and the constants that build it). All integers little-endian.
//
//	offset                                  section
//	0                                       header (HeaderLen bytes, CRC-32C at its last 4 bytes)
//	header_len                              tensor table (entries, then the name pool)
//	tensor_table_off + tensor_table_len     metadata (JSON Provenance)
//	meta_off + meta_len                     zero padding up to data_off
//	data_off = align4096(meta end)          batch blocks: block k at data_off + k*block_size
//	data_off + num_batches*block_size       batch table (num_batches entries)
//	batch_table_off + batch_table_len       sample ids (num_batches*b u64)
//	file_len - FooterLen                    footer commit record
//
// Every section offset is fixed by the lengths before it; a v1 reader
// recomputes each one and rejects a file whose header disagrees.
//
// Format 2 (jagged tensors, blocks of varying size) moves the sample ids to
// right after the metadata, and places block k at the offset its batch
// table entry records (blocks.go, jagged.go):
//
//	meta_off + meta_len                     sample ids
//	ids end                                 zero padding up to data_off
//	data_off = align4096(ids end)           block 0, block 1, ... back to back
//	end of the last block                   batch table, then the footer

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"math/bits"
)

// Magic numbers at the start of the header and of the footer. The leading
// 0x89 and the CR LF catch 7-bit and newline-translating transfers (as PNG).
const (
	Magic       = "\x89SHARD\r\n"
	FooterMagic = "\x89SHEND\r\n"
)

// Format versions written by this package. A shard whose tensors all have
// a fixed per-sample shape is written as MajorVersion.MinorVersion (1.0),
// byte for byte as before jagged tensors existed, so every reader of major 1
// reads it. A shard holding a jagged tensor is written as
// JaggedMajorVersion.JaggedMinorVersion (2.0): its blocks differ in size, so
// a major-1 reader, which places block k at data_off + k*block_size, would
// misread it and refuses it by its major version instead (ErrVersion). This
// reader accepts any minor of majors 1 and 2 and ignores (but exposes)
// fields a later minor appends.
const (
	MajorVersion       = 1
	MinorVersion       = 0
	JaggedMajorVersion = 2
	JaggedMinorVersion = 0
)

// Fixed sizes and alignments of format v1.0.
const (
	HeaderLen      = 256 // header bytes written by v1.0 (a later minor may write more)
	TensorEntryLen = 128 // tensor table entry bytes written by v1.0
	BatchEntryLen  = 16  // batch table entry bytes written by v1.0
	// BatchEntryLenV2 is the fixed part of a v2.0 batch table entry; each
	// jagged tensor adds 8 bytes (its values count) after it.
	BatchEntryLenV2 = 32
	// MaxJagged bounds the jagged tensors of a shard so that a v2.0 batch
	// entry stays within the 4096 bytes a reader accepts.
	MaxJagged     = (4096 - BatchEntryLenV2) / 8
	FooterLen     = 64   // footer bytes (fixed for major 1)
	BlockAlign    = 4096 // alignment of data_off and of block_size
	SlabAlign     = 256  // alignment of each slab offset inside a block
	MaxRank       = 8    // maximum per-sample tensor rank
	MaxTensors    = 4096 // maximum tensors per shard
	MaxNameLen    = 4096 // maximum tensor name length in bytes
	MaxMetaLen    = 1 << 20
	MaxHeaderLen  = 1 << 16
	byteOrderMark = 0x01020304
)

// UnusedSampleID is the sample id stored for slots [Count, BatchSize) of a
// batch, which hold no sample.
const UnusedSampleID uint64 = math.MaxUint64

// Header field offsets (v1.0).
const (
	hMagic       = 0
	hMajor       = 8
	hMinor       = 10
	hByteOrder   = 12
	hHeaderLen   = 16
	hTensorEntry = 20
	hBatchEntry  = 24
	hNumTensors  = 28
	hFileLen     = 32
	hBatchSize   = 40
	hNumBatches  = 48
	hTTOff       = 56
	hTTLen       = 64
	hMetaOff     = 72
	hMetaLen     = 80
	hDataOff     = 88
	hBlockSize   = 96
	hBTOff       = 104
	hBTLen       = 112
	hIDsOff      = 120
	hIDsLen      = 128
	hFooterOff   = 136
	hTTCRC       = 144
	hMetaCRC     = 148
	hBTCRC       = 152
	hIDsCRC      = 156
	hKnownEnd    = 160 // first byte not defined by v1.0 (reserved / later minors)
)

// Tensor table entry field offsets (v1.0).
const (
	tDType       = 0
	tRank        = 2
	tNameLen     = 4
	tNameOff     = 8
	tShape       = 16
	tSampleBytes = 80
	tSlabOff     = 88
	tSlabSize    = 96
	tKnownEnd    = 104
	tKind        = 104 // v2.0: u16 tensor kind (kindFixed or kindJagged)
)

// Tensor kinds of a v2.0 tensor table entry (field tKind). Any other value
// is refused: a new kind changes how blocks are laid out, so it needs a new
// major version.
const (
	kindFixed  = 0
	kindJagged = 1
)

// Batch table entry field offsets.
const (
	bCount    = 0
	bPads     = 4
	bBlockCRC = 8
	bIDsCRC   = 12
	bBlockOff = 16 // v2.0: u64 file offset of the block
	bBlockLen = 24 // v2.0: u64 bytes of the block
	bValues   = 32 // v2.0: u64 per jagged tensor, its values count
)

// Footer field offsets.
const (
	fMagic     = 0
	fFileLen   = 8
	fBatches   = 16
	fDataOff   = 24
	fTTCRC     = 32
	fMetaCRC   = 36
	fBTCRC     = 40
	fIDsCRC    = 44
	fHeaderCRC = 48
	fCRC       = 60
)

var le = binary.LittleEndian

// castagnoli is the CRC-32C table (polynomial 0x1EDC6F41, reflected
// 0x82F63B78), hardware accelerated on amd64 (SSE4.2) and arm64.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// CRC32C returns the CRC-32C (Castagnoli) of b: the checksum every block,
// table and header of a shard carries (FORMAT.md, "Checksums").
func CRC32C(b []byte) uint32 { return crc32c(b) }

// header is the decoded v1 header.
type header struct {
	major, minor     uint16
	headerLen        uint32
	tensorEntryLen   uint32
	batchEntryLen    uint32
	numTensors       uint32
	fileLen          uint64
	batchSize        uint64
	numBatches       uint64
	ttOff, ttLen     uint64
	metaOff, metaLen uint64
	dataOff          uint64
	blockSize        uint64
	btOff, btLen     uint64
	idsOff, idsLen   uint64
	footerOff        uint64
	ttCRC, metaCRC   uint32
	btCRC, idsCRC    uint32
	crc              uint32
}

func (h *header) encode(b []byte) {
	copy(b[hMagic:], Magic)
	le.PutUint16(b[hMajor:], h.major)
	le.PutUint16(b[hMinor:], h.minor)
	le.PutUint32(b[hByteOrder:], byteOrderMark)
	le.PutUint32(b[hHeaderLen:], h.headerLen)
	le.PutUint32(b[hTensorEntry:], h.tensorEntryLen)
	le.PutUint32(b[hBatchEntry:], h.batchEntryLen)
	le.PutUint32(b[hNumTensors:], h.numTensors)
	le.PutUint64(b[hFileLen:], h.fileLen)
	le.PutUint64(b[hBatchSize:], h.batchSize)
	le.PutUint64(b[hNumBatches:], h.numBatches)
	le.PutUint64(b[hTTOff:], h.ttOff)
	le.PutUint64(b[hTTLen:], h.ttLen)
	le.PutUint64(b[hMetaOff:], h.metaOff)
	le.PutUint64(b[hMetaLen:], h.metaLen)
	le.PutUint64(b[hDataOff:], h.dataOff)
	le.PutUint64(b[hBlockSize:], h.blockSize)
	le.PutUint64(b[hBTOff:], h.btOff)
	le.PutUint64(b[hBTLen:], h.btLen)
	le.PutUint64(b[hIDsOff:], h.idsOff)
	le.PutUint64(b[hIDsLen:], h.idsLen)
	le.PutUint64(b[hFooterOff:], h.footerOff)
	le.PutUint32(b[hTTCRC:], h.ttCRC)
	le.PutUint32(b[hMetaCRC:], h.metaCRC)
	le.PutUint32(b[hBTCRC:], h.btCRC)
	le.PutUint32(b[hIDsCRC:], h.idsCRC)
	n := int(h.headerLen)
	h.crc = crc32c(b[:n-4])
	le.PutUint32(b[n-4:], h.crc)
}

// decode reads the fields of a header whose magic, byte order, version,
// length and checksum were already checked.
func (h *header) decode(b []byte) {
	h.major = le.Uint16(b[hMajor:])
	h.minor = le.Uint16(b[hMinor:])
	h.headerLen = le.Uint32(b[hHeaderLen:])
	h.tensorEntryLen = le.Uint32(b[hTensorEntry:])
	h.batchEntryLen = le.Uint32(b[hBatchEntry:])
	h.numTensors = le.Uint32(b[hNumTensors:])
	h.fileLen = le.Uint64(b[hFileLen:])
	h.batchSize = le.Uint64(b[hBatchSize:])
	h.numBatches = le.Uint64(b[hNumBatches:])
	h.ttOff = le.Uint64(b[hTTOff:])
	h.ttLen = le.Uint64(b[hTTLen:])
	h.metaOff = le.Uint64(b[hMetaOff:])
	h.metaLen = le.Uint64(b[hMetaLen:])
	h.dataOff = le.Uint64(b[hDataOff:])
	h.blockSize = le.Uint64(b[hBlockSize:])
	h.btOff = le.Uint64(b[hBTOff:])
	h.btLen = le.Uint64(b[hBTLen:])
	h.idsOff = le.Uint64(b[hIDsOff:])
	h.idsLen = le.Uint64(b[hIDsLen:])
	h.footerOff = le.Uint64(b[hFooterOff:])
	h.ttCRC = le.Uint32(b[hTTCRC:])
	h.metaCRC = le.Uint32(b[hMetaCRC:])
	h.btCRC = le.Uint32(b[hBTCRC:])
	h.idsCRC = le.Uint32(b[hIDsCRC:])
	h.crc = le.Uint32(b[h.headerLen-4:])
}

func (h *header) encodeFooter(b []byte) {
	copy(b[fMagic:], FooterMagic)
	le.PutUint64(b[fFileLen:], h.fileLen)
	le.PutUint64(b[fBatches:], h.numBatches)
	le.PutUint64(b[fDataOff:], h.dataOff)
	le.PutUint32(b[fTTCRC:], h.ttCRC)
	le.PutUint32(b[fMetaCRC:], h.metaCRC)
	le.PutUint32(b[fBTCRC:], h.btCRC)
	le.PutUint32(b[fIDsCRC:], h.idsCRC)
	le.PutUint32(b[fHeaderCRC:], h.crc)
	le.PutUint32(b[fCRC:], crc32c(b[:fCRC]))
}

// Overflow-checked arithmetic on u64 offsets and sizes.

func mul64(a, b uint64) (uint64, bool) {
	hi, lo := bits.Mul64(a, b)
	return lo, hi == 0
}

func add64(a, b uint64) (uint64, bool) {
	s, c := bits.Add64(a, b, 0)
	return s, c == 0
}

// alignUp rounds x up to a multiple of a (a power of two).
func alignUp(x, a uint64) (uint64, bool) {
	s, ok := add64(x, a-1)
	return s &^ (a - 1), ok
}

func crc32Update(crc uint32, b []byte) uint32 { return crc32.Update(crc, castagnoli, b) }
