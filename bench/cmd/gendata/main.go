// Command gendata writes the benchmark inputs deterministically under a cache
// folder (default .cache/bench/data, never committed):
//
//	<dir>/<variant>.parquet   the 2,000,000-row file in four layouts
//	<dir>/big/part-NN.parquet 10 hard links of req-plain-snappy (the 10x input)
//	<dir>/small/part-NNNNN.parquet  10,000 files of 10 rows (the many-files input)
//	<dir>/wide/part-NN.parquet  16 files of 5,000 FLOAT columns and 64 rows (the wide-footer input)
//	<dir>/zipf-list.parquet   245,760 rows of a Zipf-skewed LIST<INT32> (the jagged-tensor input)
//	<dir>/long-i32.parquet    260 rows of 1,000,000 INT32 zeros, zstd (the convert memory-limit input)
//	<dir>/long-i64.parquet    40 rows of 1,000,000 INT64 zeros, zstd (the verify --deep memory-limit input)
//
// Files that already exist with the current generator stamp are kept, so a
// second run costs nothing.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync"

	"github.com/prepml/prep/bench/internal/gen"
)

// wideFiles is the number of files in wide/.
const wideFiles = 16

// stamp changes whenever the generator's output changes.
const stamp = "gendata v1"

func main() {
	dir := flag.String("dir", ".cache/bench/data", "output folder")
	rows := flag.Uint64("rows", 2_000_000, "rows per benchmark file")
	copies := flag.Int("copies", 10, "hard links of req-plain-snappy in big/ (the 10x input)")
	small := flag.Int("small", 10_000, "number of small files")
	smallRows := flag.Int("small-rows", 10, "rows per small file")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("gendata: ")

	if err := os.MkdirAll(*dir, 0o755); err != nil {
		log.Fatal(err)
	}
	want := fmt.Sprintf("%s rows=%d\n", stamp, *rows)
	stampPath := filepath.Join(*dir, "STAMP")
	if b, err := os.ReadFile(stampPath); err != nil || string(b) != want {
		for _, v := range gen.Variants {
			os.Remove(filepath.Join(*dir, v.Name+".parquet"))
		}
		os.RemoveAll(filepath.Join(*dir, "big"))
		os.RemoveAll(filepath.Join(*dir, "small"))
		os.RemoveAll(filepath.Join(*dir, "wide"))
		os.Remove(filepath.Join(*dir, "zipf-list.parquet"))
		os.Remove(filepath.Join(*dir, "long-i32.parquet"))
		os.Remove(filepath.Join(*dir, "long-i64.parquet"))
	}

	var wg sync.WaitGroup
	errs := make(chan error, len(gen.Variants)+5)
	sem := make(chan struct{}, 2)
	for _, v := range gen.Variants {
		p := filepath.Join(*dir, v.Name+".parquet")
		if _, err := os.Stat(p); err == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			log.Printf("writing %s (%d rows)", p, *rows)
			if err := gen.Write(p, v, 0, *rows); err != nil {
				errs <- err
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		log.Printf("writing %d small files", *small)
		if err := gen.SmallFiles(filepath.Join(*dir, "small"), *small, *smallRows); err != nil {
			errs <- err
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		log.Printf("writing %d wide files", wideFiles)
		if err := gen.WideFiles(filepath.Join(*dir, "wide"), wideFiles); err != nil {
			errs <- err
		}
	}()
	if p := filepath.Join(*dir, "zipf-list.parquet"); !exists(p) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			log.Printf("writing %s (%d rows)", p, gen.ZipfRows)
			if err := gen.WriteZipf(p); err != nil {
				errs <- err
			}
		}()
	}
	for _, l := range []struct {
		name string
		rows int
		wide bool
	}{{"long-i32.parquet", gen.LongI32Rows, false}, {"long-i64.parquet", gen.LongI64Rows, true}} {
		if p := filepath.Join(*dir, l.name); !exists(p) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				log.Printf("writing %s (%d rows of %d zeros)", p, l.rows, gen.LongLen)
				if err := gen.WriteLongZeroLists(p, l.rows, gen.LongLen, l.wide); err != nil {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		log.Fatal(err)
	}

	big := filepath.Join(*dir, "big")
	if err := os.MkdirAll(big, 0o755); err != nil {
		log.Fatal(err)
	}
	for k := range *copies {
		p := filepath.Join(big, fmt.Sprintf("part-%02d.parquet", k))
		if _, err := os.Stat(p); err == nil {
			continue
		}
		if err := os.Link(filepath.Join(*dir, "req-plain-snappy.parquet"), p); err != nil {
			log.Fatal(err)
		}
	}
	if err := os.WriteFile(stampPath, []byte(want), 0o644); err != nil {
		log.Fatal(err)
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
