// Package feature turns Parquet columns into tensor samples as a feature
// spec declares (SPEC.md): the spec, its validation, canonical form and
// versioned hash; compiling it against the source files' schemas
// (Compile); the transforms (casts, logical types, nulls, lists, maps,
// jagged values, bytes, images, partition tensors, packed documents); and
// stage 1 of a conversion, bounded decoding of the row groups holding a
// set of sample ids into fixed-size records (Program.Decode). Package
// convert writes shard sets from a Program; verify --deep decodes
// expected samples with the same Program (HeldSamples, Samples,
// PackedDocuments), so the two never disagree about a sample's bytes.
//
// # Files
//
//   - spec.go, spechash.go, speckeys.go, number.go: the feature spec
//     (SPEC.md), its validation, canonical form and versioned hash.
//   - program.go: the one entry point: Compile, Program (Tensors, Decode,
//     NewArena, Overflows) and Budget.
//   - source.go: the plan's source files, checked through package source;
//     each footer held only while its file is read.
//   - compile.go: spec × source schemas -> one tensor plan per tensor
//     (columns resolved in every file, classes, its kind, fill bytes).
//   - kind.go: the tensor kinds, one type per kind behind one interface
//     (outputs, cost, apply), and the table of kinds and their files;
//     kind_stack.go (stacked scalar columns), kind_list.go (fixed lists),
//     kind_bytes.go (strings hashed or padded).
//   - idset.go: the id bitmap (IDSet): a set of sample ids and the slot
//     of each (its rank among them).
//   - schedule.go: the schedule (column chunk tasks in task order, their
//     estimated cost, the row windows of a row group over the memory
//     limit, admission under the limit).
//   - decode.go, window.go: the decode workers and assembly of records,
//     a row group read in row windows by pqread's forward-only column
//     readers when it does not fit whole; each block of records goes
//     where the caller's RecordSink says (sink.go).
//   - apply.go, cast.go, logical.go: a decoded column's values into
//     records (Records): logical types (DECIMAL, INT96) turned into values
//     in one place (logical.go), then every dtype conversion's rounding
//     and range rule (cast.go).
//   - arena.go, jagged.go: jagged tensors (list.jagged): the values arena
//     and their transform.
//   - maps.go: map policies (SPEC.md §2.6) compiled into jagged plans or
//     one dense plan, the dense transform, and the check that the leaves
//     of one list or map agree row by row.
//   - bytes_jagged.go: jagged bytes (bytes.mode jagged), a string or
//     binary column's values kept whole as a jagged U8 tensor.
//   - image.go, ycc.go, exif.go, resample.go: images (SPEC.md §2.8):
//     decoding, colour conversion, EXIF orientation and the resampler,
//     images decoded in parallel within the decode workers and a share of
//     the memory limit.
//   - partition.go: hive partition values as tensors.
//   - packed.go, packed_spec.go, packed_groups.go, packlengths.go: packed
//     plans: the per-document spec, token lengths, documents decoded in
//     groups within a budget, packed rows built from them.
//   - materialize.go: samples decoded for a caller that holds them
//     (Program.Samples, Program.Hold, and Materialize and Hold, which
//     compile first): verify --deep.
//   - errors.go, hints.go: errors with their location, and hints.
//
// # Checks first
//
// Compile loads nothing lazily: every source file must still have the
// size and footer SHA-256 the plan recorded (ErrSourceChanged names the
// file), every footer must open with pqread, and every spec column must
// resolve in every file with a type that converts to its dtype and agrees
// across files (columns are matched by name, never by position; differing
// types need cast.widen). A caller that checks before it writes (convert
// before the output directory is touched) gets every such failure from
// Compile.
//
// # Stage 1: decode once
//
// Program.Decode decodes the members of an IDSet, a bitmap over [0, N)
// with a popcount prefix per 64-bit word; the compact rank of an id among
// the members is its slot. Each row group holding a member is read (the
// others are skipped: a partitioned plan reads only its own partition);
// each of the spec's column chunks in it is decoded with pqread,
// transformed (apply.go, cast.go) and written, for the wanted rows only,
// into records: one fixed-size record per member holding every output
// tensor's sample bytes back to back (so gathering a sample later touches
// one place; Records). Where the records go is the caller's RecordSink:
// assembled in place in memory (NewMemSink: convert's anonymous staging,
// HeldSamples), or built a block at a time in scratch and handed over
// (convert's spill). Either way the records hold the same bytes. A string
// column hashed into buckets (bytes.mode hash) is read in dictionary form
// where its pages allow (pqread.ReadColumnDict), so each distinct string
// is hashed once per column chunk. Column chunks are decoded in parallel
// (the decode workers) with the estimated bytes of decoded chunks in
// flight bounded by the memory given to Decode (Budget.Decode for a
// conversion). Data errors (nulls, list lengths, ranges, NaN policy,
// unsupported encodings, corrupt pages) all surface here, before any
// shard is written. Values too large for an F16, BF16 or F8 tensor are
// stored as ±Inf (±448 for F8_E4M3), counted per tensor
// (Program.Overflows), or refused with ErrValue under cast.overflow: error
// (cast.go).
//
// # Jagged tensors
//
// A jagged tensor (SPEC.md §2.3.1) has no fixed sample size, so its part of
// a staging record is a fixed reference, 16 bytes: the byte offset of the
// sample's values in the run's values arena and their count (u64 each,
// little-endian); the records keep their fixed size and everything above
// (idset slots, spill windows, gather) works on them unchanged. Before
// stage 1 every row group read gets, per jagged output tensor, a region
// of the arena sized from the footer: a column chunk holds at most as
// many values as level entries, which pqread.File.DecodedSize counts
// (arena.go, valuesBound), and pqread refuses a chunk with more. The
// worker assembling a row group writes its needed rows' values into its
// regions in row order (whole, in row windows, in memory or spilled
// alike), so workers never coordinate and the arena's contents, like the
// shards, do not depend on Jobs. The arena is anonymous memory when it and
// the staging records together fit half of MemoryLimit (only the pages written are
// touched), else OUT/.prep-tmp/<pid>/values.bin, reserved before stage 1
// like the spill file (counted in the free-space check and in ErrNoSpace's
// numbers) and written through a small buffer per region. Stage 2 gathers
// the references with the fixed samples, writes each jagged tensor's
// offsets slab from their counts and reads its values into the batch
// block (shardfmt's 2.0 layout, Geometry.BatchLayout) with one copy or
// pread per stretch of samples whose values lie next to each other in the
// arena, so memory stays bounded whatever the row lengths: a block may
// take at most max(MemoryLimit/4, 1 MiB) (a larger batch is refused naming
// epoch, rank, step and tensor), the blocks being built and written at
// once at most twice that, and a row whose values alone exceed a block's
// bound is refused in stage 1 naming file, column, row group and row. A
// shard without a jagged tensor is written exactly as before; the
// free-space check estimates a jagged shard's size from above (the
// arena's bytes per needed sample for every slot).
//
// # Maps and the leaves of one list
//
// A map policy compiles into plans over the map's leaves, which pqread
// reads as one-level lists sharing their map's offsets (ColumnInfo.Group,
// MapRole): without map.keys, two jagged plans, <name>.keys over the key
// leaf (key_dtype, or key_bytes hashing or padding string keys into the
// arena) and <name>.values over the value leaf (with <name>_mask and
// <name>_element_mask), so each is an ordinary jagged tensor of one
// column; with map.keys, one dense plan (mapDenseKind) of two columns,
// whose value column's transform reads the key column of the same rows
// (decoder.keyOf) and looks each key up in a map of the listed keys built
// at compile time, so a row costs its entries, not the number of keys
// listed. Tensors reading leaves of one Group (a map's key and value, the
// fields of a list of structs) must agree on every row's length and
// nullness: once the columns of a row group (or row window) are decoded,
// and before any transform, groupMismatch compares their Offsets and
// RowValid (one pass over the rows, usually one slices.Equal) and refuses
// a mismatch as pqread.ErrCorrupt naming file, group, both columns, row
// group and row. A windowed row group with such tasks in a run staging in
// memory is read as a spilled run reads it (every column's window at once,
// within the same memory bound) instead of one column at a time, so that
// the columns of a group are there together.
//
// # Memory
//
// Everything proportional to the data counts against one budget, the
// memory limit (Budget, budget.go, with its table of shares): a
// conversion's anonymous share and Go heap are convert's (convert/doc.go,
// Memory); within the heap, half is admitted live, the estimated bytes of
// decoded column chunks in flight in stage 1 (the memory given to
// Program.Decode) among them. Beyond the budget: the images decoding at
// once (Budget.Images of decoding memory together, each image's size
// checked from its header before it is decoded: image.go), the id bitmap
// (2 bits per source row), the page buffers of the pages being read, a
// long row's decode copies (below), and the program itself;
// BENCHMARKS.md (Memory limit) measures peak RSS against the limit plus
// its stated constant on long-row inputs.
// A row group is normally decoded whole (every needed column chunk of it at
// once, in parallel, so its records can be assembled). One whose needed
// column chunks together would take more than MemoryLimit (by the estimate
// of schedule.go), including a row group of a single column chunk, is instead
// read forward in row windows by one worker (Jobs such row groups at
// once): its needed rows are cut into windows whose columns take about
// half the limit over Jobs (at least one row each), and every column chunk
// is read once, from its first page to its last, by a pqread.ColumnReader
// (holding the window's rows and the rest of the page that ends it). With
// staging in memory each column chunk is read alone, window by window, its
// transform applied straight into the staging records, so one window of
// one column and one page are held; there a window of a list column is
// read in pieces of at most its share of the window's bytes in level
// entries (pqread.ColumnReader.NextWithin; a longer row is a piece alone),
// so a few long rows among short ones take their own length, not the
// window's rows times it. A spilled run builds each window's records
// whole, so it holds a piece of every column at once: the piece's rows
// are those every list column holds within its entry budget
// (pqread.ColumnReader.Peek, then NextWithin of that many rows), so the
// columns agree on its rows and long rows take their own length there too.
// A windowed row group is admitted at its estimate (its columns' entry
// budgets, at twice an entry's decoded bytes); before a page's body is
// read that takes a column past its budget (a row longer than it), the row
// group's admitted bytes grow to cover the column's entries at that rate
// (pqread.ColumnReader.OnPage), waiting for others' releases, and shrink
// once no reader holds them, so Jobs windowed row groups with long rows
// decode those rows about one at a time within the limit, not Jobs at
// once; waits are served in task order, and the first over the limit only
// when every holder or worker waits.
// A row of a list column holds at most MaxRowSlots level entries,
// lowered from pqread's default (16M) to the largest bound of the spec's
// list tensors: a jagged block's values for a jagged tensor, MemoryLimit
// over 22 bytes for a fixed list (truncated or padded, but decoded whole
// first); pqread refuses a longer row as its levels are decoded, naming
// file, column, row group and row. A row group that decodes to many times
// the limit, of many columns stacked into one tensor or of one embedding
// list column, thus converts within it, every page decoded once. The
// output and the errors are those of the whole row group (the first
// failing column in task order, a decode error anywhere in its chunk
// before a transform error of it, then its earliest row, with counts over
// the whole column chunk), found in the same forward pass: after a failure
// only the columns before it (and a column whose failure is a transform
// error) are read on.
// A column chunk's decoded size is estimated as the larger of the tensor's
// output per row and the footer's sizes (pqread.File.DecodedSize: values
// and levels of the source, such as whole strings hashed or padded to a
// few bytes). What remains beyond the limit is the page buffers (one
// page, bounded by the reader's page size limit, 256 MiB, per column read
// at once, and a page holds a whole row: a long row's page is at least its
// encoded size, so a piece holding one holds its page beside its values),
// and strings padded from a dictionary whose copies take more than the
// chunk's uncompressed size, which the footer does not tell. Garbage comes on top
// of the live bytes, within the Go heap's share (convert.Options.HeapLimit). A
// limit below
// MinMemoryLimit (1 MiB) is refused by prep convert and prep verify: it
// would cut row groups into windows of a few rows, slowly.
// Staging takes at most half of MemoryLimit: anonymous memory when it
// fits, else one spill window at a time (plus, under remainder pad, the records of the
// pad samples: fewer than a global batch per epoch; a partitioned plan's
// pads, which can be most of a rank's slots, are spilled like every other
// sample). Summary.PeakRSSBytes
// reports getrusage's peak RSS (column chunks are read page by page into
// pooled buffers through pqread's Input, never mapped);
// Summary.SpillBytes and SpillWindows say whether and how a run spilled.
// BENCHMARKS.md (Scaling and memory, long rows in row windows) gives the
// live heap convert's tests measure with long rows among short ones, in
// memory, spilled and under Jobs 4, and what it was before pieces and
// growing admission.
//
// # Column names
//
// Spec column names use pqread's syntax: a top-level column is its name; a
// nested field is the dot-joined field path ("a.b"); a dot or backslash
// inside a field name is escaped with a backslash (a top-level column named
// "a.b" is `a\.b`); a JSON array of field names (`["a.b"]`) is also
// accepted. LIST wrapper levels are not part of the name. An ambiguous name
// is an error.
package feature
