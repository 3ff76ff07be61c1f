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
