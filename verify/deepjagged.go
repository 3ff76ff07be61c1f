package verify

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	"github.com/prepml/prep/shardfmt"
)

// JaggedSource is implemented by a SampleSource that materializes jagged
// tensors (shard format 2.0). verify --deep requires it of the source of a
// shard with a jagged tensor; a source without it gets one
// source_unreadable finding for the shard, whose values are then not
// compared.
//
// For each compared batch of such a shard verify calls FillBlock (the
// fixed-shape tensors), then JaggedValues once per jagged tensor in table
// order with the same ids, places each jagged tensor's offsets (b+1 int64
// little-endian at its SlabOffset, offsets[0] = 0, the unused slots'
// equal to the values count N) and values (at the offset
// shardfmt.Geometry.BatchLayout gives for the N of every jagged tensor) in
// the expected block and compares it with the shard's block byte for byte.
type JaggedSource interface {
	// JaggedValues returns, for jagged tensor t (its index in the shard's
	// tensor table) and each of ids in slot order, that sample's expected
	// values: the C-order [n, per-value shape...] array of little-endian
	// elements, n >= 0 values of Geometry.SampleBytes[t] bytes each, so
	// len(values[i]) is a multiple of SampleBytes[t] (0 for an empty
	// list). len(values) = len(ids). The slices may alias the source's
	// memory; they must stay valid until the next FillBlock, Prefetch or
	// Close. An error is reported as a source_unreadable finding for the
	// batch.
	JaggedValues(ctx context.Context, t int, ids []uint64) (values [][]byte, err error)
}

// jaggedCheck is the part of a deepCheck for a shard with jagged tensors.
type jaggedCheck struct {
	src     JaggedSource
	tensors []int      // indexes of the jagged tensors, table order
	vals    [][][]byte // per jagged tensor: the expected values of each slot
	counts  []uint64   // per jagged tensor: the expected values count N
	// perSample is the fixed-shape tensors' bytes of one sample plus 8 bytes
	// of offset per jagged tensor; valuesStart is where the first values
	// slab of a block starts (the end of its fixed part, 256-aligned).
	perSample, valuesStart uint64
	dirty                  int // bytes of want that may be nonzero
}

func (d *deepCheck) initJagged(src JaggedSource) {
	j := &jaggedCheck{src: src}
	for t := range d.tensors {
		if d.g.IsJagged(t) {
			j.tensors = append(j.tensors, t)
			j.perSample += 8
		} else {
			j.perSample += d.g.SampleBytes[t]
		}
	}
	j.vals = make([][][]byte, len(j.tensors))
	j.counts = make([]uint64, len(j.tensors))
	if lay, err := d.g.BatchLayout(j.counts); err == nil {
		j.valuesStart = lay.ValuesOffset[j.tensors[0]]
	}
	d.jag = j
}

// batchBytes estimates the sample bytes a source holds for batch k of n
// samples: n samples of every tensor for a fixed-shape shard; with jagged
// tensors, n samples of the fixed-shape tensors and their offsets plus the
// batch's values slabs, bounded by its block's bytes past the fixed part
// (the batch table's size, so the estimate never reads a block).
func (d *deepCheck) batchBytes(k, n int) uint64 {
	if d.jag == nil {
		return uint64(n) * d.per
	}
	b := uint64(n) * d.jag.perSample
	if bi, err := d.r.Batch(k); err == nil && bi.Size > d.jag.valuesStart {
		b += bi.Size - d.jag.valuesStart
	}
	return b
}

// compareJagged builds the expected block of batch k of a shard with
// jagged tensors and compares it with got, reporting per tensor and
// sample the first difference: a values count (offsets) or an element.
func (d *deepCheck) compareJagged(ctx context.Context, k int, got []byte, ids []uint64) {
	j := d.jag
	clear(d.want[:j.dirty])
	j.dirty = len(d.want)
	if err := d.src.FillBlock(ctx, ids, d.want); err != nil {
		d.s.add(Finding{Kind: KindSourceUnreadable, Batch: intp(k), Message: err.Error()})
		return
	}
	for x, t := range j.tensors {
		vals, err := j.src.JaggedValues(ctx, t, ids)
		if err == nil && len(vals) != len(ids) {
			err = fmt.Errorf("source gave %d samples of tensor %q for %d ids", len(vals), d.tensors[t].Name, len(ids))
		}
		if err != nil {
			d.s.add(Finding{Kind: KindSourceUnreadable, Batch: intp(k), Tensor: d.tensors[t].Name, Message: err.Error()})
			return
		}
		vb := d.g.SampleBytes[t]
		var n uint64
		for i, v := range vals {
			if uint64(len(v))%vb != 0 {
				d.s.add(Finding{Kind: KindSourceUnreadable, Batch: intp(k), Tensor: d.tensors[t].Name, SampleID: u64p(ids[i]),
					Message: fmt.Sprintf("slot %d: source gave %d bytes, not a whole number of %d-byte values", i, len(v), vb)})
				return
			}
			n += uint64(len(v)) / vb
		}
		j.vals[x], j.counts[x] = vals, n
	}
	lay, err := d.g.BatchLayout(j.counts)
	if err != nil {
		d.s.add(Finding{Kind: KindSourceUnreadable, Batch: intp(k), Message: fmt.Sprintf("laying out values counts %v: %v", j.counts, err)})
		return
	}
	if lay.Size > uint64(len(d.want)) {
		// More values than the shard's largest block holds: the shard
		// lacks some, reported below.
		w := make([]byte, lay.Size)
		copy(w, d.want)
		d.want, j.dirty = w, len(w)
	}
	want := d.want[:lay.Size]
	for x, t := range j.tensors {
		vb := d.g.SampleBytes[t]
		off, pos := d.g.SlabOffset[t], lay.ValuesOffset[t]
		var n uint64
		for i := 0; i <= d.g.BatchSize; i++ {
			binary.LittleEndian.PutUint64(want[off+8*uint64(i):], n)
			if i < len(ids) {
				copy(want[pos+n*vb:], j.vals[x][i])
				n += uint64(len(j.vals[x][i])) / vb
			}
		}
	}
	j.dirty = int(lay.Size)
	d.s.res.deep++
	if bytes.Equal(got, want) {
		return
	}
	found := d.diffFixed(k, got, want, ids)
	for x, t := range j.tensors {
		found = d.diffJagged(k, t, got, ids, j.vals[x]) || found
	}
	if !found {
		d.s.add(Finding{Kind: KindValueMismatch, Batch: intp(k), Message: "bytes outside the present samples are not zero"})
	}
}

// diffJagged reports, per sample of jagged tensor t, a values count that
// differs from the source's (What "values count") or else the first
// element that differs (What "value"; Element counts the sample's
// elements row-major, across its values), and whether any differs.
func (d *deepCheck) diffJagged(k, t int, got []byte, ids []uint64, vals [][]byte) bool {
	ti := d.tensors[t]
	s, err := d.r.Jagged(k, got, t)
	if err != nil {
		// Bad offsets fail VerifyBlock too, so the batch check has
		// reported this batch already.
		return true
	}
	vb := int(d.g.SampleBytes[t])
	found := false
	for i := range ids {
		if f := jaggedDiff(k, ti, s, i, ids[i], vals[i], vb); f != nil {
			found = true
			d.s.add(*f)
		}
	}
	return found
}

// jaggedDiff is valueDiff for slot i of the jagged slab s of tensor ti in
// batch k, whose source values w are vb bytes each: the finding for
// another values count than the source's, else for the first element
// that differs; nil when the slot holds the source's values.
func jaggedDiff(k int, ti shardfmt.TensorInfo, s shardfmt.JaggedSlab, i int, id uint64, w []byte, vb int) *Finding {
	a0, a1 := s.Offset(i), s.Offset(i+1)
	if a1-a0 != len(w)/vb {
		return &Finding{Kind: KindValueMismatch, Batch: intp(k), Tensor: ti.Name, SampleID: u64p(id),
			What: "values count", Expected: fmt.Sprint(len(w) / vb), Actual: fmt.Sprint(a1 - a0),
			Message: fmt.Sprintf("slot %d holds another number of values than the source (offsets[%d:%d] = %d, %d)", i, i, i+2, a0, a1)}
	}
	return valueDiff(k, ti, i, id, s.Values[a0*vb:a1*vb], w)
}

// firstJagged returns the name of the first jagged tensor of ts, or "".
func firstJagged(ts []shardfmt.TensorInfo) string {
	for _, t := range ts {
		if t.Jagged {
			return t.Name
		}
	}
	return ""
}
