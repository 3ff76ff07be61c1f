// Package pqread decodes Parquet column chunks at page level into dense,
// Arrow-like columns: one Column per (row group, leaf column).
//
// It is the correctness core of prep convert, so it owns the page loop
// itself: it reads each column chunk's pages through an Input (ReadAt into
// buffers it owns, one page at a time for a ColumnReader), walks every
// page header with a bounded thrift walker before parquet-go's format and
// thrift packages decode it, checks sizes
// against Limits before allocating, verifies page CRCs when present,
// decompresses with exact expected output sizes (SNAPPY, GZIP, ZSTD, BROTLI,
// LZ4_RAW, LZ4 in both Hadoop framing and raw block form), decodes
// repetition and definition levels (V1 and V2 data pages, RLE and the legacy
// BIT_PACKED level encoding) and values (PLAIN, RLE_DICTIONARY and
// PLAIN_DICTIONARY, RLE booleans, DELTA_BINARY_PACKED,
// DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY, BYTE_STREAM_SPLIT), and
// assembles rows across page boundaries. Values never go through
// parquet.Value or GenericReader.
//
// Fast paths, each decided from the page's own bytes and giving exactly
// what the general path gives: a page whose definition levels are repeated
// runs of the maximum level (an OPTIONAL column's page without nulls, as
// DuckDB, Arrow and Spark write it; at bit width 1 also bit-packed runs of
// ones) fills its levels without decoding or checking them one by one and
// holds a value per entry; levels of a bit width whose every value is at
// most the maximum are not range-checked one by one; a window without
// nulls is assembled without a validity pass; a compressed PLAIN page of
// fixed-width values whose levels are stored apart (data page V2, or no
// levels) decompresses straight into the column's memory.
//
// Two faults of parquet-go v0.32.0 are avoided by construction:
// LZ4_RAW pages can come back silently wrong there (upstream issue #608: the
// codec's reallocated output buffer is dropped), so pqread decompresses
// LZ4_RAW itself with github.com/pierrec/lz4/v4 into a buffer of exactly the
// page's uncompressed size and checks the decoded length; and its
// DELTA_BINARY_PACKED decoder returns wrong numbers without an error for
// INT32 miniblocks wider than 32 bits, so pqread decodes DELTA_BINARY_PACKED
// itself with wrapping two's-complement arithmetic (as the Parquet encoding
// spec requires), accepting widths up to 64 bits for both INT32 and INT64 and
// rejecting wider ones as corrupt.
//
// A Go panic inside decoding is recovered and reported as ErrCorrupt
// naming file, column and row group. Memory faults are never recovered:
// nothing is decoded from mapped memory, so none can come from the file.
//
// Column shapes decoded: REQUIRED and OPTIONAL scalars, including fields of
// (nested, optional) structs; and one level of repetition in every layout
// real writers produce: the 3-level LIST (optional or required list and
// element; DuckDB's fixed-size ARRAY is written this way), the 2-level
// legacy LIST (repeated primitive, or a repeated group named "array" or
// "<list>_tuple" or of several fields, per the backward-compatibility rules
// of the Parquet LogicalTypes.md), and a bare repeated field without LIST
// annotation; the key and value leaves of a MAP (MAP or legacy
// MAP_KEY_VALUE annotation, optional keys and a missing value field
// included), each a list per row (ColumnInfo.Group, MapRole); and every
// field of a list of structs, each a list per row; and two levels of
// repetition (lists of lists, in each of those layouts at either level, a
// map's value or a list-of-struct field that is itself a list included) as
// a Column of Depth 2. List rows may continue across pages. Not decoded
// (ReadColumn fails with ErrUnsupported and ColumnInfo.Unsupported names
// the column and says why): three or more repetition levels, maps inside
// lists or maps, encrypted files and column chunks stored in other files.
package pqread

import (
	"fmt"
	"slices"

	"github.com/parquet-go/parquet-go/format"
)

// Kind is the physical value representation of a decoded column. Logical
// annotations (decimal scale, FLOAT16, timestamp unit, ...) are described by
// ColumnInfo and applied by the caller.
type Kind int

// The kinds, one per Parquet physical type.
const (
	KindBool    Kind = iota + 1 // BOOLEAN: Column.Bool
	KindInt32                   // INT32: Column.Int32
	KindInt64                   // INT64: Column.Int64
	KindInt96                   // INT96: 12 bytes per value in Column.FixedData, as stored (little-endian nanoseconds of day, then Julian day)
	KindFloat32                 // FLOAT: Column.Float32, bit-exact (NaN payloads kept)
	KindFloat64                 // DOUBLE: Column.Float64, bit-exact (NaN payloads kept)
	KindBytes                   // BYTE_ARRAY: Column.Data + Column.ByteOffsets
	KindFixed                   // FIXED_LEN_BYTE_ARRAY: Column.FixedData, Column.Width bytes each
)

// String returns the Parquet physical type name of k.
func (k Kind) String() string {
	switch k {
	case KindBool:
		return "BOOLEAN"
	case KindInt32:
		return "INT32"
	case KindInt64:
		return "INT64"
	case KindInt96:
		return "INT96"
	case KindFloat32:
		return "FLOAT"
	case KindFloat64:
		return "DOUBLE"
	case KindBytes:
		return "BYTE_ARRAY"
	case KindFixed:
		return "FIXED_LEN_BYTE_ARRAY"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Limits bound what a file may make pqread allocate. A zero field takes its
// value from DefaultLimits, except MaxValueBytes where 0 means no limit.
// Exceeding a limit gives an error wrapping ErrLimit.
type Limits struct {
	// MaxPageBytes bounds a page's compressed and uncompressed size as
	// stated in its header, and also the number of values (levels included)
	// one page may declare, since each decodes to at least one byte.
	MaxPageBytes int64
	// MaxChunkBytes bounds a column chunk's total compressed size (the bytes
	// read from the file for one ReadColumn call).
	MaxChunkBytes int64
	// MaxFooterBytes bounds the footer (file metadata) length.
	MaxFooterBytes int64
	// MaxChunkValues bounds the level entries (values, nulls and empty
	// lists) of one column chunk; scalar chunks are also bounded by their
	// row group's row count, which is checked page by page.
	MaxChunkValues int64
	// MaxValueBytes bounds the length of one BYTE_ARRAY value; 0 = no limit.
	MaxValueBytes int64
	// MaxRowSlots bounds the level entries of one row of a list column:
	// its slots (values and null elements), and each empty or null inner
	// list of a list of lists. It is checked as each page's repetition
	// levels are decoded, before its values, so a row over it fails (with
	// file, column, row group and row) having grown memory by at most one
	// page past it.
	MaxRowSlots int64
}

// DefaultLimits are the limits used for zero fields of Limits.
var DefaultLimits = Limits{
	MaxPageBytes:   256 << 20,
	MaxChunkBytes:  2 << 30,
	MaxFooterBytes: 64 << 20,
	MaxChunkValues: 1 << 28,
	MaxValueBytes:  0,
	MaxRowSlots:    1 << 24,
}

func (l Limits) withDefaults() Limits {
	if l.MaxPageBytes <= 0 {
		l.MaxPageBytes = DefaultLimits.MaxPageBytes
	}
	if l.MaxChunkBytes <= 0 {
		l.MaxChunkBytes = DefaultLimits.MaxChunkBytes
	}
	if l.MaxFooterBytes <= 0 {
		l.MaxFooterBytes = DefaultLimits.MaxFooterBytes
	}
	if l.MaxChunkValues <= 0 {
		l.MaxChunkValues = DefaultLimits.MaxChunkValues
	}
	if l.MaxRowSlots <= 0 {
		l.MaxRowSlots = DefaultLimits.MaxRowSlots
	}
	if l.MaxValueBytes < 0 {
		l.MaxValueBytes = 0
	}
	return l
}

// ColumnInfo describes one leaf column of a file's schema.
//
// Name syntax (used by Name and accepted by File.Lookup): the user-visible
// field names from the root, joined by ".", where a "." or "\" inside a
// field name is escaped with a backslash. The synthetic wrapper levels of a
// LIST (the repeated "list"/"array"/"bag" group and its "element"/"item"
// child) are not part of the name, so a 3-level LIST, a 2-level legacy LIST,
// a bare repeated field and a DuckDB fixed-size ARRAY named emb are all
// "emb". Examples: top-level "x" is `x`; field b of struct a is `a.b`; a
// top-level column literally named "a.b" is `a\.b`. Lookup also accepts a
// JSON array of field names (`["a.b"]`, `["a","b"]`) and an exact top-level
// name when that is not ambiguous; see Lookup.
type ColumnInfo struct {
	Index    int      // leaf column index in the schema = column chunk index in each row group
	Path     []string // every schema element name from the root to the leaf, wrapper levels included (as in the footer's path_in_schema)
	Name     string   // the documented path syntax above, e.g. "emb", "a.b", `a\.b`
	Physical string   // BOOLEAN, INT32, INT64, INT96, FLOAT, DOUBLE, BYTE_ARRAY, FIXED_LEN_BYTE_ARRAY
	Kind     Kind     // the Kind ReadColumn returns for this column
	// Logical is the logical type, "" when there is none. Forms:
	// "STRING", "ENUM", "JSON", "BSON", "UUID", "DATE", "FLOAT16",
	// "INTERVAL", "NULL", "VARIANT", "GEOMETRY", "GEOGRAPHY",
	// "DECIMAL(p,s)", "INT(bits,signed)" e.g. "INT(8,true)",
	// "TIME(unit,utc)" and "TIMESTAMP(unit,utc)" with unit MILLIS, MICROS or
	// NANOS and utc true or false. Legacy converted types (UTF8, INT_8,
	// TIMESTAMP_MILLIS, ...) are mapped to the same forms.
	Logical   string
	Precision int    // DECIMAL precision, 0 otherwise
	Scale     int    // DECIMAL scale, 0 otherwise
	BitWidth  int    // INT(bits,...) width 8, 16, 32 or 64; 0 when not annotated
	Unsigned  bool   // INT(bits,false) / UINT_n: reinterpret Int32/Int64 bits as unsigned
	TimeUnit  string // MILLIS, MICROS or NANOS for TIME and TIMESTAMP, "" otherwise
	UTC       bool   // TIME / TIMESTAMP isAdjustedToUTC
	Width     int    // FIXED_LEN_BYTE_ARRAY width in bytes, 0 otherwise

	Nullable     bool // the row-level value (or the whole list) may be null
	List         bool // Depth >= 1: a list of values (or of lists) per row
	ElemNullable bool // list elements (the innermost values) may be null
	MaxDef       int  // maximum definition level
	MaxRep       int  // maximum repetition level

	// Depth is the number of repetition levels (lists) from the root to the
	// leaf: 0 for a scalar, 1 for a list (a map's key or value, a field of
	// a list of structs), 2 for a list of lists. Columns deeper than 2 are
	// Unsupported.
	Depth int
	// Group is, for a map's key or value leaf and for a field of a list of
	// structs, the Name of the map or list at the first repetition level
	// (map m: "m"; list of structs events: "events"; a bare repeated group
	// phone of struct p: "p.phone"); "" for other columns, whose Name is
	// their list's. Leaves with the same Group have the same Offsets in
	// every row group (the fields of one struct element are present or null
	// together).
	Group string
	// MapRole is "key" or "value" for the leaves of a map (a leaf under
	// the value field of a map whose values are structs is "value" too),
	// "" otherwise.
	MapRole string

	// Unsupported is non-empty when ReadColumn will fail with ErrUnsupported
	// for this column (more than two levels of lists, a map inside a list or
	// map); it names the column and says why.
	Unsupported string
}

// Equal reports whether c and d describe the same column in the same
// place: every field equal, Path element by element. Files written with
// one schema have equal columns, so a caller holding the columns of many
// such files can keep one copy.
func (c ColumnInfo) Equal(d ColumnInfo) bool {
	return c.Index == d.Index && c.Name == d.Name && slices.Equal(c.Path, d.Path) &&
		c.Physical == d.Physical && c.Kind == d.Kind && c.Logical == d.Logical &&
		c.Precision == d.Precision && c.Scale == d.Scale && c.BitWidth == d.BitWidth &&
		c.Unsigned == d.Unsigned && c.TimeUnit == d.TimeUnit && c.UTC == d.UTC && c.Width == d.Width &&
		c.Nullable == d.Nullable && c.List == d.List && c.ElemNullable == d.ElemNullable &&
		c.MaxDef == d.MaxDef && c.MaxRep == d.MaxRep && c.Depth == d.Depth &&
		c.Group == d.Group && c.MapRole == d.MapRole && c.Unsupported == d.Unsupported
}

// Column is one decoded column chunk: one row group of one leaf column.
// Values are dense per slot: null slots hold the zero value (zero bytes for
// KindBytes, Width zero bytes for KindFixed) so indices align.
//
// Scalar columns: there are Rows slots; RowValid[i] is false when row i is
// null.
//
// List columns (Info.Depth 1): row i's elements are the slots
// [Offsets[i], Offsets[i+1]). A null list (RowValid[i] false) and an empty
// list both have no slots; they differ only in RowValid. ElemValid[k] is
// false when slot k is a null element. RowValid and ElemValid are nil when
// nothing is null.
//
// Lists of lists (Info.Depth 2): row i holds the inner lists
// [Offsets[i], Offsets[i+1]), and inner list j the slots
// [InnerOffsets[j], InnerOffsets[j+1]). A null row list (RowValid[i]
// false) and an empty one hold no inner lists; a null inner list
// (ListValid[j] false) and an empty one hold no slots. ElemValid is per
// slot as for one level. ListValid is nil when no inner list is null.
type Column struct {
	Info      ColumnInfo
	Kind      Kind
	Rows      int
	RowValid  []bool  // len Rows, nil if no row is null
	Offsets   []int64 // lists only: len Rows+1, Offsets[0] = 0; into slots (Depth 1) or inner lists (Depth 2)
	ElemValid []bool  // lists only: len = number of slots, nil if no element is null

	InnerOffsets []int64 // Depth 2 only: len inner lists+1, InnerOffsets[0] = 0, into slots
	ListValid    []bool  // Depth 2 only: len inner lists, nil if no inner list is null

	Bool        []bool
	Int32       []int32
	Int64       []int64
	Float32     []float32
	Float64     []float64
	Data        []byte  // KindBytes payload, values back to back
	ByteOffsets []int64 // KindBytes: len slots+1, value k is Data[ByteOffsets[k]:ByteOffsets[k+1]]
	FixedData   []byte  // KindFixed / KindInt96: slots*Width bytes
	Width       int     // KindFixed / KindInt96: bytes per value (12 for INT96)

	// Dictionary form of a KindBytes column, only from ReadColumnDict: slot
	// k holds dictionary entry DictIndex[k] (0 for a null slot), entry e is
	// DictData[DictOffsets[e]:DictOffsets[e+1]], and Data and ByteOffsets
	// are nil. Every index is checked to be in range.
	DictIndex   []uint32
	DictData    []byte
	DictOffsets []int64
}

// Slots returns the number of value slots: Rows for scalar columns, the
// number of list elements for list columns (of inner list elements, over
// all inner lists, for lists of lists).
func (c *Column) Slots() int {
	if c.InnerOffsets != nil {
		return int(c.InnerOffsets[len(c.InnerOffsets)-1])
	}
	if c.Offsets != nil {
		return int(c.Offsets[len(c.Offsets)-1])
	}
	return c.Rows
}

// File is an opened Parquet file with a validated footer.
//
// Every byte is read through its Input (ReadAt) into buffers pqread owns:
// nothing is decoded from a mapping of the file, so a file truncated or
// replaced while it is read gives an error wrapping ErrChanged, never a
// memory fault. ReadColumn and ColumnReader are safe for concurrent use.
//
// File descriptors (Open only): Open reads the footer and closes its
// descriptor, so an open File holds none. The first read of a column chunk
// opens one descriptor (checking the file's size is unchanged), shared by
// all later and concurrent reads, and Close releases it; a File never
// holds more than one. Close must not run concurrently with a read.
// Descriptors are opened with os.Open and so have close-on-exec set.
type File struct {
	path    string
	in      Input       // where every byte is read from
	local   *localInput // in, when Open made it (Close releases its descriptor)
	size    int64
	lim     Limits
	meta    *format.FileMetaData
	dec     format.FooterDecoder // owns meta's memory
	dataEnd int64                // first byte of the footer: chunks must end at or before it
	footSum string               // Footer.SHA256 of the footer decoded

	leaves []*leaf
	cols   []ColumnInfo
	nodes  []SchemaNode
	rows   []int64
	total  int64
}

// Path returns the name given to OpenInput (the path given to Open): what
// errors print.
func (f *File) Path() string { return f.path }

// SetMaxValueBytes sets Limits.MaxValueBytes for the reads that follow
// (n <= 0: no limit), for a caller that learns the bound only after reading
// the schema. It must not run concurrently with a read of f.
func (f *File) SetMaxValueBytes(n int64) { f.lim.MaxValueBytes = max(0, n) }

// Size returns the file size in bytes at Open.
func (f *File) Size() int64 { return f.size }

// FooterSHA256 returns Footer.SHA256 (hex SHA-256 of the FileMetaData, its
// length and "PAR1") of the footer Open read and decoded, so a caller can
// check the file against a recorded footer without reading it again.
func (f *File) FooterSHA256() string { return f.footSum }

// DecodedSize estimates from the footer alone the bytes of memory that
// ReadColumn's Column for col in row group rowGroup takes while it is
// decoded: the values (fixed-width kinds: the chunk's value count times the
// value size, 1 byte for BOOLEAN, 12 for INT96; BYTE_ARRAY: the chunk's
// total_uncompressed_size plus an 8-byte offset per value, which
// underestimates strings copied out of a dictionary once per row), a byte
// per level entry for each kind of level and for validity, and an 8-byte
// list offset per row. Counts saturate at Limits.MaxChunkValues level
// entries, beyond which a chunk fails to read (and at 2^40). It returns 0 for a row
// group or column out of range.
func (f *File) DecodedSize(rowGroup int, col ColumnInfo) int64 {
	if rowGroup < 0 || rowGroup >= len(f.meta.RowGroups) || col.Index < 0 || col.Index >= len(f.leaves) {
		return 0
	}
	rg := &f.meta.RowGroups[rowGroup]
	md := &rg.Columns[col.Index].MetaData
	// A chunk of more level entries than Limits.MaxChunkValues fails to
	// read, so counts beyond it (a hostile footer's) saturate there, and
	// at 2^40 whatever the limit, so the sums below cannot overflow.
	n := min(max(0, md.NumValues), f.lim.MaxChunkValues, 1<<40)
	rows := min(max(0, rg.NumRows), n)
	var size int64
	switch col.Kind {
	case KindBool:
		size = n
	case KindInt32, KindFloat32:
		size = 4 * n
	case KindInt64, KindFloat64:
		size = 8 * n
	case KindInt96:
		size = 12 * n
	case KindFixed:
		size = int64(col.Width) * n
	case KindBytes:
		size = min(max(0, md.TotalUncompressedSize), 1<<50) + 8*n
	}
	if col.MaxDef > 0 {
		size += 2 * n // definition levels, validity
	}
	if col.MaxRep > 0 {
		size += n + 8*rows // repetition levels, list offsets
	}
	if col.MaxRep > 1 {
		size += 9 * n // inner list offsets and validity, at most one per level entry
	}
	return size
}

// NumRows returns the total number of rows over all row groups.
func (f *File) NumRows() int64 { return f.total }

// RowGroups returns the row count of each row group, in file order.
func (f *File) RowGroups() []int64 { return append([]int64(nil), f.rows...) }

// Columns returns the leaf columns in schema order (ColumnInfo.Index order).
func (f *File) Columns() []ColumnInfo {
	out := make([]ColumnInfo, len(f.cols))
	copy(out, f.cols)
	return out
}

// CreatedBy returns the footer's created_by string ("" if absent).
func (f *File) CreatedBy() string { return f.meta.CreatedBy }

// Close releases the file descriptor if a read opened one (Open only; an
// Input given to OpenInput is the caller's to close). It is safe to call
// more than once, and it does not end the File: a later read opens a
// descriptor again (checking the size is unchanged), so a pipeline may
// release descriptors between passes over many files.
func (f *File) Close() error {
	if f.local == nil {
		return nil
	}
	if err := f.local.close(); err != nil {
		return &Error{File: f.path, RowGroup: -1, Page: -1, Row: -1, Offset: -1, Err: err}
	}
	return nil
}

// Slice returns a copy of rows [lo, hi) of c as a Column of hi-lo rows:
// RowValid, and each slot of those rows (values, ElemValid, list Offsets
// rebased to 0, for lists of lists their inner lists' InnerOffsets rebased
// to 0 and ListValid, BYTE_ARRAY Data and ByteOffsets rebased to 0). A column in
// dictionary form keeps its dictionary (DictData and DictOffsets are
// shared, not copied) and copies its DictIndex slots. Nothing of the result
// aliases c except the dictionary, so c can be dropped while the slice is
// kept. It panics unless 0 <= lo <= hi <= c.Rows.
func (c *Column) Slice(lo, hi int) *Column {
	if lo < 0 || hi < lo || hi > c.Rows {
		panic(fmt.Sprintf("pqread: Slice(%d, %d) of a column of %d rows", lo, hi, c.Rows))
	}
	s := &Column{Info: c.Info, Kind: c.Kind, Rows: hi - lo, Width: c.Width,
		DictData: c.DictData, DictOffsets: c.DictOffsets}
	s.RowValid = clone(c.RowValid, lo, hi)
	first, end := lo, hi // slot range
	if c.Offsets != nil {
		first, end = int(c.Offsets[lo]), int(c.Offsets[hi])
		s.Offsets = rebase(c.Offsets, lo, hi)
		if c.InnerOffsets != nil { // [first, end) are inner lists
			s.InnerOffsets = rebase(c.InnerOffsets, first, end)
			s.ListValid = clone(c.ListValid, first, end)
			first, end = int(c.InnerOffsets[first]), int(c.InnerOffsets[end])
		}
		s.ElemValid = clone(c.ElemValid, first, end)
	}
	s.Bool = clone(c.Bool, first, end)
	s.Int32 = clone(c.Int32, first, end)
	s.Int64 = clone(c.Int64, first, end)
	s.Float32 = clone(c.Float32, first, end)
	s.Float64 = clone(c.Float64, first, end)
	s.DictIndex = clone(c.DictIndex, first, end)
	if c.FixedData != nil {
		s.FixedData = clone(c.FixedData, first*c.Width, end*c.Width)
	}
	if c.ByteOffsets != nil {
		b0 := c.ByteOffsets[first]
		s.ByteOffsets = make([]int64, end-first+1)
		for i := range s.ByteOffsets {
			s.ByteOffsets[i] = c.ByteOffsets[first+i] - b0
		}
		s.Data = clone(c.Data, int(b0), int(c.ByteOffsets[end]))
	}
	return s
}

// rebase returns offsets[lo:hi+1] less offsets[lo].
func rebase(offsets []int64, lo, hi int) []int64 {
	out := make([]int64, hi-lo+1)
	for i := range out {
		out[i] = offsets[lo+i] - offsets[lo]
	}
	return out
}

// clone copies v[lo:hi], nil when v is nil.
func clone[T any](v []T, lo, hi int) []T {
	if v == nil {
		return nil
	}
	return append(make([]T, 0, hi-lo), v[lo:hi]...)
}
