package convert

import (
	"context"
	"errors"
	"math/bits"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/pqread"
	"github.com/prepml/prep/source"
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
	start uint64 // first sample id
	meta  plan.SourceFile
	src   *source.File
	pq    *pqread.File
}

// openSources opens every source file of p from st (nil: the local
// directory p.Source.Root) and checks it against the plan with
// source.Open: size, footer hash and row groups, after pqread validated the
// footer. A file that differs is a *source.ChangedError; one that cannot be
// read (permission denied) is the *source.Error saying so. Files whose ids
// are not needed are still checked. On error every opened file is closed.
func openSources(ctx context.Context, p *plan.Plan, st source.Store, lim pqread.Limits) ([]*sourceFile, error) {
	if st == nil {
		local, err := source.NewLocal(p.Source.Root)
		if err != nil {
			return nil, err
		}
		st = local
	}
	var out []*sourceFile
	var start uint64
	for _, m := range p.Source.Files {
		if err := ctx.Err(); err != nil {
			closeSources(out)
			return nil, err
		}
		sf, err := source.Open(ctx, st, m, lim)
		if err != nil {
			closeSources(out)
			return nil, err
		}
		out = append(out, &sourceFile{rel: m.Path, start: start, meta: m, src: sf, pq: sf.Parquet})
		start += uint64(m.Rows())
	}
	return out, nil
}

// closeSources closes the files.
func closeSources(files []*sourceFile) {
	for _, f := range files {
		f.src.Close()
	}
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
		byPath[f.pq.Path()] = f.rel
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

// openForSpec opens and checks p's sources from st (openSources) and compiles spec
// against their schemas. The spec's max_value_bytes become the files'
// pqread.Limits.MaxValueBytes (valueLimit), so an oversized BYTE_ARRAY value
// fails inside pqread, naming file, column, row group, row and length,
// before the decoder allocates it; lim.MaxValueBytes, when set, stays a cap
// for every column. The caller closes the files.
func openForSpec(ctx context.Context, p *plan.Plan, st source.Store, spec *Spec, lim pqread.Limits) ([]*sourceFile, []*tensorPlan, error) {
	files, err := openSources(ctx, p, st, lim)
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
