// Package pqread decodes Parquet column chunks at page level into dense,
// Arrow-like columns. STUB: contract only.
package pqread

// Kind is the value representation of a decoded column.
type Kind int

const (
	KindBool Kind = iota + 1
	KindInt32
	KindInt64
	KindInt96 // 12 bytes per value in FixedData
	KindFloat32
	KindFloat64
	KindBytes // variable length: Data + ByteOffsets
	KindFixed // fixed length: FixedData, Width bytes each
)

// Limits bound what a file may make us allocate.
type Limits struct {
	MaxPageBytes  int64 // largest uncompressed page accepted
	MaxValueBytes int64 // largest BYTE_ARRAY value accepted (0 = no limit)
}

// ColumnInfo describes one leaf column.
type ColumnInfo struct {
	Index          int      // leaf column index in the schema
	Path           []string // field names from the root
	Name           string   // documented path syntax, e.g. "a.b" or "emb"
	Physical       string   // BOOLEAN, INT32, INT64, INT96, FLOAT, DOUBLE, BYTE_ARRAY, FIXED_LEN_BYTE_ARRAY
	Logical        string   // e.g. "DECIMAL(9,2)", "FLOAT16", "STRING", "" when none
	Precision      int      // DECIMAL precision, 0 otherwise
	Scale          int      // DECIMAL scale
	Width          int      // FIXED_LEN_BYTE_ARRAY width
	Nullable       bool     // the row-level value may be null
	List           bool     // one level of repetition: a list per row
	ElemNullable   bool     // list elements may be null
}

// Column is one decoded column chunk (one row group of one leaf column).
// Values are dense per slot: null slots hold a zero value so indices align.
type Column struct {
	Info      ColumnInfo
	Kind      Kind
	Rows      int
	RowValid  []bool  // len Rows, nil if no row is null
	Offsets   []int64 // lists only: len Rows+1, row i's elements are [Offsets[i], Offsets[i+1])
	ElemValid []bool  // lists only: len = number of elements, nil if no element is null

	Bool        []bool
	Int32       []int32
	Int64       []int64
	Float32     []float32
	Float64     []float64
	Data        []byte  // KindBytes payload
	ByteOffsets []int64 // KindBytes: len values+1
	FixedData   []byte  // KindFixed / KindInt96
	Width       int     // KindFixed / KindInt96 bytes per value
}

// File is an opened Parquet file with a validated footer.
type File struct{}

// Open opens path and validates its footer; errors name the file.
func Open(path string, lim Limits) (*File, error) { panic("unimplemented") }

// Close releases the file.
func (f *File) Close() error { panic("unimplemented") }

// RowGroups returns the row count of each row group.
func (f *File) RowGroups() []int64 { panic("unimplemented") }

// Columns returns the leaf columns in schema order.
func (f *File) Columns() []ColumnInfo { panic("unimplemented") }

// Lookup resolves a column name by the documented path syntax.
func (f *File) Lookup(name string) (ColumnInfo, error) { panic("unimplemented") }

// ReadColumn decodes one column chunk.
func (f *File) ReadColumn(rowGroup int, col ColumnInfo) (*Column, error) { panic("unimplemented") }
