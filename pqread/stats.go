package pqread

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
// range.
func (f *File) Stats(rowGroup int, col ColumnInfo) ChunkStats {
	if rowGroup < 0 || rowGroup >= len(f.meta.RowGroups) || col.Index < 0 || col.Index >= len(f.meta.RowGroups[rowGroup].Columns) {
		return ChunkStats{}
	}
	st := f.meta.RowGroups[rowGroup].Columns[col.Index].MetaData.Statistics
	if st.MinValue == nil || st.MaxValue == nil {
		return ChunkStats{NullCount: st.NullCount}
	}
	// Copies: the footer's memory is released with the File.
	return ChunkStats{Min: append([]byte{}, st.MinValue...), Max: append([]byte{}, st.MaxValue...), NullCount: st.NullCount}
}
