package pqread

import "github.com/parquet-go/parquet-go/format"

// ChunkStats is what a column chunk's footer statistics say (Parquet
// Statistics, min_value and max_value only: the deprecated min and max
// fields were ordered signed, which is wrong for text).
type ChunkStats struct {
	// Min and Max are min_value and max_value in PLAIN encoding (byte
	// arrays without their length prefix); nil when the writer gave none
	// (an all-null chunk, or no statistics). For byte arrays they may be
	// truncated bounds: Min ≤ every value ≤ Max still holds.
	Min, Max []byte
	// NullCount is null_count, or 0 when absent: a 0 does not prove the
	// chunk has no null.
	NullCount int64
}

// Stats returns the statistics of the column chunk of col in rowGroup,
// from the footer (no read). It returns zero ChunkStats for an index out of
// range. Min and Max are nil when the file does not declare the column's
// order as its type's (column_orders, TypeDefinedOrder): the format leaves
// min_value and max_value undefined without it.
func (f *File) Stats(rowGroup int, col ColumnInfo) ChunkStats {
	if rowGroup < 0 || rowGroup >= len(f.meta.RowGroups) || col.Index < 0 || col.Index >= len(f.meta.RowGroups[rowGroup].Columns) {
		return ChunkStats{}
	}
	st := f.meta.RowGroups[rowGroup].Columns[col.Index].MetaData.Statistics
	if st.MinValue == nil || st.MaxValue == nil || !f.typeOrdered(col) {
		return ChunkStats{NullCount: st.NullCount}
	}
	// Copies: the footer's memory is released with the File.
	return ChunkStats{Min: append([]byte{}, st.MinValue...), Max: append([]byte{}, st.MaxValue...), NullCount: st.NullCount}
}

// typeOrdered reports whether the footer's column_orders gives col the
// order of its type (TypeDefinedOrder), the only order min_value and
// max_value (and a page index's bounds) are defined in; parquet.thrift:
// "Without column_orders, the meaning of the min_value and max_value
// fields ... is undefined".
func (f *File) typeOrdered(col ColumnInfo) bool {
	orders := f.meta.ColumnOrders
	if col.Index < 0 || col.Index >= len(orders) {
		return false
	}
	_, ok := orders[col.Index].Value.(*format.TypeDefinedOrder)
	return ok
}
