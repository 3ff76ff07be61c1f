package feature

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/pqread"
	"github.com/prepml/prep/source"
)

// sourceFile is one plan source file, checked against the plan. Its
// footer (a *pqread.File, several times the footer's bytes in memory: 6 MiB
// for 5,000 columns) is held only while the file is read: openForSpec
// drops it after compiling the spec, the decoder takes it again for the
// file's first column chunk (parquet, reopening and checking the file
// against the plan once more) and drops it after the last (release). The
// decoder counts footerCost in each row group's admitted memory.
type sourceFile struct {
	rel   string
	path  string // the local path pqread opened, for relativeNames
	start uint64 // first sample id
	meta  plan.SourceFile

	st         source.Store
	lim        pqread.Limits // MaxValueBytes set by openForSpec (valueLimit)
	footerCost int64         // estimated heap of the held footer
	sizeAt     []int32       // by column index: offset in sizes of its row groups, -1 if not read
	sizes      []int64       // DecodedSize of the spec's columns, row groups consecutive

	mu   sync.Mutex
	held *source.File // nil when released
}

// footersHeld counts the footers sourceFiles hold now, over all runs of the
// process (tests read it).
var footersHeld atomic.Int64

// footerChunkHeap estimates the heap a decoded footer takes per column
// chunk (measured: 6 MiB for one row group of 5,000 FLOAT columns, with
// statistics), and footerColumnHeap per leaf column (schema and ColumnInfo).
const (
	footerChunkHeap  = 1024
	footerColumnHeap = 512
)

// footerCost estimates the heap a decoded footer of cols leaf columns and
// rowGroups row groups takes.
func footerCost(cols, rowGroups int) int64 {
	return int64(cols)*footerColumnHeap + int64(cols)*int64(rowGroups)*footerChunkHeap
}

// open returns the file opened (its Object and footer), reopening it (and
// checking the file against the plan again: a file replaced meanwhile is a
// *source.ChangedError) when it was released. It stays held until release.
func (f *sourceFile) open() (*source.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held == nil {
		sf, err := source.Open(context.Background(), f.st, f.meta, f.lim)
		if err != nil {
			return nil, err
		}
		f.held = sf
		footersHeld.Add(1)
	}
	return f.held, nil
}

// parquet returns the file's footer (see open).
func (f *sourceFile) parquet() (*pqread.File, error) {
	sf, err := f.open()
	if err != nil {
		return nil, err
	}
	return sf.Parquet, nil
}

// release drops the footer and the file's descriptors; a later parquet
// call reopens it.
func (f *sourceFile) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held != nil {
		f.held.Close()
		f.held = nil
		footersHeld.Add(-1)
	}
}

// decodedSize is pqread.File.DecodedSize of column ci in row group rg,
// computed when the file was opened for the spec (0 for a column the spec
// does not read).
func (f *sourceFile) decodedSize(rg int, ci pqread.ColumnInfo) int64 {
	if ci.Index < 0 || ci.Index >= len(f.sizeAt) || f.sizeAt[ci.Index] < 0 || rg < 0 || rg >= len(f.meta.RowGroups) {
		return 0
	}
	return f.sizes[int(f.sizeAt[ci.Index])+rg]
}

// closeSources releases every file's footer and descriptors.
func closeSources(files []*sourceFile) {
	for _, f := range files {
		f.release()
	}
}

// openForSpec opens every source file of p from st (nil: the local
// directory p.Source.Root), one at a time, and checks it against the plan
// with source.Open (size, footer hash and row groups, after pqread
// validated the footer): a file that differs is a *source.ChangedError, one
// that cannot be read (permission denied) the *source.Error saying so.
// Files whose ids are not needed are still checked. Of each file only what
// compiling the spec needs is kept (its columns and the spec's names looked
// up), and the footer sizes of the columns the spec can read; then its
// footer is released, so memory does not grow with files times columns,
// except that the first files' footers stay held (for the decoder) while
// their estimated heap together is at most keep bytes: a run over a few
// files opens each once.
// spec is compiled against the schemas (compileSpec). The spec's
// max_value_bytes become the files' pqread.Limits.MaxValueBytes
// (valueLimit), so an oversized BYTE_ARRAY value fails inside pqread,
// naming file, column, row group, row and length, before the decoder
// allocates it; lim.MaxValueBytes, when set, stays a cap for every column.
// The caller closes the files (closeSources).
func openForSpec(ctx context.Context, p *plan.Plan, st source.Store, spec *Spec, lim pqread.Limits, keep int64) ([]*sourceFile, []*tensorPlan, error) {
	if pk := p.Packing; pk != nil {
		// Its sample ids are packed rows, not source rows: only the packed
		// path (packed.go) reads it, through its document plan.
		return nil, nil, fmt.Errorf("%w: the plan packs column %s into rows of %d tokens; its samples are packed rows, which this operation does not read (PLAN.md §12)", ErrSpec, pk.Column, pk.Length)
	}
	for _, t := range spec.Tensors {
		if t.Packed != nil {
			return nil, nil, fmt.Errorf("%w: tensor %q: a packed policy applies to a plan that packs a token column (prep plan --pack; SPEC.md §2.9.1)", ErrSpec, t.Name)
		}
	}
	if st == nil {
		local, err := source.NewLocal(p.Source.Root)
		if err != nil {
			return nil, nil, err
		}
		st = local
	}
	var names []string
	var regexes []*regexp.Regexp
	var maps [][]string
	for _, t := range spec.Tensors {
		if t.Map != nil {
			maps = append(maps, nameFields(t.Column))
		}
		switch {
		case t.Column != "":
			names = append(names, t.Column)
			if t.Image != nil {
				names = append(names, imageBytesField(t.Column))
			}
		case len(t.Columns) > 0:
			names = append(names, t.Columns...)
		case t.ColumnsRegex != "":
			re, err := regexp.Compile(t.ColumnsRegex)
			if err != nil {
				return nil, nil, &Error{Tensor: t.Name, RowGroup: -1, Row: -1, Element: -1, Err: specErrorf("columns_regex: %v", err)}
			}
			regexes = append(regexes, re)
		}
	}
	parts, err := filePartitions(p)
	if err != nil {
		return nil, nil, err
	}
	var files []*sourceFile
	var schemas []fileSchema
	var start uint64
	for _, m := range p.Source.Files {
		if err := ctx.Err(); err != nil {
			closeSources(files)
			return nil, nil, err
		}
		sf, err := source.Open(ctx, st, m, lim)
		if err != nil {
			closeSources(files)
			return nil, nil, err
		}
		f := &sourceFile{rel: m.Path, path: sf.Parquet.Path(), start: start, meta: m, st: st, lim: lim}
		start += uint64(m.Rows())
		fs := f.schema(sf.Parquet, names, regexes, maps)
		if n := len(schemas); n > 0 && slices.EqualFunc(fs.columns, schemas[n-1].columns, pqread.ColumnInfo.Equal) {
			// Files of one schema share one copy of its columns until the
			// spec is compiled (16 files of 5,000 columns: 13 MB).
			fs.columns = schemas[n-1].columns
		}
		fs.part = parts[m.Path]
		schemas = append(schemas, fs)
		files = append(files, f)
		if keep -= f.footerCost; keep >= 0 {
			f.held = sf
			footersHeld.Add(1)
		} else {
			sf.Close()
		}
	}
	plans, err := compileSpec(spec, schemas)
	if err != nil {
		closeSources(files)
		return nil, nil, err
	}
	if v := valueLimit(lim.MaxValueBytes, plans); v != lim.MaxValueBytes {
		for _, f := range files {
			f.lim.MaxValueBytes = v
			if f.held != nil {
				f.held.Parquet.SetMaxValueBytes(v)
			}
		}
	}
	return files, plans, nil
}

// schema returns what compileSpec needs of pf, which is released after:
// its columns, the lookups of names (done now), and, for every column a
// name or regex selects and every key or value leaf of a map named in
// maps (as field names), its DecodedSize per row group (kept in f.sizes);
// it sets f.footerCost.
func (f *sourceFile) schema(pf *pqread.File, names []string, regexes []*regexp.Regexp, maps [][]string) fileSchema {
	type result struct {
		ci  pqread.ColumnInfo
		err error
	}
	looked := make(map[string]result, len(names))
	cols := pf.Columns()
	f.footerCost = footerCost(len(cols), len(f.meta.RowGroups))
	f.sizeAt = make([]int32, len(cols))
	for i := range f.sizeAt {
		f.sizeAt[i] = -1
	}
	need := func(ci pqread.ColumnInfo) {
		if ci.Index < 0 || ci.Index >= len(f.sizeAt) || f.sizeAt[ci.Index] >= 0 || len(f.sizes) > math.MaxInt32-len(f.meta.RowGroups) {
			return
		}
		f.sizeAt[ci.Index] = int32(len(f.sizes))
		for rg := range f.meta.RowGroups {
			f.sizes = append(f.sizes, pf.DecodedSize(rg, ci))
		}
	}
	for _, n := range names {
		if _, ok := looked[n]; ok {
			continue
		}
		ci, err := pf.Lookup(n)
		var pe *pqread.Error
		if errors.As(err, &pe) {
			err = pe.Err // the caller adds file and column
		}
		looked[n] = result{ci, err}
		if err == nil {
			need(ci)
		}
	}
	for _, ci := range cols {
		for _, re := range regexes {
			if re.MatchString(ci.Name) {
				need(ci)
				break
			}
		}
		for _, m := range maps {
			if inMap(ci, m) {
				need(ci)
				break
			}
		}
	}
	return fileSchema{rel: f.rel, columns: cols, lookup: func(name string) (pqread.ColumnInfo, error) {
		if r, ok := looked[name]; ok {
			return r.ci, r.err
		}
		return pqread.ColumnInfo{}, fmt.Errorf("%w: %q was not looked up", pqread.ErrNotFound, name)
	}}
}

// relativeNames makes every *pqread.Error in *err name its file as the
// plan does, relative to the source root (the one rule for file names in
// errors), instead of the local path pqread opened.
func relativeNames(err *error, files []*sourceFile) {
	if *err == nil {
		return
	}
	byPath := make(map[string]string, len(files))
	for _, f := range files {
		byPath[f.path] = f.rel
	}
	var visit func(e error)
	visit = func(e error) {
		for e != nil {
			if pe, ok := e.(*pqread.Error); ok {
				if rel, ok := byPath[pe.File]; ok {
					pe.File = rel
				}
			}
			if j, ok := e.(interface{ Unwrap() []error }); ok {
				for _, x := range j.Unwrap() {
					visit(x)
				}
				return
			}
			e = errors.Unwrap(e)
		}
	}
	visit(*err)
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
