package pqread

import (
	"encoding/binary"
)

// This file assembles rows: it cuts a window of rows off the reader's
// pending entries and turns their levels and values into a Column.

// kept returns the number of level entries held.
func (r *ColumnReader) kept() int {
	switch {
	case r.maxRep > 0:
		return len(r.reps)
	case r.maxDef > 0:
		return len(r.defs)
	}
	return r.vals.n()
}

// valuesBefore returns the number of non-null values among the first e
// entries held.
func (r *ColumnReader) valuesBefore(e int) int {
	if r.maxDef == 0 {
		return e
	}
	return countLevel(r.defs[:e], uint8(r.maxDef))
}

// rowStart returns the index among the pending entries of the start of
// the row k rows after the first pending one (which starts at entry 0),
// or the number of entries when fewer than k+1 rows have started.
func (r *ColumnReader) rowStart(k int) int {
	if r.maxRep == 0 {
		return min(k, r.kept())
	}
	for i, rp := range r.reps {
		if rp == 0 {
			if k == 0 {
				return i
			}
			k--
		}
	}
	return len(r.reps)
}

// rowsWithin returns how many of the next n pending rows (at least 1:
// the first is complete) are complete and hold at most budget level
// entries together.
func (r *ColumnReader) rowsWithin(n, budget int64) int64 {
	m := int64(0)
	for i := 1; i < len(r.reps) && m < n; i++ {
		if r.reps[i] == 0 {
			if int64(i) > budget {
				break
			}
			m++
		}
	}
	if m < n && r.ended && int64(len(r.reps)) <= budget {
		m++ // the last row held ends the chunk
	}
	return max(m, 1)
}

// take cuts the next n rows off the pending entries and assembles them
// into a Column; the entries after them stay pending: in new buffers sized
// for another window as large as the largest so far when the window is
// the larger part, else in the same buffers, the window copied out. When the chunk is decoded to its end,
// every pending row is taken (and checkRows checks there are n).
func (r *ColumnReader) take(n int64) (*Column, error) {
	e := r.kept()
	if !r.ended || r.rows-r.done > n {
		e = r.rowStart(int(n))
	}
	head := *r
	if e < r.kept() && e <= r.kept()-e {
		// A short window (rows read past between windows): copy it out
		// and keep the buffers, sized for long windows, for the rest.
		ve := r.valuesBefore(e)
		head.vals = r.vals.cutFront(ve, &r.spare)
		if r.defs != nil {
			head.defs = append([]uint8(nil), r.defs[:e]...)
			r.defs = r.defs[:copy(r.defs, r.defs[e:])]
		}
		if r.reps != nil {
			head.reps = append([]uint8(nil), r.reps[:e]...)
			r.reps = r.reps[:copy(r.reps, r.reps[e:])]
		}
	} else if e < r.kept() {
		ve := r.valuesBefore(e)
		hint := int(r.entryHint(r.most))
		r.vals = head.vals.split(ve, hint, ve, &r.spare)
		if head.defs != nil {
			r.defs = append(takeT(r.bufs, uint8sOf, hint+len(head.defs)-e, hint+len(head.defs)-e), head.defs[e:]...)
			head.defs = head.defs[:e:e]
		}
		if head.reps != nil {
			r.reps = append(takeT(r.bufs, uint8sOf, hint+len(head.reps)-e, hint+len(head.reps)-e), head.reps[e:]...)
			head.reps = head.reps[:e:e]
		}
	} else {
		r.vals, r.defs, r.reps = nil, nil, nil // allocated for the next window
	}
	c, err := head.assemble()
	// The window's levels are assembled (or failed): nothing holds them.
	giveT(r.bufs, uint8sOf, head.defs)
	giveT(r.bufs, uint8sOf, head.reps)
	if err != nil {
		return nil, err
	}
	r.done += n
	if r.vals == nil && !r.ended {
		r.alloc(r.most)
	}
	return c, nil
}

// assemble turns the chunk's levels and values into a Column.
func (r *ColumnReader) assemble() (*Column, error) {
	c := &Column{Info: r.l.info, Kind: r.vals.kind, Width: r.vals.width}
	nv := r.vals.n()
	if r.maxRep == 0 {
		n := r.kept()
		if err := r.checkRows(int64(n)); err != nil {
			return nil, err
		}
		c.Rows = n
		if r.maxDef == 0 {
			r.vals.fill(c, nil)
			return c, nil
		}
		// Count first (eight levels at a time): a window without nulls,
		// the common case, needs no validity.
		nonNull := countLevel(r.defs, uint8(r.maxDef))
		if nonNull != nv {
			return nil, corruptf("%d values for %d non-null rows", nv, nonNull)
		}
		if nonNull == len(r.defs) {
			r.vals.fill(c, nil)
			return c, nil
		}
		valid := takeT(r.bufs, boolsOf, len(r.defs), len(r.defs))[:len(r.defs)]
		for i, d := range r.defs {
			valid[i] = int(d) == r.maxDef
		}
		c.RowValid = valid
		r.vals.fill(c, valid)
		return c, nil
	}

	if r.maxRep == 2 {
		return r.assemble2(c, nv)
	}
	dList := r.l.dList
	if r.maxDef > dList && len(r.defs) == len(r.reps) && allLevels(r.defs, uint8(r.maxDef)) {
		return r.assembleDense(c, nv)
	}
	nr := int(min(r.want, int64(len(r.reps)))) + 1
	offsets := takeT(r.bufs, int64sOf, nr, nr)
	rowValid := takeT(r.bufs, boolsOf, nr, nr)
	elemValid := takeT(r.bufs, boolsOf, len(r.defs), len(r.defs))
	rowNulls, elemNulls := false, false
	var slots int64
	for i, rp := range r.reps {
		d := int(r.defs[i])
		row := int64(len(offsets) - 1)
		if rp == 0 {
			offsets = append(offsets, slots)
			ok := d >= dList
			rowValid = append(rowValid, ok)
			rowNulls = rowNulls || !ok
			row++
		} else if i == 0 {
			return nil, corruptf("column chunk starts in the middle of a list")
		}
		if d > dList {
			ok := d == r.maxDef
			elemValid = append(elemValid, ok)
			elemNulls = elemNulls || !ok
			slots++
		} else if rp != 0 {
			return nil, &rowError{row: r.done + row, err: corruptf("null or empty list marker inside a list (definition level %d, repetition level %d)", d, rp)}
		}
	}
	offsets = append(offsets, slots)
	if err := r.fillLists(c, nv, offsets, rowValid, rowNulls, elemValid, elemNulls); err != nil {
		return nil, err
	}
	return c, nil
}

// fillLists ends the assembly of a list chunk (either depth): it checks
// the rows, len(offsets)-1, and that elemValid's non-null slots are the
// nv values decoded, then sets c's Rows and Offsets, RowValid and
// ElemValid where rowNulls and elemNulls say some are false, and moves
// the values into c, spread over the slots when some element is null.
func (r *ColumnReader) fillLists(c *Column, nv int, offsets []int64, rowValid []bool, rowNulls bool, elemValid []bool, elemNulls bool) error {
	rows := int64(len(offsets) - 1)
	if err := r.checkRows(rows); err != nil {
		return err
	}
	nonNull := 0
	for _, ok := range elemValid {
		if ok {
			nonNull++
		}
	}
	if nonNull != nv {
		return corruptf("%d values for %d non-null elements", nv, nonNull)
	}
	c.Rows = int(rows)
	c.Offsets = offsets
	if rowNulls {
		c.RowValid = rowValid
	} else {
		giveT(r.bufs, boolsOf, rowValid)
	}
	if elemNulls {
		c.ElemValid = elemValid
		r.vals.fill(c, elemValid)
	} else {
		giveT(r.bufs, boolsOf, elemValid)
		r.vals.fill(c, nil)
	}
	return nil
}

// checkRows checks n, the rows assembled: the rows decoded must be the
// row group's row count once the chunk is decoded to its end, and n the
// rows of the window.
func (r *ColumnReader) checkRows(n int64) error {
	if r.ended && r.rows != r.rgRows {
		return corruptf("column chunk holds %d rows, row group has %d", r.rows, r.rgRows)
	}
	if n != r.want {
		return corruptf("column chunk holds %d rows of the window [%d, %d)", n, r.done, r.done+r.want)
	}
	return nil
}

// assembleDense is assemble for a list chunk whose every level entry is a
// present element (all definition levels at the maximum: no null or empty
// list, no null element), the common case: a row starts at each repetition
// level 0, and no validity is kept. It checks what assemble checks.
func (r *ColumnReader) assembleDense(c *Column, nv int) (*Column, error) {
	if len(r.reps) > 0 && r.reps[0] != 0 {
		return nil, corruptf("column chunk starts in the middle of a list")
	}
	if nv != len(r.reps) {
		return nil, corruptf("%d values for %d non-null elements", nv, len(r.reps))
	}
	nr := int(min(r.want, int64(len(r.reps)))) + 1
	offsets := takeT(r.bufs, int64sOf, nr, nr)
	reps := r.reps
	i := 0
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(reps); i += 8 {
		// Skip eight continuing elements at once: w has a zero byte
		// exactly when (w-ones) &^ w has a high bit set.
		if w := binary.LittleEndian.Uint64(reps[i:]); (w-ones)&^w&highs == 0 {
			continue
		}
		for k, rp := range reps[i : i+8] {
			if rp == 0 {
				offsets = append(offsets, int64(i+k))
			}
		}
	}
	for ; i < len(reps); i++ {
		if reps[i] == 0 {
			offsets = append(offsets, int64(i))
		}
	}
	offsets = append(offsets, int64(len(reps)))
	rows := int64(len(offsets) - 1)
	if err := r.checkRows(rows); err != nil {
		return nil, err
	}
	c.Rows = int(rows)
	c.Offsets = offsets
	r.vals.fill(c, nil)
	return c, nil
}
