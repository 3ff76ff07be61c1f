package pqread

import (
	"os"
	"testing"
)

func TestChunkRange(t *testing.T) {
	path := "../testdata/ml/venomx/embeddings.parquet"
	f, err := Open(path, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := os.Stat(path)
	var sum int64
	for _, ci := range f.Columns() {
		off, n := f.ChunkRange(0, ci)
		if off < 4 || n <= 0 || off+n > st.Size() {
			t.Errorf("%s: range [%d, %d+%d) outside the file of %d bytes", ci.Name, off, off, n, st.Size())
		}
		md := &f.meta.RowGroups[0].Columns[ci.Index].MetaData
		if n != md.TotalCompressedSize {
			t.Errorf("%s: length %d, footer total_compressed_size %d", ci.Name, n, md.TotalCompressedSize)
		}
		sum += n
	}
	if sum == 0 {
		t.Fatal("no column chunk")
	}
	if off, n := f.ChunkRange(1, f.Columns()[0]); off != 0 || n != 0 {
		t.Errorf("row group out of range: %d, %d", off, n)
	}
}
