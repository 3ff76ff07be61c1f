// Command genv1 writes the source file of testdata/shards/spec-v1.
package main

import (
	"fmt"
	"os"

	"github.com/parquet-go/parquet-go"
)

type row struct {
	ID    int64   `parquet:"id"`
	X     float32 `parquet:"x"`
	Label string  `parquet:"label,dict"`
}

func main() {
	rows := make([]row, 40)
	for i := range rows {
		rows[i] = row{int64(i), float32(i) / 8, fmt.Sprintf("L%d", i%5)}
	}
	f, _ := os.Create(os.Args[1])
	w := parquet.NewGenericWriter[row](f, parquet.MaxRowsPerRowGroup(16))
	w.Write(rows)
	w.Close()
	f.Close()
}
