package shardfmt

// Where the blocks are: format 1 places block k at data_off + k*block_size;
// format 2 (jagged tensors, blocks of varying size) records each block's
// offset and size in its batch table entry, the blocks tiling the data
// section in step order, and moves the sample ids before the data so a
// writer still streams every section in place.

// block returns the file offset and size of batch k's block (k checked).
func (r *Reader) block(k int) (off, size uint64) {
	if r.h.major < JaggedMajorVersion {
		return r.h.dataOff + uint64(k)*r.h.blockSize, r.h.blockSize
	}
	e := r.entry(k)
	return le.Uint64(e[bBlockOff:]), le.Uint64(e[bBlockLen:])
}

// checkLayoutV2 is checkLayout's part for major 2, from the sample ids on:
// ids right after the metadata, the data section 4096-aligned after them,
// holding between one 4096-byte page and block_size bytes per batch, then
// the batch table and the footer.
func (r *Reader) checkLayoutV2() error {
	h := &r.h
	bad := func(field uint64, format string, args ...any) error {
		return r.fail("header", field, ErrCorrupt, format, args...)
	}
	if h.batchEntryLen < BatchEntryLenV2 {
		return bad(hBatchEntry, "batch entry length %d below %d", h.batchEntryLen, BatchEntryLenV2)
	}
	if h.idsOff != h.metaOff+h.metaLen {
		return bad(hIDsOff, "sample ids offset %d, want %d", h.idsOff, h.metaOff+h.metaLen)
	}
	idsLen, ok := mul64(h.numBatches, h.batchSize*8)
	if !ok || h.idsLen != idsLen {
		return bad(hIDsLen, "sample ids length %d, want %d batches of %d ids", h.idsLen, h.numBatches, h.batchSize)
	}
	idsEnd, ok1 := add64(h.idsOff, h.idsLen)
	dataOff, ok2 := alignUp(idsEnd, BlockAlign)
	if !ok1 || !ok2 || h.dataOff != dataOff || dataOff > h.fileLen {
		return bad(hDataOff, "data offset %d, want %d", h.dataOff, dataOff)
	}
	if h.blockSize == 0 || h.blockSize%BlockAlign != 0 {
		return bad(hBlockSize, "largest block size %d is not a positive multiple of %d", h.blockSize, BlockAlign)
	}
	dataLen := h.btOff - h.dataOff
	most, okMost := mul64(h.numBatches, h.blockSize)
	least, okLeast := mul64(h.numBatches, BlockAlign)
	if h.btOff < h.dataOff || dataLen%BlockAlign != 0 || !okLeast || dataLen < least || (okMost && dataLen > most) {
		return bad(hBTOff, "batch table offset %d: %d data bytes for %d batches of at most %d bytes", h.btOff, dataLen, h.numBatches, h.blockSize)
	}
	btLen, ok := mul64(h.numBatches, uint64(h.batchEntryLen))
	if !ok || h.btLen != btLen {
		return bad(hBTLen, "batch table length %d, want %d entries of %d bytes", h.btLen, h.numBatches, h.batchEntryLen)
	}
	footerOff, ok := add64(h.btOff, h.btLen)
	if !ok || h.footerOff != footerOff {
		return bad(hFooterOff, "footer offset %d", h.footerOff)
	}
	if fl, ok := add64(h.footerOff, FooterLen); !ok || fl != h.fileLen {
		return bad(hFileLen, "file length %d, footer ends at %d", h.fileLen, fl)
	}
	return nil
}

// checkBlocksV2 checks the format-2 fields of the batch table (already
// checked against its CRC): block k starts where block k-1 ends (block 0 at
// data_off), its size is the canonical size for its values counts
// (Geometry.BatchLayout) and at most block_size, the blocks end exactly at
// the batch table, and block_size is the largest block (for an empty shard,
// the size of a block without values). Run after the tensor table, which
// fixes the number of jagged tensors.
func (r *Reader) checkBlocksV2(bt []byte) error {
	h := &r.h
	jagged := 0
	for i := range r.tensors {
		if r.geo.IsJagged(i) {
			jagged++
		}
	}
	if need := uint64(BatchEntryLenV2 + 8*jagged); uint64(h.batchEntryLen) < need {
		return r.fail("header", hBatchEntry, ErrCorrupt, "batch entry length %d, %d jagged tensors need %d", h.batchEntryLen, jagged, need)
	}
	stride := uint64(h.batchEntryLen)
	pos, largest := h.dataOff, uint64(0)
	for k := uint64(0); k < h.numBatches; k++ {
		e := bt[k*stride:]
		at := int64(h.btOff + k*stride)
		off, size := le.Uint64(e[bBlockOff:]), le.Uint64(e[bBlockLen:])
		if off != pos {
			return ferr(r.path, "batch table", at+bBlockOff, int(k), ErrCorrupt, "block offset %d, want %d (blocks follow each other)", off, pos)
		}
		want, ok := r.geo.placeValues(func(j int) uint64 { return le.Uint64(e[bValues+8*j:]) }, nil)
		if !ok || size != want || size > h.blockSize {
			return ferr(r.path, "batch table", at+bBlockLen, int(k), ErrCorrupt,
				"block size %d, want %d for its values counts, at most the largest block %d", size, want, h.blockSize)
		}
		end, ok := add64(pos, size)
		if !ok || end > h.btOff {
			return ferr(r.path, "batch table", at+bBlockLen, int(k), ErrCorrupt, "block [%d, +%d) runs past the data section", off, size)
		}
		pos, largest = end, max(largest, size)
	}
	if pos != h.btOff {
		return r.fail("batch table", h.btOff, ErrCorrupt, "blocks end at %d, batch table starts at %d", pos, h.btOff)
	}
	if h.numBatches == 0 {
		largest, _ = r.geo.placeValues(func(int) uint64 { return 0 }, nil)
	}
	if largest != h.blockSize {
		return r.fail("header", hBlockSize, ErrCorrupt, "largest block size %d, the blocks' largest is %d", h.blockSize, largest)
	}
	return nil
}
