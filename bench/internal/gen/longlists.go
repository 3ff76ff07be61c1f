package gen

import (
	"bufio"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
)

// The long-list inputs of the memory-limit rows: one REQUIRED list column
// "v" whose every row holds the same number of zero values, zstd
// compressed, all rows in one row group. Zeros compress to almost
// nothing (260 rows of 1,000,000 INT32 zeros take about 50 KB on disk,
// 1.04 GB decoded), so the file is small and the memory it takes to
// convert is all decoding.
const (
	// LongI32Rows x LongLen INT32 zeros: the convert memory input.
	LongI32Rows = 260
	// LongI64Rows x LongLen INT64 zeros: the verify --deep memory input.
	LongI64Rows = 40
	// LongLen is the number of values in every row of both inputs.
	LongLen = 1_000_000
)

type longI32Row struct {
	V []int32 `parquet:"v,list,zstd"`
}

type longI64Row struct {
	V []int64 `parquet:"v,list,zstd"`
}

// WriteLongZeroLists writes rows rows of n zeros each, LIST<INT32> (or
// LIST<INT64> when wide), to path, atomically, in one row group.
func WriteLongZeroLists(path string, rows, n int, wide bool) error {
	return writeAtomic(path, func(f io.Writer) error {
		bw := bufio.NewWriterSize(f, 1<<20)
		var err error
		if wide {
			err = writeLong(bw, []longI64Row{{V: make([]int64, n)}}, rows)
		} else {
			err = writeLong(bw, []longI32Row{{V: make([]int32, n)}}, rows)
		}
		if err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		return bw.Flush()
	})
}

func writeLong[T any](f io.Writer, row []T, rows int) error {
	w := parquet.NewGenericWriter[T](f, parquet.MaxRowsPerRowGroup(int64(rows)))
	for range rows {
		if _, err := w.Write(row); err != nil {
			return err
		}
	}
	return w.Close()
}
