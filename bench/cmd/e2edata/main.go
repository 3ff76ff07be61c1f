// Command e2edata writes the recsys-like Parquet input of the end-to-end
// training study (bench/e2e/train_e2e.py): per row, 13 dense FLOAT features
// d00..d12, 26 hashed categorical ids c00..c25 (INT64 in [0, Buckets)), a
// variable-length history list hist (LIST<INT64> of 1 to 20 ids, the
// embedding list) and a FLOAT label, in row groups of 262,144 rows, Snappy.
// Values are a pure function of the row index (SplitMix64), so every run
// writes the same bytes:
//
//	go run ./cmd/e2edata -o /tmp/e2e/data -rows 4000000 -files 4
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync"

	"github.com/parquet-go/parquet-go"
)

// Buckets is the number of hashed categorical ids (and history ids).
const Buckets = 100_000

// MaxHist is the longest history list; train_e2e.py's spec pads to it.
const MaxHist = 20

type sample struct {
	D00   float32 `parquet:"d00"`
	D01   float32 `parquet:"d01"`
	D02   float32 `parquet:"d02"`
	D03   float32 `parquet:"d03"`
	D04   float32 `parquet:"d04"`
	D05   float32 `parquet:"d05"`
	D06   float32 `parquet:"d06"`
	D07   float32 `parquet:"d07"`
	D08   float32 `parquet:"d08"`
	D09   float32 `parquet:"d09"`
	D10   float32 `parquet:"d10"`
	D11   float32 `parquet:"d11"`
	D12   float32 `parquet:"d12"`
	C00   int64   `parquet:"c00"`
	C01   int64   `parquet:"c01"`
	C02   int64   `parquet:"c02"`
	C03   int64   `parquet:"c03"`
	C04   int64   `parquet:"c04"`
	C05   int64   `parquet:"c05"`
	C06   int64   `parquet:"c06"`
	C07   int64   `parquet:"c07"`
	C08   int64   `parquet:"c08"`
	C09   int64   `parquet:"c09"`
	C10   int64   `parquet:"c10"`
	C11   int64   `parquet:"c11"`
	C12   int64   `parquet:"c12"`
	C13   int64   `parquet:"c13"`
	C14   int64   `parquet:"c14"`
	C15   int64   `parquet:"c15"`
	C16   int64   `parquet:"c16"`
	C17   int64   `parquet:"c17"`
	C18   int64   `parquet:"c18"`
	C19   int64   `parquet:"c19"`
	C20   int64   `parquet:"c20"`
	C21   int64   `parquet:"c21"`
	C22   int64   `parquet:"c22"`
	C23   int64   `parquet:"c23"`
	C24   int64   `parquet:"c24"`
	C25   int64   `parquet:"c25"`
	Hist  []int64 `parquet:"hist,list"`
	Label float32 `parquet:"label"`
}

func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func hash(row uint64, col int) uint64 { return mix(row*64 + uint64(col)) }

// dense is in [-1, 1).
func dense(row uint64, j int) float32 { return float32(hash(row, j)>>40)/float32(1<<23) - 1 }

func cat(row uint64, j int) int64 { return int64(hash(row, 16+j) % Buckets) }

func fill(r *sample, row uint64) {
	r.D00 = dense(row, 0)
	r.D01 = dense(row, 1)
	r.D02 = dense(row, 2)
	r.D03 = dense(row, 3)
	r.D04 = dense(row, 4)
	r.D05 = dense(row, 5)
	r.D06 = dense(row, 6)
	r.D07 = dense(row, 7)
	r.D08 = dense(row, 8)
	r.D09 = dense(row, 9)
	r.D10 = dense(row, 10)
	r.D11 = dense(row, 11)
	r.D12 = dense(row, 12)
	r.C00 = cat(row, 0)
	r.C01 = cat(row, 1)
	r.C02 = cat(row, 2)
	r.C03 = cat(row, 3)
	r.C04 = cat(row, 4)
	r.C05 = cat(row, 5)
	r.C06 = cat(row, 6)
	r.C07 = cat(row, 7)
	r.C08 = cat(row, 8)
	r.C09 = cat(row, 9)
	r.C10 = cat(row, 10)
	r.C11 = cat(row, 11)
	r.C12 = cat(row, 12)
	r.C13 = cat(row, 13)
	r.C14 = cat(row, 14)
	r.C15 = cat(row, 15)
	r.C16 = cat(row, 16)
	r.C17 = cat(row, 17)
	r.C18 = cat(row, 18)
	r.C19 = cat(row, 19)
	r.C20 = cat(row, 20)
	r.C21 = cat(row, 21)
	r.C22 = cat(row, 22)
	r.C23 = cat(row, 23)
	r.C24 = cat(row, 24)
	r.C25 = cat(row, 25)
	n := 1 + int(hash(row, 60)%MaxHist)
	r.Hist = r.Hist[:0]
	for k := range n {
		r.Hist = append(r.Hist, int64(mix(row*MaxHist+uint64(k)+1<<40)%Buckets))
	}
	// A label the model can learn: a noisy threshold on a few features.
	score := r.D00 + 0.5*r.D01 - 0.25*r.D02 + float32(r.C00%7)/7 - 0.5
	noise := float32(hash(row, 61)>>40)/float32(1<<24) - 0.5
	if score+noise > 0 {
		r.Label = 1
	} else {
		r.Label = 0
	}
}

func write(path string, first, n uint64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := parquet.NewGenericWriter[sample](f, parquet.Compression(&parquet.Snappy), parquet.MaxRowsPerRowGroup(262144))
	buf := make([]sample, 8192)
	for done := uint64(0); done < n; {
		k := min(uint64(len(buf)), n-done)
		for i := range k {
			fill(&buf[i], first+done+i)
		}
		if _, err := w.Write(buf[:k]); err != nil {
			f.Close()
			return err
		}
		done += k
	}
	if err := w.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func main() {
	out := flag.String("o", "e2e-data", "output folder")
	rows := flag.Uint64("rows", 4_000_000, "rows in all")
	files := flag.Int("files", 4, "files (written in parallel)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("e2edata: ")
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	per := (*rows + uint64(*files) - 1) / uint64(*files)
	var wg sync.WaitGroup
	errs := make(chan error, *files)
	for i := range *files {
		first := uint64(i) * per
		if first >= *rows {
			break
		}
		n := min(per, *rows-first)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := write(filepath.Join(*out, fmt.Sprintf("part-%02d.parquet", i)), first, n); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		log.Fatal(err)
	}
}
