package feature

import "github.com/prepml/prep/source"

// The one memory budget. Everything prep holds in proportion to the data
// counts against --memory-limit; NewBudget derives every share of it, in
// this one place, so that no other file divides the limit:
//
//	share                                  bytes                                   method
//	object-store read-ahead                min(L/4, source.DefaultReadAheadBytes)  ReadAhead
//	the rest, when reading an object store L - ReadAhead                           AfterReadAhead
//	footers held between Compile, Decode   L/4 (verify --deep: min(Memory/2, 64 MiB))  Budget.Footers
//	anonymous memory: staging records,     L/2                                     Anon
//	  then the values arena beside them
//	Go heap                                L - anonymous memory used               Heap
//	decoded column chunks in flight        Heap/2 (the rest: garbage's room)       Decode
//	  a row window's columns               Decode/2/jobs (schedule.go)             windowShare (schedule.go)
//	decoded chunks' memory kept for reuse  Decode/2 (of the garbage's room)         decodeBuffers
//	one jagged batch block; a jagged row   max(L/4, 1 MiB)                         JaggedBlock
//	jagged batch blocks in flight          max(JaggedBlock, Heap/2)                JaggedInFlight
//	one row of a fixed-length list         L/22 level entries                      FixedListRowEntries
//	images decoding at once                max(L/4, 1 MiB)                         Images
//	packed documents held decoded          max(1, L/2)                             PackedDocuments
//	  their column chunks in flight        max(1, L/2)                             PackedDecode
//	verify: blocks compared                L/4                                     VerifyBlocks
//	verify: one of jobs checks             L/jobs: decode 1/2, prefetch 1/4        VerifyCheck
//	verify by parts                        parts L/2, decode L/4                   VerifyParts
//
// L is Budget.Limit. The anonymous share and the heap share add up to L;
// the others are parts of those (decoding, blocks, documents) or
// separate runs of one command (verify's). The reasons behind each share
// are given where it is spent: convert/doc.go (Memory) and feature/doc.go
// (Memory) for a conversion, verify.Options.MemoryLimit for verify.

// DefaultMemoryLimit is the memory limit when none is given (1 GiB): the
// default of --memory-limit and of a zero Budget.
const DefaultMemoryLimit = 1 << 30

// MinMemoryLimit is the least memory limit prep convert and prep verify
// --deep accept (1 MiB). Below it a row group is read in windows of a few
// rows each, millions of them for a large row group, which takes far
// longer and, for the bookkeeping of every window and page, more memory
// than a run at MinMemoryLimit. The packages take any positive limit (a
// small limit makes small inputs exercise row windows and spilling), but
// promise bounded memory only from MinMemoryLimit up.
const MinMemoryLimit = 1 << 20

// Budget is a memory limit and the shares derived from it (the table
// above). The zero Budget is DefaultMemoryLimit's.
type Budget struct {
	// Limit is the memory limit in bytes (--memory-limit); <= 0:
	// DefaultMemoryLimit.
	Limit int64
	// Footers bounds the footers Compile keeps held for Decode, in bytes;
	// 0: a quarter of Limit.
	Footers int64
	// Reader are the Parquet reader's fixed bounds (the row slot bound
	// that no limit raises, among others).
	Reader Limits
}

// NewBudget returns the budget of memory limit limit bytes (<= 0:
// DefaultMemoryLimit).
func NewBudget(limit int64) Budget { return Budget{Limit: limit}.normal() }

// normal returns b with its defaults filled in.
func (b Budget) normal() Budget {
	if b.Limit <= 0 {
		b.Limit = DefaultMemoryLimit
	}
	return b
}

// limit returns the memory limit, DefaultMemoryLimit for a zero Budget.
func (b Budget) limit() int64 { return b.normal().Limit }

// ReadAhead returns the bytes an object store may hold fetched ahead of
// the decoder: a quarter of the limit, at most
// source.DefaultReadAheadBytes.
func (b Budget) ReadAhead() int64 {
	return min(b.limit()/4, source.DefaultReadAheadBytes)
}

// AfterReadAhead returns the budget left to a run reading an object store
// that holds ReadAhead bytes: the limit less them.
func (b Budget) AfterReadAhead() Budget {
	b.Limit = b.limit() - b.ReadAhead()
	return b
}

// footers returns the footer bytes Compile keeps held.
func (b Budget) footers() int64 {
	if b.Footers != 0 {
		return b.Footers
	}
	return b.limit() / 4
}

// Anon returns the most anonymous memory (outside the Go heap) the staging
// records and the values arena may take together: half of the limit.
// Staging over it is spilled to disk, an arena over what is left of it
// goes to a file.
func (b Budget) Anon() int64 { return b.limit() / 2 }

// Heap returns the Go heap's share when anon bytes of anonymous memory are
// held: the rest of the limit.
func (b Budget) Heap(anon int64) int64 { return b.limit() - anon }

// Decode returns the bytes of decoded column chunks admitted in flight
// within a heap share of heap bytes: half of it, the other half being the
// collector's room for garbage.
func (b Budget) Decode(heap int64) int64 { return heap / 2 }

// windowShare returns the bytes the columns of one row window may take
// when decode bytes are admitted for jobs decode workers: half of decode
// over jobs (a windowed row group also holds its pages and the window it
// assembles).
func windowShare(decode int64, jobs int) int64 { return decode / 2 / int64(max(1, jobs)) }

// decodeBuffers returns the bytes of assembled column chunks' memory
// that stage 1 keeps for the next chunks to decode into
// (pqread.Buffers) when decode bytes are admitted: half of decode. It
// comes out of the garbage's room (Decode): memory kept for reuse is
// memory not left as garbage, and a heap that reuses it grows less.
func decodeBuffers(decode int64) int64 { return decode / 2 }

// JaggedBlock returns the most bytes of one jagged batch block, and so of
// one row's values of a jagged tensor: a quarter of the limit, at least
// 1 MiB (a batch over it is refused, naming it).
func (b Budget) JaggedBlock() int64 { return max(jaggedBlockMin, b.limit()/4) }

// JaggedInFlight returns the bytes of jagged batch blocks being built and
// written at once within a heap share of heap bytes: half of it, at
// least one block.
func (b Budget) JaggedInFlight(heap int64) int64 { return max(b.JaggedBlock(), heap/2) }

// FixedListRowEntries returns the most level entries one row of a
// fixed-length list may hold: the limit over fixedRowEntryBytes (such a row
// is decoded whole before it is padded or truncated).
func (b Budget) FixedListRowEntries() int64 { return b.limit() / fixedRowEntryBytes }

// Images returns the bytes of decoding memory the images decoding at once
// may take: a quarter of the limit, at least 1 MiB; an image whose header
// declares more is refused.
func (b Budget) Images() int64 { return max(1<<20, b.limit()/4) }

// PackedDocuments returns the bytes of decoded documents a packed run
// holds at once (PackedDocuments.HeldBytes): half of the limit.
func (b Budget) PackedDocuments() int64 { return max(1, b.limit()/2) }

// PackedDecode returns the bounds of decoding a packed run's documents:
// the decoded column chunks in flight within the other half of the limit,
// rows accepted as under the whole limit.
func (b Budget) PackedDecode() Bounds {
	return Bounds{Memory: max(1, b.limit()/2), Run: b.limit()}
}

// VerifyBlocks returns the bytes of batch blocks verify --deep holds
// compared at once, all checks together: a quarter of the limit.
func (b Budget) VerifyBlocks() int64 { return b.limit() / 4 }

// VerifyCheck returns, for one of jobs deep checks comparing batch by
// batch, the bytes its source may decode in (half its share of the limit)
// and the sample bytes it may hold prefetched (a quarter of its share).
func (b Budget) VerifyCheck(jobs int) (decode, prefetch int64) {
	share := max(1, b.limit()/int64(max(1, jobs)))
	return max(1, share/2), max(1, share/4)
}

// VerifyParts returns, for a deep check holding the source in parts, the
// bytes one part's samples and indexes may take (half of the limit) and
// those its source decodes in (a quarter).
func (b Budget) VerifyParts() (part, decode int64) {
	return max(1, b.limit()/2), max(1, b.limit()/4)
}
