package pqread

// This file assembles lists of lists (two repetition levels).

// assemble2 is assemble for a chunk of two repetition levels (Depth 2): a
// repetition level 0 starts a row, 1 an inner list of the row's list, 2 a
// slot of the inner list. Definition levels below dList are a null row,
// dList an empty row list, below dInner a null inner list, dInner an empty
// inner list, below maxDef a null element.
func (r *ColumnReader) assemble2(c *Column, nv int) (*Column, error) {
	dList, dInner := r.l.dList, r.l.dInner
	nr := int(min(r.want, int64(len(r.reps)))) + 1
	offsets := takeT(r.bufs, int64sOf, nr, nr)
	rowValid := takeT(r.bufs, boolsOf, nr, nr)
	inner := takeT(r.bufs, int64sOf, len(r.reps)+1, len(r.reps)+1)
	listValid := takeT(r.bufs, boolsOf, len(r.reps), len(r.reps))
	elemValid := takeT(r.bufs, boolsOf, len(r.defs), len(r.defs))
	rowNulls, listNulls, elemNulls := false, false, false
	var slots int64
	for i, rp := range r.reps {
		d := int(r.defs[i])
		if rp == 0 {
			offsets = append(offsets, int64(len(inner)))
			ok := d >= dList
			rowValid = append(rowValid, ok)
			rowNulls = rowNulls || !ok
		} else if i == 0 {
			return nil, corruptf("column chunk starts in the middle of a list")
		}
		row := r.done + int64(len(offsets)-1)
		if rp <= 1 {
			if d > dList {
				inner = append(inner, slots)
				ok := d >= dInner
				listValid = append(listValid, ok)
				listNulls = listNulls || !ok
			} else if rp == 1 {
				return nil, &rowError{row: row, err: corruptf("null or empty list marker inside a list (definition level %d, repetition level %d)", d, rp)}
			}
		}
		if d > dInner {
			ok := d == r.maxDef
			elemValid = append(elemValid, ok)
			elemNulls = elemNulls || !ok
			slots++
		} else if rp == 2 {
			return nil, &rowError{row: row, err: corruptf("null or empty list marker inside an inner list (definition level %d, repetition level %d)", d, rp)}
		}
	}
	offsets = append(offsets, int64(len(inner)))
	inner = append(inner, slots)
	if err := r.fillLists(c, nv, offsets, rowValid, rowNulls, elemValid, elemNulls); err != nil {
		return nil, err
	}
	c.InnerOffsets = inner
	if listNulls {
		c.ListValid = listValid
	} else {
		giveT(r.bufs, boolsOf, listValid)
	}
	return c, nil
}
