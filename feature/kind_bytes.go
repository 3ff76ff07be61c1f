package feature

import (
	"encoding/binary"
	"fmt"
	"sync"
	"unsafe"

	"github.com/prepml/prep/pqread"
)

// hashKind is one string or binary column hashed per sample (bytes.mode
// hash): FNV-1a 64 of the value's bytes modulo bytes.buckets, as I64. Its
// column is read in dictionary form, each dictionary entry hashed once.
type hashKind struct {
	*tensorPlan
	buckets uint64
	dicts   dictHashes
}

// dictHashes keeps the hashed entries of the dictionaries last hashed by
// applyDict: a column chunk's transform is applied block by block, and
// its dictionary is hashed once, not once per block. Decode workers share
// it.
type dictHashes struct {
	mu   sync.Mutex
	last [4]dictHashed // one per dictionary recently in use
	next int           // the entry to replace next
}

// dictHashed is one dictionary's entries hashed: it holds the
// dictionary's slices, so that their memory cannot be another
// dictionary's while it is kept.
type dictHashed struct {
	data []byte
	offs []int64
	hash []uint64 // bucket of each entry
	size []int64  // bytes of each entry
}

// of returns the bucket and size of each dictionary entry of col,
// hashing them unless they are kept.
func (h *dictHashes) of(col *pqread.Column, buckets uint64) (hash []uint64, size []int64) {
	same := func(e *dictHashed) bool {
		return len(e.offs) == len(col.DictOffsets) && len(e.data) == len(col.DictData) &&
			unsafe.SliceData(e.offs) == unsafe.SliceData(col.DictOffsets) && unsafe.SliceData(e.data) == unsafe.SliceData(col.DictData)
	}
	h.mu.Lock()
	for i := range h.last {
		if e := &h.last[i]; e.offs != nil && same(e) {
			hash, size = e.hash, e.size // read under the lock: the entry may be replaced once it is released
			h.mu.Unlock()
			return hash, size
		}
	}
	h.mu.Unlock()
	ne := len(col.DictOffsets) - 1
	hash, size = make([]uint64, ne), make([]int64, ne)
	for e := range ne {
		v := col.DictData[col.DictOffsets[e]:col.DictOffsets[e+1]]
		hash[e], size[e] = FNV1a64(v)%buckets, int64(len(v))
	}
	h.mu.Lock()
	h.last[h.next] = dictHashed{data: col.DictData, offs: col.DictOffsets, hash: hash, size: size}
	h.next = (h.next + 1) % len(h.last)
	h.mu.Unlock()
	return hash, size
}

// padKind is one string or binary column padded per sample (bytes.mode
// pad): the value's bytes, zero-padded to max_len, as U8 [max_len]; a
// longer value is cut under bytes.truncate, else refused.
type padKind struct {
	*tensorPlan
	maxLen   int64
	truncate bool
}

// rowCost counts a hashed string at 32 bytes per row.
func (tp *hashKind) rowCost() int64 { return 2*32 + 2 }

// dictForm: strings are hashed once per dictionary entry.
func (tp *hashKind) dictForm() bool { return true }

// rowCost counts the max_len bytes of a row's value.
func (tp *padKind) rowCost() int64 { return 2*tp.maxLen + 2 }

// apply writes each needed row's bucket, a null as nulls.fill, with its
// mask; a column in dictionary form goes to applyDict.
func (tp *hashKind) apply(col, _ *pqread.Column, _, _ int, runs []RowRun, bufs *Records, loc chunkLoc, _ *valueWriter) error {
	if col.DictIndex != nil {
		return tp.applyDict(col, runs, bufs, loc)
	}
	for _, r := range runs {
		for i := r.Lo; i < r.Hi; i++ {
			slot := r.Dst + int64(i-r.Lo)
			v, null, err := tp.rowBytes(col, i, slot, bufs, loc)
			if err != nil {
				return err
			}
			d := bufs.At(tp.out, slot)
			if null {
				copy(d, tp.fill)
			} else {
				binary.LittleEndian.PutUint64(d, FNV1a64(v)%tp.buckets)
			}
		}
	}
	return nil
}

// applyDict is apply for a column in dictionary form
// (pqread.Column.DictIndex): each dictionary entry is hashed once, then
// every row takes its entry's bucket. Rows are checked in the same order
// with the same errors as apply.
func (tp *hashKind) applyDict(col *pqread.Column, runs []RowRun, bufs *Records, loc chunkLoc) error {
	hash, size := tp.dicts.of(col, tp.buckets)
	for _, r := range runs {
		for i := r.Lo; i < r.Hi; i++ {
			slot := r.Dst + int64(i-r.Lo)
			null := col.RowValid != nil && !col.RowValid[i]
			if null && tp.fill == nil {
				return tp.nullError(col, loc, i)
			}
			tp.putMask(bufs, slot, !null)
			d := bufs.At(tp.out, slot)
			if null {
				copy(d, tp.fill)
				continue
			}
			e := col.DictIndex[i]
			if tp.maxValue > 0 && size[e] > tp.maxValue {
				return loc.err(int64(i), -1, ValueErrorf("value is %d bytes long, more than max_value_bytes %d", size[e], tp.maxValue))
			}
			binary.LittleEndian.PutUint64(d, hash[e])
		}
	}
	return nil
}

// apply writes each needed row's value zero-padded to max_len, a null as
// an empty value, with its mask and length.
func (tp *padKind) apply(col, _ *pqread.Column, _, _ int, runs []RowRun, bufs *Records, loc chunkLoc, _ *valueWriter) error {
	if col.DictIndex != nil {
		return fmt.Errorf("%w: dictionary-form column for tensor %s outside hash mode", ErrInternal, tp.spec.Name)
	}
	L := int(tp.maxLen)
	for _, r := range runs {
		for i := r.Lo; i < r.Hi; i++ {
			slot := r.Dst + int64(i-r.Lo)
			v, _, err := tp.rowBytes(col, i, slot, bufs, loc)
			if err != nil {
				return err
			}
			if int64(len(v)) > tp.maxLen && !tp.truncate {
				return loc.err(int64(i), -1, tp.tooLong("bytes", len(v), L))
			}
			d := bufs.At(tp.out, slot)
			n := copy(d, v)
			clear(d[n:])
			tp.putLength(bufs, slot, int64(len(v)))
		}
	}
	return nil
}

// rowBytes returns row i's value of a string or binary column (nil and
// null true for a null row), after writing the row's mask at slot. A null
// without a fill and a value longer than max_value_bytes are *Error
// naming the row (chunkLoc).
func (tp *tensorPlan) rowBytes(col *pqread.Column, i int, slot int64, bufs *Records, loc chunkLoc) (v []byte, null bool, err error) {
	null = col.RowValid != nil && !col.RowValid[i]
	if null && tp.fill == nil {
		return nil, true, tp.nullError(col, loc, i)
	}
	tp.putMask(bufs, slot, !null)
	if null {
		return nil, true, nil
	}
	v = slotBytes(col, i)
	if tp.maxValue > 0 && int64(len(v)) > tp.maxValue {
		return nil, false, loc.err(int64(i), -1, ValueErrorf("value is %d bytes long, more than max_value_bytes %d", len(v), tp.maxValue))
	}
	return v, false, nil
}
