package pqread

// ChunkRange returns the byte range [off, off+n) of the column chunk of col
// in rowGroup as the footer records it (from the dictionary page, when
// there is one, through the last data page): the bytes ReadColumn reads.
// n is 0 for a chunk without values, one stored in another file, or a row
// group or column out of range. Open checked every range it returns to lie
// inside the file's data region.
func (f *File) ChunkRange(rowGroup int, col ColumnInfo) (off, n int64) {
	if rowGroup < 0 || rowGroup >= len(f.meta.RowGroups) || col.Index < 0 || col.Index >= len(f.leaves) {
		return 0, 0
	}
	cc := &f.meta.RowGroups[rowGroup].Columns[col.Index]
	if cc.FilePath != "" || cc.MetaData.NumValues == 0 {
		return 0, 0
	}
	return chunkRange(&cc.MetaData)
}
