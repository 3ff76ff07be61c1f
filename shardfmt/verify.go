package shardfmt

// VerifyBatch checks batch k: the block's CRC-32C, that every byte outside
// the slabs' first Count samples (a jagged tensor's offsets and values) is
// zero, each jagged tensor's offsets (as Jagged does), the sample ids'
// CRC-32C, and that unused id slots hold UnusedSampleID. Errors are *FormatError wrapping
// ErrChecksum or ErrCorrupt (or ErrRange, ErrClosed, ErrSize).
func (r *Reader) VerifyBatch(k int) (err error) {
	defer r.faultGuard("block", k, &err)()
	block, err := r.Block(k)
	if err != nil {
		return err
	}
	return r.VerifyBlock(k, block)
}

// VerifyBlock is VerifyBatch for batch k's block already read into block
// (ReadBlock): a checker reading every block with pread into one reused
// buffer checks it without a mapping, so a file cut short under it gives
// ErrSize, never a fault. block must hold at least the batch's
// BatchInfo.Size bytes.
func (r *Reader) VerifyBlock(k int, block []byte) (err error) {
	defer r.faultGuard("sample ids", k, &err)()
	return r.verifyBlock(k, block, nil)
}

// VerifyBlockSlots is VerifyBlock for batch k whose BatchSize sample id
// slots were read and checked against their CRC-32C already
// (ReadSampleIDSlots, which checks many batches' slots with one read):
// the same checks in the same order with the same errors, except that
// the slots' CRC-32C is not computed again; the unused slots are checked
// in slots. slots must hold the batch's BatchSize slots as
// ReadSampleIDSlots returns them (ErrInvalid otherwise).
func (r *Reader) VerifyBlockSlots(k int, block []byte, slots []uint64) (err error) {
	defer r.faultGuard("sample ids", k, &err)()
	if len(slots) != r.geo.BatchSize {
		return ferr(r.path, "sample ids", -1, k, ErrInvalid, "%d id slots, batch size is %d", len(slots), r.geo.BatchSize)
	}
	return r.verifyBlock(k, block, slots)
}

// verifyBlock is VerifyBlock, taking the id slots from slots when it is
// not nil (checked by the caller) instead of reading and checking them.
func (r *Reader) verifyBlock(k int, block []byte, slots []uint64) error {
	bi, err := r.Batch(k)
	if err != nil {
		return err
	}
	if uint64(len(block)) < bi.Size {
		return ferr(r.path, "block", -1, k, ErrInvalid, "buffer of %d bytes, block is %d", len(block), bi.Size)
	}
	block = block[:bi.Size]
	if got := crc32c(block); got != bi.CRC {
		return ferr(r.path, "block", int64(bi.Offset), k, ErrChecksum, "CRC-32C %08x, stored %08x", got, bi.CRC)
	}
	if p := r.geo.firstNonZeroPadding(block, bi.Count, func(j int) uint64 { return r.valuesCount(k, j) }); p >= 0 {
		return ferr(r.path, "block", int64(bi.Offset)+p, k, ErrCorrupt, "nonzero padding byte")
	}
	for i := range r.tensors {
		if r.geo.IsJagged(i) {
			if _, err := r.Jagged(k, block, i); err != nil {
				return err
			}
		}
	}
	if slots != nil {
		for j := bi.Count; j < r.geo.BatchSize; j++ {
			if id := slots[j]; id != UnusedSampleID {
				off := r.h.idsOff + uint64(k)*r.h.batchSize*8 + uint64(8*j)
				return ferr(r.path, "sample ids", int64(off), k, ErrCorrupt, "unused slot %d holds id %d", j, id)
			}
		}
		return nil
	}
	ids, err := r.rawIDs(k)
	if err != nil {
		return err
	}
	for j := bi.Count; j < r.geo.BatchSize; j++ {
		if id := le.Uint64(ids[8*j:]); id != UnusedSampleID {
			off := r.h.idsOff + uint64(k)*r.h.batchSize*8 + uint64(8*j)
			return ferr(r.path, "sample ids", int64(off), k, ErrCorrupt, "unused slot %d holds id %d", j, id)
		}
	}
	return nil
}
