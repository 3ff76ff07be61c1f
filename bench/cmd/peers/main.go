// Command peers runs one measurement of a peer reader or a machine limit and
// prints a result line (bench/internal/result) for the driver:
//
//	peers info FILE                 footer summary (rows, sizes, encodings)
//	peers pqarrow FILE              arrow-go pqarrow: all columns into Arrow arrays (ReadTable, Parallel)
//	peers generic FILE              parquet-go GenericReader into structs, one reader per row group, GOMAXPROCS workers
//	peers decompress FILE           one core: snappy/zstd (klauspost/compress) decode of every compressed page region of FILE
//	peers memcpy [-mb N] [-reps R]  one core: copy() bandwidth between two warm N MiB buffers
//	peers readfiles PATH...         plain sequential read (4 MiB read(2) calls) of the files, folders recursive, sorted
//	peers crcfiles [-mode M] PATH...
//	                                one core: CRC-32C of every byte of the files, read by pread or through a
//	                                mapping (mmap, populate, seq, popread: crcfiles.go)
//	peers writefiles -dir D [-mb N] [-files K]
//	                                crash-safe write of N MiB as K new files in D, as convert writes its
//	                                shards: 1 MiB write(2) calls, writeback started every 8 MiB
//	                                (sync_file_range), fsync and close each file, fsync D; GOMAXPROCS
//	                                writers; the files are removed after the timed region
//
// For pqarrow and generic, bytes is the sum of the file's column chunk
// total_uncompressed_size (the decoded Parquet bytes, the same numerator as
// prep convert); for decompress the decompressed bytes; for memcpy the bytes
// copied; for readfiles and crcfiles the bytes read; for writefiles the bytes
// written.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"golang.org/x/sys/unix"

	"github.com/prepml/prep/bench/internal/gen"
	"github.com/prepml/prep/bench/internal/pages"
	"github.com/prepml/prep/bench/internal/result"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("peers: ")
	if len(os.Args) < 2 {
		log.Fatal("usage: peers info|pqarrow|generic|decompress|memcpy|readfiles|crcfiles|writefiles ...")
	}
	cmd, args := os.Args[1], os.Args[2:]
	var err error
	switch cmd {
	case "info":
		err = info(args)
	case "pqarrow":
		err = pqarrowRead(args)
	case "generic":
		err = genericRead(args)
	case "decompress":
		err = decompress(args)
	case "memcpy":
		err = memcpy(args)
	case "readfiles":
		err = readFiles(args)
	case "crcfiles":
		err = crcFiles(args)
	case "writefiles":
		err = writeFiles(args)
	default:
		err = fmt.Errorf("unknown command %q", cmd)
	}
	if err != nil {
		log.Fatal(err)
	}
}

func oneFile(args []string) (string, pages.Info, error) {
	if len(args) != 1 {
		return "", pages.Info{}, errors.New("want exactly one file")
	}
	in, err := pages.Stat(args[0])
	return args[0], in, err
}

func info(args []string) error {
	_, in, err := oneFile(args)
	if err != nil {
		return err
	}
	fmt.Printf("rows %d, row groups %d, compressed %d B, uncompressed %d B\n", in.Rows, in.RowGroups, in.CompressedBytes, in.UncompressedBytes)
	for _, c := range in.Columns {
		fmt.Println(" ", c)
	}
	return nil
}

func pqarrowRead(args []string) error {
	path, in, err := oneFile(args)
	if err != nil {
		return err
	}
	start := time.Now()
	rdr, err := file.OpenParquetFile(path, false)
	if err != nil {
		return err
	}
	defer rdr.Close()
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{Parallel: true, BatchSize: 64 << 10}, memory.DefaultAllocator)
	if err != nil {
		return err
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		return err
	}
	rows := tbl.NumRows()
	var sum uint64
	for i := range int(tbl.NumCols()) {
		sum += uint64(tbl.Column(i).Len())
	}
	tbl.Release()
	result.Print(result.Result{Rows: rows, Bytes: in.UncompressedBytes, Seconds: time.Since(start).Seconds(), Checksum: sum})
	return nil
}

func genericRead(args []string) error {
	path, in, err := oneFile(args)
	if err != nil {
		return err
	}
	start := time.Now()
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		return err
	}
	optional := pf.Schema().Fields()[0].Optional()
	rgs := pf.RowGroups()
	var (
		mu      sync.Mutex
		rows    int64
		sum     uint64
		firstEr error
		wg      sync.WaitGroup
	)
	next := make(chan parquet.RowGroup)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for rg := range next {
				var n int64
				var s uint64
				var err error
				if optional {
					n, s, err = readGroup[gen.OptRow](rg, func(r *gen.OptRow) uint64 {
						if r.ID == nil {
							return 0
						}
						return uint64(*r.ID) + uint64(len(r.Emb))
					})
				} else {
					n, s, err = readGroup[gen.ReqRow](rg, func(r *gen.ReqRow) uint64 { return uint64(r.ID) + uint64(len(r.Emb)) })
				}
				mu.Lock()
				rows += n
				sum += s
				if err != nil && firstEr == nil {
					firstEr = err
				}
				mu.Unlock()
			}
		})
	}
	for _, rg := range rgs {
		next <- rg
	}
	close(next)
	wg.Wait()
	if firstEr != nil {
		return firstEr
	}
	result.Print(result.Result{Rows: rows, Bytes: in.UncompressedBytes, Seconds: time.Since(start).Seconds(), Checksum: sum})
	return nil
}

func readGroup[T any](rg parquet.RowGroup, check func(*T) uint64) (int64, uint64, error) {
	r := parquet.NewGenericRowGroupReader[T](rg)
	defer r.Close()
	buf := make([]T, 1024)
	var rows int64
	var sum uint64
	for {
		n, err := r.Read(buf)
		for i := range n {
			sum += check(&buf[i])
		}
		rows += int64(n)
		if err == io.EOF {
			return rows, sum, nil
		}
		if err != nil {
			return rows, sum, err
		}
	}
}

func decompress(args []string) error {
	if len(args) != 1 {
		return errors.New("want exactly one file")
	}
	ps, err := pages.Read(args[0])
	if err != nil {
		return err
	}
	maxUnc := 0
	for _, p := range ps {
		maxUnc = max(maxUnc, p.Uncompressed)
	}
	dst := make([]byte, maxUnc)
	zd, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return err
	}
	defer zd.Close()
	var total int64
	var sum uint64
	codecs := map[format.CompressionCodec]bool{}
	start := time.Now()
	for _, p := range ps {
		var out []byte
		switch p.Codec {
		case format.Snappy:
			out, err = snappy.Decode(dst, p.Compressed)
		case format.Zstd:
			out, err = zd.DecodeAll(p.Compressed, dst[:0])
		case format.Uncompressed:
			out = p.Compressed
		default:
			return fmt.Errorf("codec %v not measured", p.Codec)
		}
		if err != nil {
			return fmt.Errorf("decompressing a %v page: %w", p.Codec, err)
		}
		if len(out) != p.Uncompressed {
			return fmt.Errorf("%v page: decompressed %d bytes, header says %d", p.Codec, len(out), p.Uncompressed)
		}
		codecs[p.Codec] = true
		total += int64(len(out))
		if len(out) > 0 {
			sum += uint64(out[len(out)-1])
		}
	}
	sec := time.Since(start).Seconds()
	var names []string
	for c := range codecs {
		names = append(names, c.String())
	}
	sort.Strings(names)
	result.Print(result.Result{Bytes: total, Seconds: sec, Checksum: sum, Extra: fmt.Sprintf("%d pages, %v", len(ps), names)})
	return nil
}

func memcpy(args []string) error {
	fl := flag.NewFlagSet("memcpy", flag.ExitOnError)
	mb := fl.Int("mb", 256, "buffer size in MiB")
	reps := fl.Int("reps", 8, "copies")
	fl.Parse(args)
	n := *mb << 20
	src := make([]byte, n)
	dst := make([]byte, n)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src) // fault both buffers in before timing
	start := time.Now()
	for range *reps {
		copy(dst, src)
	}
	sec := time.Since(start).Seconds()
	result.Print(result.Result{Bytes: int64(n) * int64(*reps), Seconds: sec, Checksum: uint64(dst[n-1])})
	return nil
}

// expand lists the regular files under paths (folders recursively), sorted.
func expand(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		err := filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type().IsRegular() {
				files = append(files, q)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Strings(files)
	return files, nil
}

func readFiles(args []string) error {
	files, err := expand(args)
	if err != nil {
		return err
	}
	buf := make([]byte, 4<<20)
	var total int64
	var sum uint64
	start := time.Now()
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		for {
			n, err := f.Read(buf)
			total += int64(n)
			if n > 0 {
				sum += uint64(buf[n-1])
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				f.Close()
				return err
			}
		}
		f.Close()
	}
	result.Print(result.Result{Bytes: total, Seconds: time.Since(start).Seconds(), Checksum: sum, Extra: fmt.Sprintf("%d files", len(files))})
	return nil
}

// writeFiles measures the disk's crash-safe write rate the way convert's
// write stage uses it (shardfmt.Writer): every file written with 1 MiB
// write(2) calls, writeback started every 8 MiB so the final fsync waits for
// little, then fsync and close, and the folder fsynced at the end. The data
// is pseudo-random, so a compressing or deduplicating layer saves nothing.
func writeFiles(args []string) error {
	fl := flag.NewFlagSet("writefiles", flag.ExitOnError)
	dir := fl.String("dir", "", "folder to write the files in (created; must be on the disk measured)")
	mb := fl.Int("mb", 229, "total MiB to write")
	files := fl.Int("files", 8, "number of files the total is split across")
	fl.Parse(args)
	if *dir == "" || *files < 1 || *mb < 1 {
		return errors.New("writefiles: want -dir, -mb >= 1 and -files >= 1")
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	x := uint64(0x9e3779b97f4a7c15)
	for i := range buf {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		buf[i] = byte(x)
	}
	total := int64(*mb) << 20
	per := total / int64(*files)
	paths := make([]string, *files)
	for i := range paths {
		paths[i] = filepath.Join(*dir, fmt.Sprintf("probe-%03d.bin", i))
		os.Remove(paths[i])
	}
	defer func() {
		for _, p := range paths {
			os.Remove(p)
		}
	}()
	writeOne := func(p string) error {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		var off, kicked int64
		for off < per {
			n := min(int64(len(buf)), per-off)
			if _, err := f.Write(buf[:n]); err != nil {
				return err
			}
			off += n
			if off-kicked >= 8<<20 {
				if err := unix.SyncFileRange(int(f.Fd()), kicked, off-kicked, unix.SYNC_FILE_RANGE_WRITE); err != nil {
					return err
				}
				kicked = off
			}
		}
		if err := f.Sync(); err != nil {
			return err
		}
		return f.Close()
	}
	start := time.Now()
	next := make(chan string, len(paths))
	for _, p := range paths {
		next <- p
	}
	close(next)
	var wg sync.WaitGroup
	errs := make(chan error, len(paths))
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range next {
				if err := writeOne(p); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	d, err := os.Open(*dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	d.Close()
	if err != nil {
		return err
	}
	sec := time.Since(start).Seconds()
	result.Print(result.Result{Bytes: per * int64(*files), Seconds: sec, Extra: fmt.Sprintf("%d files", *files)})
	return nil
}
