package convert

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/prepml/prep/plan"
)

// Source discovery reads only the tail of each Parquet file:
//
//	"PAR1" | column chunks ... | footer (thrift FileMetaData) | footer length (u32 LE) | "PAR1"
//
// (parquet-format README, "File Format").
const (
	parquetMagic     = "PAR1"
	parquetMagicEnc  = "PARE" // encrypted footer
	parquetMinSize   = 12     // head magic + footer length + tail magic
	maxFooterBytes   = 1 << 30
	discoverParallel = 8 // files whose footers are read at once (one descriptor each)
)

var (
	// ErrFooter is returned (inside an *Error naming the file) when a file is
	// not a readable Parquet file: too small, a missing "PAR1" magic, a
	// footer length outside the file, or a footer that does not decode.
	ErrFooter = errors.New("bad parquet footer")

	// ErrNoInput is returned when the source paths name no Parquet file.
	ErrNoInput = errors.New("no parquet files found")
)

// DiscoverSource expands paths into the plan source:
//
//   - a regular file is taken as is, whatever its name;
//   - a directory is walked recursively for regular files named *.parquet
//     (any case); entries whose name starts with "." or "_" (Spark and Hive
//     temporary and marker files such as _SUCCESS, _temporary/) are skipped;
//   - any other path containing *, ? or [ is a glob (filepath.Match syntax);
//     each match is taken as a file or walked as a directory.
//
// Symbolic links are followed when named directly or matched by a glob.
// A file reached twice is kept once. Source.Root is the deepest directory
// holding every file (absolute, symlinks not resolved); each SourceFile.Path
// is relative to it with '/' separators, so the source fingerprint does not
// depend on where the data set is mounted.
//
// Of each file only the footer is read: open, read the first 4 and last 8
// bytes, check both magics and the footer length against the file size
// before allocating, read the footer, SHA-256 it (with the trailing 8
// bytes), decode the row-group row counts, close. At most 8 files are open
// at once. Every file is checked; problems are returned together
// (errors.Join of *Error values wrapping ErrFooter or the I/O error, sorted
// by path) so that a run over many files writes nothing when any is bad.
// Files with zero rows are returned in Source.EmptyFiles.
func DiscoverSource(paths []string) (plan.Source, error) {
	files, err := expandPaths(paths)
	if err != nil {
		return plan.Source{}, err
	}
	if len(files) == 0 {
		return plan.Source{}, fmt.Errorf("%s: %w", strings.Join(paths, ", "), ErrNoInput)
	}
	root := commonDir(files)
	results := make([]plan.SourceFile, len(files))
	errs := make([]error, len(files))
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < min(discoverParallel, max(2, runtime.GOMAXPROCS(0)), len(files)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				rel, err := filepath.Rel(root, files[i])
				if err != nil {
					errs[i] = &Error{File: files[i], RowGroup: -1, Row: -1, Element: -1, Err: err}
					continue
				}
				sf, err := readFooterInfo(files[i])
				if err != nil {
					errs[i] = &Error{File: files[i], RowGroup: -1, Row: -1, Element: -1, Err: err}
					continue
				}
				sf.Path = filepath.ToSlash(rel)
				results[i] = sf
			}
		}()
	}
	for i := range files {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return plan.Source{}, err
	}
	src := plan.Source{Root: root, Files: results}
	if err := src.Normalize(); err != nil {
		return plan.Source{}, err
	}
	return src, nil
}

// expandPaths returns the absolute, cleaned, de-duplicated and sorted list
// of files that paths name.
func expandPaths(paths []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	var errs []error
	add := func(p string) {
		abs, err := filepath.Abs(p)
		if err != nil {
			errs = append(errs, err)
			return
		}
		if !seen[abs] {
			seen[abs] = true
			out = append(out, abs)
		}
	}
	var visit func(p string, explicit bool)
	visit = func(p string, explicit bool) {
		st, err := os.Stat(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("source %s: %w", p, err))
			return
		}
		switch {
		case st.Mode().IsRegular():
			add(p)
		case st.IsDir():
			err := filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
				if err != nil {
					return fmt.Errorf("walking %s: %w", q, err)
				}
				name := d.Name()
				if q != p && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
					if d.IsDir() {
						return filepath.SkipDir
					}
					return nil
				}
				if !d.IsDir() && strings.EqualFold(filepath.Ext(name), ".parquet") {
					if d.Type().IsRegular() {
						add(q)
					} else if st, err := os.Stat(q); err == nil && st.Mode().IsRegular() {
						add(q) // a symlink to a regular file
					}
				}
				return nil
			})
			if err != nil {
				errs = append(errs, err)
			}
		default:
			if explicit {
				errs = append(errs, fmt.Errorf("source %s: not a regular file or directory", p))
			}
		}
	}
	for _, p := range paths {
		if _, err := os.Lstat(p); err != nil && strings.ContainsAny(p, "*?[") {
			matches, gerr := filepath.Glob(p)
			if gerr != nil {
				errs = append(errs, fmt.Errorf("source %s: %w", p, gerr))
				continue
			}
			if len(matches) == 0 {
				errs = append(errs, fmt.Errorf("source %s: no file matches: %w", p, ErrNoInput))
			}
			for _, m := range matches {
				visit(m, false)
			}
			continue
		}
		visit(p, true)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	sort.Strings(out)
	return out, nil
}

// commonDir returns the deepest directory containing every absolute path.
func commonDir(files []string) string {
	dir := filepath.Dir(files[0])
	for _, f := range files[1:] {
		for !within(dir, f) {
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return dir
}

func within(dir, f string) bool {
	if dir == string(filepath.Separator) {
		return true
	}
	return strings.HasPrefix(f, dir+string(filepath.Separator))
}

// readFooterInfo reads the footer of one Parquet file (one descriptor,
// closed before returning) and returns its size, footer hash and row-group
// row counts.
func readFooterInfo(path string) (plan.SourceFile, error) {
	var sf plan.SourceFile
	f, err := os.Open(path)
	if err != nil {
		return sf, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return sf, err
	}
	size := st.Size()
	sf.Size = size
	if size < parquetMinSize {
		return sf, fmt.Errorf("file too small: %d bytes, a Parquet file has at least %d: %w", size, parquetMinSize, ErrFooter)
	}
	var head [4]byte
	var tail [8]byte
	if _, err := f.ReadAt(head[:], 0); err != nil {
		return sf, fmt.Errorf("reading magic: %w", err)
	}
	if _, err := f.ReadAt(tail[:], size-8); err != nil {
		return sf, fmt.Errorf("reading footer length: %w", err)
	}
	switch {
	case string(tail[4:]) == parquetMagicEnc:
		return sf, fmt.Errorf("encrypted footer (PARE) not supported: %w", ErrFooter)
	case string(tail[4:]) != parquetMagic:
		return sf, fmt.Errorf("missing PAR1 magic at end of file (ends in %q; truncated?): %w", tail[4:], ErrFooter)
	case string(head[:]) != parquetMagic:
		return sf, fmt.Errorf("missing PAR1 magic at start of file: %w", ErrFooter)
	}
	n := int64(binary.LittleEndian.Uint32(tail[:4]))
	if n == 0 || n > size-parquetMinSize || n > maxFooterBytes {
		return sf, fmt.Errorf("footer length %d beyond file size %d: %w", n, size, ErrFooter)
	}
	footer := make([]byte, n+8)
	if _, err := f.ReadAt(footer, size-8-n); err != nil {
		return sf, fmt.Errorf("reading footer: %w", err)
	}
	sum := sha256.Sum256(footer)
	sf.FooterSHA256 = hex.EncodeToString(sum[:])
	rgs, err := footerRowGroups(footer[:n])
	if err != nil {
		return sf, fmt.Errorf("decoding footer at offset %d: %w", size-8-n, err)
	}
	sf.RowGroups = rgs
	return sf, nil
}

// footerRowGroups walks the thrift compact encoding of FileMetaData and
// returns num_rows (field 3) of each RowGroup in row_groups (field 4),
// checking that they are not negative and add up to the file's num_rows
// (field 3). Every other field is skipped. No allocation is sized from a
// count before the count is checked against the bytes left.
func footerRowGroups(b []byte) ([]int64, error) {
	d := &thriftWalker{b: b}
	var total int64 = -1
	var rgs []int64
	haveRG := false
	var last int16
	for {
		id, typ := d.fieldHeader(&last)
		if d.err != nil {
			return nil, d.fail()
		}
		if typ == tStop {
			break
		}
		switch {
		case id == 3 && typ == tI64:
			total = d.varint()
		case id == 4 && typ == tList:
			et, count := d.listHeader()
			if d.err == nil && et != tStruct {
				return nil, fmt.Errorf("row_groups is a list of type %d, not struct: %w", et, ErrFooter)
			}
			haveRG = true
			rgs = make([]int64, 0, count)
			for i := 0; i < count && d.err == nil; i++ {
				rows := int64(-1)
				var l int16
				for d.err == nil {
					fid, ft := d.fieldHeader(&l)
					if ft == tStop || d.err != nil {
						break
					}
					if fid == 3 && ft == tI64 {
						rows = d.varint()
					} else {
						d.skip(ft, 0)
					}
				}
				if d.err == nil && rows < 0 {
					return nil, fmt.Errorf("row group %d: num_rows missing or negative (%d): %w", i, rows, ErrFooter)
				}
				rgs = append(rgs, rows)
			}
		default:
			d.skip(typ, 0)
		}
		if d.err != nil {
			return nil, d.fail()
		}
	}
	if !haveRG || total < 0 {
		return nil, fmt.Errorf("num_rows or row_groups missing: %w", ErrFooter)
	}
	var sum int64
	for _, r := range rgs {
		sum += r
		if sum < 0 {
			return nil, fmt.Errorf("row counts overflow: %w", ErrFooter)
		}
	}
	if sum != total {
		return nil, fmt.Errorf("row groups hold %d rows, footer num_rows says %d: %w", sum, total, ErrFooter)
	}
	if rgs == nil {
		rgs = []int64{}
	}
	return rgs, nil
}

// Thrift compact protocol types (thrift/doc/specs/thrift-compact-protocol.md).
const (
	tStop   = 0
	tTrue   = 1
	tFalse  = 2
	tByte   = 3
	tI16    = 4
	tI32    = 5
	tI64    = 6
	tDouble = 7
	tBinary = 8
	tList   = 9
	tSet    = 10
	tMap    = 11
	tStruct = 12

	thriftMaxDepth = 64
)

// thriftWalker is a bounds-checked reader of the thrift compact protocol
// with a sticky error.
type thriftWalker struct {
	b   []byte
	off int
	err error
}

func (d *thriftWalker) fail() error {
	return fmt.Errorf("thrift decoding at byte %d: %v: %w", d.off, d.err, ErrFooter)
}

func (d *thriftWalker) setErr(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func (d *thriftWalker) byte1() byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.b) {
		d.setErr("unexpected end of footer")
		return 0
	}
	c := d.b[d.off]
	d.off++
	return c
}

func (d *thriftWalker) uvarint() uint64 {
	var x uint64
	for shift := uint(0); shift < 70; shift += 7 {
		c := d.byte1()
		if d.err != nil {
			return 0
		}
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return x
		}
	}
	d.setErr("varint too long")
	return 0
}

func (d *thriftWalker) varint() int64 {
	u := d.uvarint()
	return int64(u>>1) ^ -int64(u&1) // zigzag
}

func (d *thriftWalker) fieldHeader(last *int16) (int16, byte) {
	c := d.byte1()
	typ := c & 0x0f
	if d.err != nil || typ == tStop {
		return 0, tStop
	}
	if delta := c >> 4; delta != 0 {
		*last += int16(delta)
	} else {
		*last = int16(d.varint())
	}
	return *last, typ
}

// listHeader returns the element type and count, checked against the bytes
// left (every element takes at least one byte).
func (d *thriftWalker) listHeader() (byte, int) {
	c := d.byte1()
	n := uint64(c >> 4)
	if n == 15 {
		n = d.uvarint()
	}
	if d.err == nil && n > uint64(len(d.b)-d.off) {
		d.setErr("list of %d elements in %d bytes", n, len(d.b)-d.off)
	}
	if d.err != nil {
		return 0, 0
	}
	return c & 0x0f, int(n)
}

func (d *thriftWalker) skipBytes(n uint64) {
	if d.err == nil && n > uint64(len(d.b)-d.off) {
		d.setErr("%d bytes wanted, %d left", n, len(d.b)-d.off)
	}
	if d.err == nil {
		d.off += int(n)
	}
}

func (d *thriftWalker) skip(typ byte, depth int) {
	if depth > thriftMaxDepth {
		d.setErr("nested deeper than %d", thriftMaxDepth)
		return
	}
	switch typ {
	case tTrue, tFalse:
	case tByte:
		d.skipBytes(1)
	case tI16, tI32, tI64:
		d.uvarint()
	case tDouble:
		d.skipBytes(8)
	case tBinary:
		d.skipBytes(d.uvarint())
	case tList, tSet:
		et, n := d.listHeader()
		for i := 0; i < n && d.err == nil; i++ {
			d.skipElem(et, depth+1)
		}
	case tMap:
		n := d.uvarint()
		if n == 0 {
			return
		}
		kv := d.byte1()
		if d.err == nil && n > uint64(len(d.b)-d.off) {
			d.setErr("map of %d entries in %d bytes", n, len(d.b)-d.off)
		}
		for i := uint64(0); i < n && d.err == nil; i++ {
			d.skipElem(kv>>4, depth+1)
			d.skipElem(kv&0x0f, depth+1)
		}
	case tStruct:
		var last int16
		for d.err == nil {
			_, ft := d.fieldHeader(&last)
			if ft == tStop {
				return
			}
			d.skip(ft, depth+1)
		}
	default:
		d.setErr("unknown thrift type %d", typ)
	}
}

// skipElem skips one list, set or map element: booleans there take one
// byte each, unlike boolean fields, whose value is in the type nibble.
func (d *thriftWalker) skipElem(typ byte, depth int) {
	if typ == tTrue || typ == tFalse {
		d.skipBytes(1)
		return
	}
	d.skip(typ, depth)
}
