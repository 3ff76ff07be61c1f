package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// SourceFile is one input file of a plan's source, in the order sample ids
// are assigned (sorted by relative path, byte-wise).
type SourceFile struct {
	Path         string  `json:"path"` // relative to Source.Root, '/'-separated
	Size         int64   `json:"size"`
	FooterSHA256 string  `json:"footer_sha256"` // hex sha256 of the footer bytes (thrift FileMetaData + length + "PAR1")
	RowGroups    []int64 `json:"row_groups"`    // rows per row group, in file order (zero-row groups kept)
	// ETag is the object's version when the source is an object store
	// (as listed, quotes included); reads from the same root are pinned
	// to it. Not fingerprinted: a local copy has none and plans the same.
	ETag string `json:"etag,omitempty"`
}

// Rows returns the number of rows of the file (the sum of its row groups).
func (f *SourceFile) Rows() int64 {
	var n int64
	for _, r := range f.RowGroups {
		n += r
	}
	return n
}

// Source is the ordered list of input files. Sample id = global row index in
// Files order; row groups with zero rows hold no id. Files with zero rows are
// listed in EmptyFiles instead of Files: they hold no sample, take no part in
// any fingerprint or order, and are kept only so a manifest can name them.
//
// Locate needs an index over the row groups; New and Load build it for
// Plan.Source. Do not modify Files after that.
type Source struct {
	Root       string       `json:"root"` // absolute directory the relative paths are resolved against; not fingerprinted
	Files      []SourceFile `json:"files"`
	EmptyFiles []SourceFile `json:"empty_files,omitempty"` // files with 0 rows, sorted by path; not fingerprinted
	// Skipped are the regular files a directory walk or listing found
	// and left out as not Parquet (neither named *.parquet nor ending in
	// the PAR1 magic; source.Discover), absolute local paths or s3:// URLs,
	// sorted: reported by prep plan, never written to the plan file.
	Skipped []string `json:"-"`

	index *sourceIndex
}

// block is one non-empty row group: the unit that blocks and partitioned
// shuffles move around.
type block struct {
	start    uint64 // first sample id
	rows     uint64
	file     int32 // index in Source.Files
	rowGroup int32 // row-group index in the file (zero-row groups counted)
}

// sourceIndex is the immutable lookup structure of a Source: its non-empty
// row groups in id order. Memory: 24 bytes per non-empty row group.
type sourceIndex struct {
	n      uint64
	blocks []block
}

func buildIndex(files []SourceFile) (*sourceIndex, error) {
	idx := &sourceIndex{}
	for fi := range files {
		for gi, r := range files[fi].RowGroups {
			if r < 0 {
				return nil, configErrorf("source", "%s: row group %d has %d rows", files[fi].Path, gi, r)
			}
			if r == 0 {
				continue
			}
			if idx.n+uint64(r) < idx.n || idx.n+uint64(r) >= 1<<63 {
				return nil, configErrorf("source", "more than 2^63-1 rows")
			}
			idx.blocks = append(idx.blocks, block{start: idx.n, rows: uint64(r), file: int32(fi), rowGroup: int32(gi)})
			idx.n += uint64(r)
		}
	}
	return idx, nil
}

// blockOf returns the index of the block holding id (id < n).
func (x *sourceIndex) blockOf(id uint64) int {
	return sort.Search(len(x.blocks), func(i int) bool { return x.blocks[i].start+x.blocks[i].rows > id })
}

// Normalize sorts Files and EmptyFiles by path (byte-wise), moves files with
// zero rows to EmptyFiles, and builds the index Locate uses. It returns an
// error wrapping ErrConfig for duplicate paths, negative sizes or row counts,
// or more than 2^63-1 rows.
func (s *Source) Normalize() error {
	var files, empty []SourceFile
	for _, f := range append(append([]SourceFile(nil), s.Files...), s.EmptyFiles...) {
		if f.Size < 0 {
			return configErrorf("source", "%s: negative size", f.Path)
		}
		if f.Path == "" || strings.ContainsAny(f.Path, "\t\n\r") {
			return configErrorf("source", "file path %q is empty or holds a tab or newline", f.Path)
		}
		if !utf8.ValidString(f.Path) {
			// plan.json is JSON text: the name would be recorded with
			// U+FFFD, and the plan would no longer match its source.
			return configErrorf("source", "file path %q is not valid UTF-8; rename the file", f.Path)
		}
		if f.Rows() == 0 {
			empty = append(empty, f)
		} else {
			files = append(files, f)
		}
	}
	byPath := func(fs []SourceFile) func(i, j int) bool {
		return func(i, j int) bool { return fs[i].Path < fs[j].Path }
	}
	sort.SliceStable(files, byPath(files))
	sort.SliceStable(empty, byPath(empty))
	all := append(append([]string(nil), paths(files)...), paths(empty)...)
	sort.Strings(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			return configErrorf("source", "duplicate file %s", all[i])
		}
	}
	idx, err := buildIndex(files)
	if err != nil {
		return err
	}
	s.Files, s.EmptyFiles, s.index = files, empty, idx
	return nil
}

func paths(fs []SourceFile) []string {
	out := make([]string, len(fs))
	for i := range fs {
		out[i] = fs[i].Path
	}
	return out
}

func (s *Source) idx() *sourceIndex {
	if s.index != nil {
		return s.index
	}
	idx, err := buildIndex(s.Files)
	if err != nil {
		return &sourceIndex{}
	}
	return idx
}

// NumSamples returns N, the total number of rows of the source.
func (s *Source) NumSamples() uint64 { return s.idx().n }

// Locate maps a global sample id to (file index in Files, row-group index in
// that file, row within the row group). Row-group indices count zero-row
// groups, so they address the Parquet file directly. It returns an error
// wrapping ErrRange when id >= N. O(log row groups).
func (s *Source) Locate(id uint64) (file, rowGroup int, row int64, err error) {
	x := s.idx()
	if id >= x.n {
		return 0, 0, 0, rangeErrorf("sample id %d not in [0, %d)", id, x.n)
	}
	b := x.blocks[x.blockOf(id)]
	return int(b.file), int(b.rowGroup), int64(id - b.start), nil
}

// Fingerprint returns the source fingerprint "sha256:<hex>": SHA-256 of the
// canonical text of PLAN.md §Source fingerprint, over Files sorted by path
// (not Root, not EmptyFiles, not the listing order).
func (s *Source) Fingerprint() string {
	return sha256Digest(s.canonical())
}

// canonical returns the source's canonical text:
//
//	prep-source/v1\n
//	then per file with rows > 0, sorted by path:
//	<path>\t<size>\t<footer_sha256 lower-case hex>\t<rows of each row group, comma-separated>\n
func (s *Source) canonical() string {
	files := append([]SourceFile(nil), s.Files...)
	sort.SliceStable(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	var b strings.Builder
	b.WriteString("prep-source/v1\n")
	for _, f := range files {
		if f.Rows() == 0 {
			continue
		}
		rg := make([]string, len(f.RowGroups))
		for i, r := range f.RowGroups {
			rg[i] = strconv.FormatInt(r, 10)
		}
		fmt.Fprintf(&b, "%s\t%d\t%s\t%s\n", f.Path, f.Size, strings.ToLower(f.FooterSHA256), strings.Join(rg, ","))
	}
	return b.String()
}

// sha256Digest returns "sha256:<hex>" of the SHA-256 of s.
func sha256Digest(s string) string {
	h := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(h[:])
}
