package shardfmt

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Checks over an open shard that read more than its header and tables: a
// batch's checksums and zero padding, the sample ids section's checksum, and
// the shard digest the manifest records.

// VerifyBatch checks batch k: the block's CRC-32C, that every byte outside
// the slabs' first Count samples is zero, the sample ids' CRC-32C, and that
// unused id slots hold UnusedSampleID. Errors are *FormatError wrapping
// ErrChecksum or ErrCorrupt (or ErrRange, ErrClosed, ErrSize).
func (r *Reader) VerifyBatch(k int) (err error) {
	defer r.faultGuard("block", k, &err)()
	bi, err := r.Batch(k)
	if err != nil {
		return err
	}
	block, err := r.Block(k)
	if err != nil {
		return err
	}
	if got := crc32c(block); got != bi.CRC {
		return ferr(r.path, "block", int64(bi.Offset), k, ErrChecksum, "CRC-32C %08x, stored %08x", got, bi.CRC)
	}
	if p := r.geo.firstNonZeroPadding(block, bi.Count); p >= 0 {
		return ferr(r.path, "block", int64(bi.Offset)+p, k, ErrCorrupt, "nonzero padding byte")
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

// VerifySampleIDs checks the CRC-32C of the whole sample ids section against
// the header (I/O proportional to the sample count: 8 bytes per slot).
func (r *Reader) VerifySampleIDs() (err error) {
	defer r.faultGuard("sample ids", -1, &err)()
	if r.closed {
		return ferr(r.path, "reader", -1, -1, ErrClosed, "")
	}
	var crc uint32
	err = r.chunks(r.h.idsOff, r.h.idsLen, func(b []byte) { crc = crc32Update(crc, b) })
	if err != nil {
		return ferr(r.path, "sample ids", int64(r.h.idsOff), -1, ErrSize, "reading: %v", err)
	}
	if crc != r.h.idsCRC {
		return ferr(r.path, "sample ids", int64(r.h.idsOff), -1, ErrChecksum, "CRC-32C %08x, stored %08x", crc, r.h.idsCRC)
	}
	return nil
}

// chunks calls fn on consecutive pieces of [off, off+n).
func (r *Reader) chunks(off, n uint64, fn func([]byte)) error {
	if r.data != nil {
		fn(r.data[off : off+n])
		return nil
	}
	buf := make([]byte, min(n, 1<<20))
	for n > 0 {
		c := min(n, uint64(len(buf)))
		if _, err := r.ra.ReadAt(buf[:c], int64(off)); err != nil {
			return err
		}
		fn(buf[:c])
		off, n = off+c, n-c
	}
	return nil
}

// Digest returns the shard digest, "sha256:<hex>" of the bytes [0, data_off)
// followed by [batch_table_off, file_len): everything except the batch
// blocks, which it covers transitively through the per-block CRC-32Cs in the
// batch table.
func (r *Reader) Digest() (_ string, err error) {
	defer r.faultGuard("file", -1, &err)()
	if r.closed {
		return "", ferr(r.path, "reader", -1, -1, ErrClosed, "")
	}
	d := sha256.New()
	write := func(b []byte) { d.Write(b) }
	if err := r.chunks(0, r.h.dataOff, write); err != nil {
		return "", fmt.Errorf("digest of %s: %w", r.path, err)
	}
	if err := r.chunks(r.h.btOff, r.h.fileLen-r.h.btOff, write); err != nil {
		return "", fmt.Errorf("digest of %s: %w", r.path, err)
	}
	return "sha256:" + hex.EncodeToString(d.Sum(nil)), nil
}
