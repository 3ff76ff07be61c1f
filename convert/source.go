package convert

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/pqread"
)

// idSet is the set of sample ids a run needs, with the compact rank of each
// member (its index among the members in id order), which is its staging
// slot. Memory: 2 bits per source row.
type idSet struct {
	n     uint64
	words []uint64
	ranks []uint64 // ranks[w] = members below id 64*w
	count uint64
}

func newIDSet(n uint64) *idSet {
	return &idSet{n: n, words: make([]uint64, (n+63)/64)}
}

func (s *idSet) add(id uint64) { s.words[id>>6] |= 1 << (id & 63) }

// fill adds every id in [0, n).
func (s *idSet) fill() {
	for i := range s.words {
		s.words[i] = ^uint64(0)
	}
	if r := s.n & 63; r != 0 {
		s.words[len(s.words)-1] = 1<<r - 1
	}
}

func (s *idSet) has(id uint64) bool { return s.words[id>>6]&(1<<(id&63)) != 0 }

// seal computes the ranks; call after the last add.
func (s *idSet) seal() {
	s.ranks = make([]uint64, len(s.words))
	var c uint64
	for i, w := range s.words {
		s.ranks[i] = c
		c += uint64(bits.OnesCount64(w))
	}
	s.count = c
}

// rank returns the staging slot of member id.
func (s *idSet) rank(id uint64) uint64 {
	w := id >> 6
	return s.ranks[w] + uint64(bits.OnesCount64(s.words[w]&(1<<(id&63)-1)))
}

// runs returns the stretches of members in [start, start+rows) as row
// ranges relative to start, with their first staging slot.
func (s *idSet) runs(start uint64, rows int64) []run {
	var out []run
	i := int64(0)
	for i < rows {
		id := start + uint64(i)
		if !s.has(id) {
			// skip a whole empty word at once
			if id&63 == 0 && s.words[id>>6] == 0 {
				i += 64
				continue
			}
			i++
			continue
		}
		lo := i
		for i < rows && s.has(start+uint64(i)) {
			if id := start + uint64(i); id&63 == 0 && s.words[id>>6] == ^uint64(0) && i+64 <= rows {
				i += 64
				continue
			}
			i++
		}
		out = append(out, run{lo: int(lo), hi: int(i), dst: int64(s.rank(start + uint64(lo)))})
	}
	return out
}

// sourceFile is one plan source file, opened and checked.
type sourceFile struct {
	rel   string
	abs   string
	start uint64 // first sample id
	meta  plan.SourceFile
	pq    *pqread.File
}

// openSources checks every source file of p against the plan (size and
// footer hash), opens its footer with pqread and checks the row groups.
// Files whose ids are not needed are still checked. On error every opened
// file is closed.
func openSources(ctx context.Context, p *plan.Plan, lim pqread.Limits) ([]*sourceFile, error) {
	var out []*sourceFile
	closeAll := func() { closeSources(out) }
	var start uint64
	for _, m := range p.Source.Files {
		if err := ctx.Err(); err != nil {
			closeAll()
			return nil, err
		}
		abs := filepath.Join(p.Source.Root, filepath.FromSlash(m.Path))
		f := &sourceFile{rel: m.Path, abs: abs, start: start, meta: m}
		start += uint64(m.Rows())
		changed := func(err error) ([]*sourceFile, error) {
			closeAll()
			return nil, &Error{File: m.Path, RowGroup: -1, Row: -1, Element: -1, Err: err}
		}
		pf, err := pqread.Open(abs, lim)
		if err != nil {
			// A file changed since planning is reported as changed,
			// whatever else is wrong with it now.
			if cerr := checkFooter(abs, m); cerr != nil {
				return changed(cerr)
			}
			closeAll()
			return nil, err
		}
		f.pq = pf
		out = append(out, f)
		// The footer checked is the one decoded: read once, hashed there.
		if err := compareFooter(pf.FooterSHA256(), pf.Size(), nil, m); err != nil {
			return changed(err)
		}
		if rg := pf.RowGroups(); !slices.Equal(rg, m.RowGroups) {
			closeAll()
			return nil, &Error{File: m.Path, RowGroup: -1, Row: -1, Element: -1,
				Err: fmt.Errorf("%w: row groups %v, plan has %v", ErrSourceChanged, rg, m.RowGroups)}
		}
	}
	return out, nil
}

// closeSources closes the pqread files of files.
func closeSources(files []*sourceFile) {
	for _, f := range files {
		f.pq.Close()
	}
}

// openForSpec opens and checks p's sources (openSources) and compiles spec
// against their schemas. The spec's max_value_bytes become the files'
// pqread.Limits.MaxValueBytes (valueLimit), so an oversized BYTE_ARRAY value
// fails inside pqread, naming file, column, row group, row and length,
// before the decoder allocates it; lim.MaxValueBytes, when set, stays a cap
// for every column. The caller closes the files.
func openForSpec(ctx context.Context, p *plan.Plan, spec *Spec, lim pqread.Limits) ([]*sourceFile, []*tensorPlan, error) {
	files, err := openSources(ctx, p, lim)
	if err != nil {
		return nil, nil, err
	}
	closeAll := func() { closeSources(files) }
	plans, err := compileSpec(spec, schemas(files))
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	if v := valueLimit(lim.MaxValueBytes, plans); v != lim.MaxValueBytes {
		for _, f := range files {
			f.pq.SetMaxValueBytes(v)
		}
	}
	return files, plans, nil
}

// valueLimit returns the BYTE_ARRAY value limit pqread can enforce for every
// column the plans read: the largest max_value_bytes among the tensors
// reading a BYTE_ARRAY column, or 0 (none) when one of them sets none, then
// capped by global (0: no cap). A tensor with a smaller limit than the
// result is still held to its own by its transform.
func valueLimit(global int64, plans []*tensorPlan) int64 {
	var most int64
	for _, tp := range plans {
		reads := false
		for _, cols := range tp.cols {
			for _, ci := range cols {
				reads = reads || ci.Kind == pqread.KindBytes
			}
		}
		if !reads {
			continue
		}
		if tp.maxValue <= 0 {
			return global
		}
		most = max(most, tp.maxValue)
	}
	if global > 0 && (most == 0 || global < most) {
		return global
	}
	return most
}

// checkFooter compares the file's size and footer SHA-256 (of the thrift
// FileMetaData, its 4-byte length and "PAR1") with the plan's record.
func checkFooter(path string, m plan.SourceFile) error {
	got, size, err := FooterSHA256(path)
	return compareFooter(got, size, err, m)
}

// compareFooter compares a file's size and footer SHA-256 (got; err when
// the footer could not be read, size -1 when the file could not be opened)
// with the plan's record m.
func compareFooter(got string, size int64, err error, m plan.SourceFile) error {
	if size < 0 {
		return fmt.Errorf("%w: %v", ErrSourceChanged, err)
	}
	if size != m.Size {
		return fmt.Errorf("%w: size %d bytes, plan has %d", ErrSourceChanged, size, m.Size)
	}
	if m.FooterSHA256 == "" {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrSourceChanged, err)
	}
	if !strings.EqualFold(got, strings.TrimPrefix(m.FooterSHA256, "sha256:")) {
		return fmt.Errorf("%w: footer sha256 %s, plan has %s", ErrSourceChanged, got, m.FooterSHA256)
	}
	return nil
}

// FooterSHA256 returns the hex SHA-256 of a Parquet file's footer: the thrift
// FileMetaData, its 4-byte little-endian length and the "PAR1" magic, i.e.
// the last len+8 bytes (the definition plan.SourceFile.FooterSHA256 uses),
// and the file's size in bytes (-1 when the file cannot be opened or
// stat'ed). It returns an error when the file fails pqread.ReadFooter's
// checks of the magic and footer length.
func FooterSHA256(path string) (sum string, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", -1, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", -1, err
	}
	ft, err := pqread.ReadFooter(f, maxFooterBytes)
	if err != nil {
		return "", st.Size(), fmt.Errorf("%s: %w", path, err)
	}
	return ft.SHA256(), ft.Size, nil
}

// schemas returns the fileSchema of each opened file.
func schemas(files []*sourceFile) []fileSchema {
	out := make([]fileSchema, len(files))
	for i, f := range files {
		pf := f.pq
		out[i] = fileSchema{rel: f.rel, columns: pf.Columns(), lookup: func(name string) (pqread.ColumnInfo, error) {
			ci, err := pf.Lookup(name)
			var pe *pqread.Error
			if errors.As(err, &pe) {
				err = pe.Err // the caller adds file and column
			}
			return ci, err
		}}
	}
	return out
}
