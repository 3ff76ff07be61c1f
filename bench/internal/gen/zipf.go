package gen

import (
	"io"
	"math/rand/v2"

	"github.com/parquet-go/parquet-go"
)

// The Zipf-skewed list input of the jagged-tensor rows: column hist is a
// LIST<INT32> whose row lengths follow a Zipf law over 1..ZipfMaxLen (the
// law of gpuload's BenchmarkHostDeliveryJaggedRatio: s = 1.7, v = 2, mean
// about 21), so most rows are short and a few are near 1,024 values.
const (
	// ZipfRows is 30 global batches of 8,192 (the convert plan's), so every
	// row lands in a shard exactly once under remainder drop.
	ZipfRows            = 30 * 8192
	ZipfRowsPerRowGroup = ZipfRows / 5
	ZipfMaxLen          = 1024
)

// ZipfRow is one row of the Zipf list input.
type ZipfRow struct {
	ID   int64   `parquet:"id"`
	Hist []int32 `parquet:"hist,list"`
}

// ZipfLen returns the length of row i's hist list, in 1..ZipfMaxLen: one
// Zipf draw from a PCG seeded by Hash(i, 48), so any row's length is known
// without the others.
func ZipfLen(i uint64) int {
	z := rand.NewZipf(rand.New(rand.NewPCG(Hash(i, 48), 0)), 1.7, 2, ZipfMaxLen-1)
	return int(z.Uint64()) + 1
}

// ZipfValue returns element j of row i's hist list.
func ZipfValue(i uint64, j int) int32 { return int32(Hash(i, uint64(64+j))) }

// ZipfValues returns the number of hist values over all ZipfRows rows.
func ZipfValues() int64 {
	var n int64
	for i := range uint64(ZipfRows) {
		n += int64(ZipfLen(i))
	}
	return n
}

// WriteZipf writes the Zipf list input to path (REQUIRED columns, PLAIN,
// snappy, row groups of ZipfRowsPerRowGroup), atomically.
func WriteZipf(path string) error {
	return writeAtomic(path, func(f io.Writer) error {
		w := parquet.NewGenericWriter[ZipfRow](f, parquet.Compression(&parquet.Snappy), parquet.MaxRowsPerRowGroup(ZipfRowsPerRowGroup))
		batch := make([]ZipfRow, 4096)
		for first := uint64(0); first < ZipfRows; first += uint64(len(batch)) {
			for k := range batch {
				i := first + uint64(k)
				h := make([]int32, ZipfLen(i))
				for j := range h {
					h[j] = ZipfValue(i, j)
				}
				batch[k] = ZipfRow{ID: int64(i), Hist: h}
			}
			if _, err := w.Write(batch); err != nil {
				return err
			}
		}
		return w.Close()
	})
}
