package feature

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/pqread"
	"github.com/prepml/prep/source"
)

// TokenLengths returns the list length of column in every row of src, in
// sample id order (PLAN.md §2): what packing (PLAN.md §12) reads. Only
// the column's repetition and definition levels are decoded
// (pqread.File.ListLengths); a null or empty list is 0, a null element
// counts. st nil reads the local directory src.Root. Every file is opened
// with source.Open and checked against src (size, footer SHA-256, row
// groups: a difference is a *source.ChangedError). The column must be a
// list of INT32 or INT64 in every file, else an *Error naming the file
// and column wrapping ErrSchema. Row groups are read by up to jobs
// goroutines (0: GOMAXPROCS); memory is 4 bytes per row plus about 2^20
// level entries and a page per goroutine. Read errors are pqread's
// *Error, naming file, column, row group and page.
func TokenLengths(ctx context.Context, st source.Store, src plan.Source, column string, jobs int) ([]uint32, error) {
	s := src
	s.Files = append([]plan.SourceFile(nil), src.Files...)
	s.EmptyFiles = append([]plan.SourceFile(nil), src.EmptyFiles...)
	if err := s.Normalize(); err != nil {
		return nil, err
	}
	if st == nil {
		local, err := source.NewLocal(s.Root)
		if err != nil {
			return nil, err
		}
		st = local
	}
	if jobs <= 0 {
		jobs = runtime.GOMAXPROCS(0)
	}
	out := make([]uint32, s.NumSamples())
	var start uint64
	for _, m := range s.Files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sf, err := source.Open(ctx, st, m, pqread.Limits{})
		if err != nil {
			return nil, err
		}
		err = fileLengths(ctx, sf, m, column, out[start:start+uint64(m.Rows())], jobs)
		sf.Close()
		if err != nil {
			return nil, err
		}
		start += uint64(m.Rows())
	}
	return out, nil
}

// fileLengths fills dst (one slot per row of the file) with the list
// lengths of column, row groups read concurrently.
func fileLengths(ctx context.Context, sf *source.File, m plan.SourceFile, column string, dst []uint32, jobs int) error {
	ci, err := sf.Parquet.Lookup(column)
	if err != nil {
		why := "not in the file's schema"
		if !errors.Is(err, pqread.ErrNotFound) {
			why = err.Error()
		}
		return &Error{File: m.Path, Column: column, RowGroup: -1, Row: -1, Element: -1, Err: fmt.Errorf("token column %s: %w", why, ErrSchema)}
	}
	if ci.Depth != 1 || (ci.Kind != pqread.KindInt32 && ci.Kind != pqread.KindInt64) {
		return &Error{File: m.Path, Column: column, RowGroup: -1, Row: -1, Element: -1,
			Err: fmt.Errorf("token column must be a list of INT32 or INT64, not %s of list depth %d: %w", ci.Physical, ci.Depth, ErrSchema)}
	}
	starts := make([]int64, len(m.RowGroups)+1)
	for i, r := range m.RowGroups {
		starts[i+1] = starts[i] + r
	}
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
		next  = make(chan int)
	)
	for w := 0; w < min(jobs, len(m.RowGroups)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []uint32
			for rg := range next {
				var err error
				buf, err = sf.Parquet.ListLengths(rg, ci, buf[:0])
				if err == nil && int64(len(buf)) != m.RowGroups[rg] {
					err = &Error{File: m.Path, Column: column, RowGroup: rg, Row: -1, Element: -1, Err: fmt.Errorf("%d list lengths for %d rows: %w", len(buf), m.RowGroups[rg], ErrSchema)}
				}
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					continue
				}
				copy(dst[starts[rg]:], buf)
			}
		}()
	}
	for rg := range m.RowGroups {
		if ctx.Err() != nil {
			break
		}
		next <- rg
	}
	close(next)
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// ReadPackLayout returns the layout of epoch e's packed rows of the
// packed plan p (the same for every epoch of a plan packed once; a packed
// mixture's epoch e packs its own draws, PLAN.md §12.1), recomputed from
// the source (TokenLengths of its column, read from st; nil: the local
// directory p.Source.Root) and checked against the plan's digests
// (plan.Plan.PackLayout: an error wrapping plan.ErrMismatch when the
// source's lengths or the layout differ from the plan's, plan.ErrRange
// for an epoch out of range).
func ReadPackLayout(ctx context.Context, st source.Store, p *plan.Plan, e, jobs int) (*plan.PackLayout, error) {
	if p.Packing == nil {
		return nil, specErrorf("the plan packs no column")
	}
	lengths, err := TokenLengths(ctx, st, p.Source, p.Packing.Column, jobs)
	if err != nil {
		return nil, err
	}
	return p.PackLayout(ctx, lengths, e)
}

// tokenEntriesBound returns an upper bound on the values of the list
// column over every row of src, from the footers only: per row group,
// pqread's decoded-size estimate of the column chunk divided by the bytes
// it counts per level entry (valuesBound, the values arena's bound). The
// files are opened with source.Open and checked against src, and the
// column's type, as TokenLengths does.
func tokenEntriesBound(ctx context.Context, st source.Store, src plan.Source, column string) (int64, error) {
	s := src
	s.Files = append([]plan.SourceFile(nil), src.Files...)
	s.EmptyFiles = append([]plan.SourceFile(nil), src.EmptyFiles...)
	if err := s.Normalize(); err != nil {
		return 0, err
	}
	if st == nil {
		local, err := source.NewLocal(s.Root)
		if err != nil {
			return 0, err
		}
		st = local
	}
	var total int64
	for _, m := range s.Files {
		sf, err := source.Open(ctx, st, m, pqread.Limits{})
		if err != nil {
			return 0, err
		}
		ci, err := sf.Parquet.Lookup(column)
		switch {
		case err != nil:
			err = &Error{File: m.Path, Column: column, RowGroup: -1, Row: -1, Element: -1, Err: fmt.Errorf("token column: %v: %w", err, ErrSchema)}
		case ci.Depth != 1 || (ci.Kind != pqread.KindInt32 && ci.Kind != pqread.KindInt64):
			err = &Error{File: m.Path, Column: column, RowGroup: -1, Row: -1, Element: -1,
				Err: fmt.Errorf("token column must be a list of INT32 or INT64, not %s of list depth %d: %w", ci.Physical, ci.Depth, ErrSchema)}
		}
		if err != nil {
			sf.Close()
			return 0, err
		}
		for rg := range m.RowGroups {
			total += valuesBound(sf.Parquet.DecodedSize(rg, ci), ci)
		}
		sf.Close()
	}
	return total, nil
}
