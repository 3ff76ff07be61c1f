package shardfmt

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// reseal recomputes every checksum of a shard image after a test edited it
// deliberately, so that the edit is seen by the structural checks rather
// than the checksums. It trusts the header's offsets.
func reseal(b []byte) {
	var h header
	h.headerLen = le.Uint32(b[hHeaderLen:])
	h.decode(b)
	n := uint64(len(b))
	clip := func(off, l uint64) []byte {
		if off > n {
			return nil
		}
		return b[off : off+min(l, n-off)]
	}
	le.PutUint32(b[hTTCRC:], crc32c(clip(h.ttOff, h.ttLen)))
	le.PutUint32(b[hMetaCRC:], crc32c(clip(h.metaOff, h.metaLen)))
	le.PutUint32(b[hBTCRC:], crc32c(clip(h.btOff, h.btLen)))
	le.PutUint32(b[hIDsCRC:], crc32c(clip(h.idsOff, h.idsLen)))
	hl := h.headerLen
	le.PutUint32(b[hl-4:], crc32c(b[:hl-4]))
	h.decode(b)
	f := b[n-FooterLen:]
	le.PutUint32(f[fTTCRC:], h.ttCRC)
	le.PutUint32(f[fMetaCRC:], h.metaCRC)
	le.PutUint32(f[fBTCRC:], h.btCRC)
	le.PutUint32(f[fIDsCRC:], h.idsCRC)
	le.PutUint32(f[fHeaderCRC:], h.crc)
	le.PutUint32(f[fCRC:], crc32c(f[:fCRC]))
}

// TestCorruption damages a good shard one way per case and states where the
// damage must be reported: at open (Open and OpenReaderAt both fail with
// the given sentinel and section) or at batch verification (open succeeds,
// VerifyBatch of the named batch fails, the other batches verify).
func TestCorruption(t *testing.T) {
	dir := t.TempDir()
	opts := testOpts(5, 4)
	good := filepath.Join(dir, "good.shard")
	writeShard(t, good, opts, []int{5, 5, 3, 1}, []int{0, 2, 3, 0}, 9)
	orig, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(good)
	if err != nil {
		t.Fatal(err)
	}
	lay := r.Layout()
	geo := r.Geometry()
	r.Close()
	reg := func(name string) Region {
		for _, x := range lay.Regions {
			if x.Name == name {
				return x
			}
		}
		t.Fatalf("no region %q", name)
		return Region{}
	}
	tt, meta, pad, bt, ids, foot := reg("tensor table"), reg("metadata"), reg("padding"), reg("batch table"), reg("sample ids"), reg("footer")
	flip := func(off uint64) func([]byte) []byte {
		return func(b []byte) []byte { b[off] ^= 0x40; return b }
	}
	block2 := lay.Block(2)

	tests := []corruptCase{
		{"truncate one byte", func(b []byte) []byte { return b[:len(b)-1] }, atOpen, ErrSize, "file", 0},
		{"truncate 4096 bytes", func(b []byte) []byte { return b[:len(b)-4096] }, atOpen, ErrSize, "file", 0},
		{"truncate into header", func(b []byte) []byte { return b[:100] }, atOpen, ErrSize, "file", 0},
		{"empty file", func(b []byte) []byte { return b[:0] }, atOpen, ErrSize, "file", 0},
		{"extra trailing byte", func(b []byte) []byte { return append(b, 0) }, atOpen, ErrSize, "file", 0},
		{"zero magic", func(b []byte) []byte { clear(b[:8]); return b }, atOpen, ErrMagic, "header", 0},
		{"big-endian marker", func(b []byte) []byte { copy(b[hByteOrder:], []byte{1, 2, 3, 4}); return b }, atOpen, ErrEndian, "header", 0},
		{"unknown major version", func(b []byte) []byte { b[hMajor] = 3; return b }, atOpen, ErrVersion, "header", 0},
		{"unknown major version, resealed", func(b []byte) []byte { b[hMajor] = 3; reseal(b); return b }, atOpen, ErrVersion, "header", 0},
		{"format 1 relabelled major 2, resealed", func(b []byte) []byte { b[hMajor] = 2; reseal(b); return b }, atOpen, ErrCorrupt, "header", 0},
		{"flip header byte", flip(hDataOff + 1), atOpen, ErrChecksum, "header", 0},
		{"flip header reserved byte", flip(200), atOpen, ErrChecksum, "header", 0},
		{"flip header checksum", flip(HeaderLen - 1), atOpen, ErrChecksum, "header", 0},
		{"header length not a multiple of 8", func(b []byte) []byte { b[hHeaderLen] = 255; return b }, atOpen, ErrCorrupt, "header", 0},
		{"data offset moved, resealed", func(b []byte) []byte {
			le.PutUint64(b[hDataOff:], le.Uint64(b[hDataOff:])+4096)
			reseal(b)
			return b
		}, atOpen, ErrCorrupt, "header", 0},
		{"num batches huge, resealed", func(b []byte) []byte { le.PutUint64(b[hNumBatches:], 1<<62); reseal(b); return b }, atOpen, ErrCorrupt, "header", 0},
		{"block size not aligned, resealed", func(b []byte) []byte { le.PutUint64(b[hBlockSize:], 4095); reseal(b); return b }, atOpen, ErrCorrupt, "header", 0},
		{"flip tensor table entry", flip(tt.Offset + TensorEntryLen + tShape), atOpen, ErrChecksum, "tensor table", 0},
		{"flip tensor name", flip(tt.Offset + 3*TensorEntryLen), atOpen, ErrChecksum, "tensor table", 0},
		{"bad dtype, resealed", func(b []byte) []byte { le.PutUint16(b[tt.Offset+tDType:], 99); reseal(b); return b }, atOpen, ErrCorrupt, "tensor table", 0},
		{"rank 9, resealed", func(b []byte) []byte { le.PutUint16(b[tt.Offset+tRank:], 9); reseal(b); return b }, atOpen, ErrCorrupt, "tensor table", 0},
		{"shape disagrees with sample bytes, resealed", func(b []byte) []byte {
			le.PutUint64(b[tt.Offset+tShape:], 4)
			reseal(b)
			return b
		}, atOpen, ErrCorrupt, "tensor table", 0},
		{"slab offset unaligned, resealed", func(b []byte) []byte {
			le.PutUint64(b[tt.Offset+TensorEntryLen+tSlabOff:], 300)
			reseal(b)
			return b
		}, atOpen, ErrCorrupt, "tensor table", 0},
		{"slabs overlap, resealed", func(b []byte) []byte {
			le.PutUint64(b[tt.Offset+TensorEntryLen+tSlabOff:], 0)
			reseal(b)
			return b
		}, atOpen, ErrCorrupt, "tensor table", 0},
		{"name outside pool, resealed", func(b []byte) []byte {
			le.PutUint64(b[tt.Offset+tNameOff:], 1<<40)
			reseal(b)
			return b
		}, atOpen, ErrCorrupt, "tensor table", 0},
		{"duplicate name, resealed", func(b []byte) []byte {
			e1 := b[tt.Offset+TensorEntryLen:]
			le.PutUint64(e1[tNameOff:], le.Uint64(b[tt.Offset+tNameOff:]))
			reseal(b)
			return b
		}, atOpen, ErrCorrupt, "tensor table", 0},
		{"flip metadata", flip(meta.Offset + 2), atOpen, ErrChecksum, "metadata", 0},
		{"metadata not JSON, resealed", func(b []byte) []byte { b[meta.Offset] = '['; reseal(b); return b }, atOpen, ErrCorrupt, "metadata", 0},
		{"nonzero padding before data", flip(pad.Offset + pad.Size - 1), atOpen, ErrCorrupt, "padding", 0},
		{"flip batch table", flip(bt.Offset + BatchEntryLen + bCount), atOpen, ErrChecksum, "batch table", 0},
		{"count above batch size, resealed", func(b []byte) []byte {
			le.PutUint32(b[bt.Offset+BatchEntryLen+bCount:], 6)
			reseal(b)
			return b
		}, atOpen, ErrCorrupt, "batch table", 0},
		{"pads above count, resealed", func(b []byte) []byte {
			le.PutUint32(b[bt.Offset+3*BatchEntryLen+bPads:], 2)
			reseal(b)
			return b
		}, atOpen, ErrCorrupt, "batch table", 0},
		{"flip footer magic", flip(foot.Offset), atOpen, ErrMagic, "footer", 0},
		{"flip footer field", flip(foot.Offset + fBTCRC), atOpen, ErrChecksum, "footer", 0},
		{"flip data byte", flip(block2.Offset + geo.SlabOffset[0] + 5), atVerify, ErrChecksum, "block", 2},
		{"flip block padding", flip(block2.Offset + block2.Size - 1), atVerify, ErrChecksum, "block", 2},
		{"flip unused slot", flip(block2.Offset + geo.SlabOffset[1] + 4*8), atVerify, ErrChecksum, "block", 2},
		{"nonzero unused slot, CRC fixed", func(b []byte) []byte {
			blk := b[block2.Offset : block2.Offset+block2.Size]
			blk[geo.SlabOffset[1]+4*8] = 7 // batch 2 has 3 samples: slot 4 is unused
			le.PutUint32(b[bt.Offset+2*BatchEntryLen+bBlockCRC:], crc32c(blk))
			reseal(b)
			return b
		}, atVerify, ErrCorrupt, "block", 2},
		{"flip sample id", flip(ids.Offset + 3*5*8 + 1), atVerify, ErrChecksum, "sample ids", 3},
		{"unused id slot set, CRC fixed", func(b []byte) []byte {
			s := b[ids.Offset+3*5*8 : ids.Offset+4*5*8]
			le.PutUint64(s[8*4:], 12)
			le.PutUint32(b[bt.Offset+3*BatchEntryLen+bIDsCRC:], crc32c(s))
			reseal(b)
			return b
		}, atVerify, ErrCorrupt, "sample ids", 3},
		{"bump minor version, resealed", func(b []byte) []byte { b[hMinor] = 7; reseal(b); return b }, never, nil, "", 0},
		{"unknown reserved header field, resealed", func(b []byte) []byte { b[200] = 0xAB; reseal(b); return b }, never, nil, "", 0},
		{"unknown metadata field, resealed", func(b []byte) []byte {
			// Replace the leading "{" with "{\"x\":1," by shifting into the padding.
			m := b[meta.Offset : meta.Offset+meta.Size+6]
			copy(m[7:], m[1:meta.Size])
			copy(m, `{"x":1,`)
			le.PutUint64(b[hMetaLen:], meta.Size+6)
			reseal(b)
			return b
		}, never, nil, "", 0},
	}
	runCorruption(t, orig, tests)
}

// when says where a corruption case must be reported.
type when int

const (
	atOpen   when = iota // Open and OpenReaderAt fail
	atVerify             // VerifyBatch of one batch fails
	never                // the file stays valid
)

// corruptCase damages a good shard one way.
type corruptCase struct {
	name    string
	damage  func([]byte) []byte
	when    when
	err     error
	section string
	batch   int // for atVerify
}

// runCorruption applies each case to a copy of orig and checks that it is
// reported where and as the case says.
func runCorruption(t *testing.T, orig []byte, tests []corruptCase) {
	dir := t.TempDir()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			img := tc.damage(bytes.Clone(orig))
			path := filepath.Join(dir, "bad.shard")
			if err := os.WriteFile(path, img, 0o644); err != nil {
				t.Fatal(err)
			}
			r1, err1 := Open(path)
			r2, err2 := OpenReaderAt(bytes.NewReader(img), int64(len(img)), path)
			for i, err := range []error{err1, err2} {
				if tc.when != atOpen {
					if err != nil {
						t.Fatalf("open %d: %v, want success", i, err)
					}
					continue
				}
				var fe *FormatError
				if !errors.Is(err, tc.err) || !errors.As(err, &fe) || fe.Section != tc.section || fe.Path != path {
					t.Fatalf("open %d: %v, want %v in section %q", i, err, tc.err, tc.section)
				}
			}
			if tc.when == atOpen {
				return
			}
			defer r1.Close()
			for _, r := range []*Reader{r1, r2} {
				for k := range r.NumBatches() {
					err := r.VerifyBatch(k)
					if tc.when == atVerify && k == tc.batch {
						var fe *FormatError
						if !errors.Is(err, tc.err) || !errors.As(err, &fe) || fe.Section != tc.section || fe.Batch != k {
							t.Errorf("VerifyBatch(%d) = %v, want %v in %q", k, err, tc.err, tc.section)
						}
					} else if err != nil {
						t.Errorf("VerifyBatch(%d) = %v, want nil", k, err)
					}
					checkVerifyBlockSlots(t, r, k)
				}
			}
		})
	}
}

// checkVerifyBlockSlots asserts that VerifyBlockSlots, given batch k's
// id slots as ReadSampleIDSlots read and checked them, returns what
// VerifyBlock returns for the same block (nil, or the same error); and
// that where ReadSampleIDSlots refuses the slots, VerifyBlock fails too.
func checkVerifyBlockSlots(t *testing.T, r *Reader, k int) {
	t.Helper()
	block := make([]byte, r.Geometry().BlockSize)
	if err := r.ReadBlock(k, block); err != nil {
		t.Fatalf("ReadBlock(%d): %v", k, err)
	}
	want := r.VerifyBlock(k, block)
	slots, err := r.ReadSampleIDSlots(k, 1, nil)
	if err != nil {
		if want == nil {
			t.Errorf("batch %d: ReadSampleIDSlots = %v, but VerifyBlock = nil", k, err)
		}
		return
	}
	got := r.VerifyBlockSlots(k, block, slots)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("batch %d: VerifyBlockSlots = %v, VerifyBlock = %v", k, got, want)
	}
	if err := r.VerifyBlockSlots(k, block, slots[:len(slots)-1]); !errors.Is(err, ErrInvalid) {
		t.Errorf("batch %d: VerifyBlockSlots with one slot short = %v, want ErrInvalid", k, err)
	}
}

// TestTruncatedShardNamesSizes pins the message for a shard cut short after
// it was built: it names the file and both sizes, and no mapping is made.
func TestTruncatedShardNamesSizes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rank-00000.shard")
	writeShard(t, path, testOpts(5, 4), nil, nil, 3)
	st, _ := os.Stat(path)
	if err := os.Truncate(path, st.Size()-4096); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path)
	if !errors.Is(err, ErrSize) {
		t.Fatalf("Open = %v, want ErrSize", err)
	}
	msg := err.Error()
	for _, want := range []string{"rank-00000.shard", "expected size", "actual size", "bytes"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
}

// TestMinorVersionPreserved checks that fields of a later minor version are
// ignored by this reader and exposed for preservation.
func TestMinorVersionPreserved(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.shard")
	writeShard(t, path, testOpts(2, 1), nil, nil, 1)
	img, _ := os.ReadFile(path)
	img[hMinor] = 3
	copy(img[hKnownEnd:], "future")
	reseal(img)
	r, err := OpenReaderAt(bytes.NewReader(img), int64(len(img)), "m")
	if err != nil {
		t.Fatal(err)
	}
	if maj, min := r.Version(); maj != 1 || min != 3 {
		t.Errorf("Version = %d.%d, want 1.3", maj, min)
	}
	if ext := r.HeaderExtension(); len(ext) != HeaderLen-4-hKnownEnd || string(ext[:6]) != "future" {
		t.Errorf("HeaderExtension = %q", ext)
	}
}

// TestCorruptionJagged is TestCorruption for a format-2 shard (jagged
// tensors): damage to the block locations, values counts, offsets and values
// is reported at open or when the batch is verified.
func TestCorruptionJagged(t *testing.T) {
	good := filepath.Join(t.TempDir(), "j.shard")
	writeJagged(t, good)
	orig, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	const (
		tt    = 256   // tensor table
		ids   = 4096  // end of the sample ids is before this (padding up to it)
		bt    = 24576 // batch table
		bel   = 48    // batch entry length: 32 + 8 per jagged tensor
		blk0  = 4096  // block 0 (4096 bytes), block 1 at 8192 (12288), block 2 at 20480
		blk1  = 8192
		pairs = 512 // offsets slab of "pairs" in a block
	)
	idsOff := le.Uint64(orig[hIDsOff:])
	flip := func(off uint64) func([]byte) []byte {
		return func(b []byte) []byte { b[off] ^= 0x40; return b }
	}
	// put writes a u64 at off, then fixes the CRC of the block holding it
	// (block k at blockOff, size bytes) and reseals.
	put := func(k int, blockOff, size, off, v uint64) func([]byte) []byte {
		return func(b []byte) []byte {
			le.PutUint64(b[off:], v)
			le.PutUint32(b[bt+uint64(k)*bel+bBlockCRC:], crc32c(b[blockOff:blockOff+size]))
			reseal(b)
			return b
		}
	}
	entry := func(k int, field, v uint64) func([]byte) []byte {
		return func(b []byte) []byte { le.PutUint64(b[bt+uint64(k)*bel+field:], v); reseal(b); return b }
	}
	runCorruption(t, orig, []corruptCase{
		{"truncate one byte", func(b []byte) []byte { return b[:len(b)-1] }, atOpen, ErrSize, "file", 0},
		{"relabelled major 1, resealed", func(b []byte) []byte { b[hMajor] = 1; reseal(b); return b }, atOpen, ErrCorrupt, "header", 0},
		{"unknown major 3", func(b []byte) []byte { b[hMajor] = 3; return b }, atOpen, ErrVersion, "header", 0},
		{"unknown tensor kind, resealed", func(b []byte) []byte { le.PutUint16(b[tt+tKind:], 2); reseal(b); return b }, atOpen, ErrCorrupt, "tensor table", 0},
		{"offsets slab size wrong, resealed", func(b []byte) []byte {
			le.PutUint64(b[tt+2*TensorEntryLen+tSlabSize:], 32)
			reseal(b)
			return b
		}, atOpen, ErrCorrupt, "tensor table", 0},
		{"nonzero padding after the sample ids", flip(ids - 1), atOpen, ErrCorrupt, "padding", 0},
		{"flip a values count", flip(bt + bel + bValues), atOpen, ErrChecksum, "batch table", 0},
		{"values count too large for the block, resealed", entry(0, bValues, 1<<20), atOpen, ErrCorrupt, "batch table", 0},
		{"values count overflows, resealed", entry(0, bValues+8, 1<<63), atOpen, ErrCorrupt, "batch table", 0},
		{"block offset moved, resealed", entry(1, bBlockOff, blk1+4096), atOpen, ErrCorrupt, "batch table", 0},
		{"block size changed, resealed", entry(2, bBlockLen, 8192), atOpen, ErrCorrupt, "batch table", 0},
		{"largest block overstated, resealed", func(b []byte) []byte { le.PutUint64(b[hBlockSize:], 16384); reseal(b); return b }, atOpen, ErrCorrupt, "header", 0},
		{"largest block understated, resealed", func(b []byte) []byte { le.PutUint64(b[hBlockSize:], 8192); reseal(b); return b }, atOpen, ErrCorrupt, "batch table", 0},
		{"largest block unaligned, resealed", func(b []byte) []byte { le.PutUint64(b[hBlockSize:], 12289); reseal(b); return b }, atOpen, ErrCorrupt, "header", 0},
		{"batch table offset moved, resealed", func(b []byte) []byte { le.PutUint64(b[hBTOff:], bt-4096); reseal(b); return b }, atOpen, ErrCorrupt, "header", 0},
		{"values count disagrees with offsets, resealed", entry(0, bValues, 7), atVerify, ErrCorrupt, "block", 0},
		{"flip an offset", flip(blk0 + 8), atVerify, ErrChecksum, "block", 0},
		{"flip a value", flip(blk1 + 768 + 800), atVerify, ErrChecksum, "block", 1},
		{"offsets[0] not zero, CRC fixed", put(0, blk0, 4096, blk0, 1), atVerify, ErrCorrupt, "block", 0},
		{"offsets decrease, CRC fixed", put(0, blk0, 4096, blk0+16, 0), atVerify, ErrCorrupt, "block", 0},
		{"last offset short of the values count, CRC fixed", put(0, blk0, 4096, blk0+32, 5), atVerify, ErrCorrupt, "block", 0},
		{"offset past the values, CRC fixed", put(1, blk1, 12288, blk1+24, 1202), atVerify, ErrCorrupt, "block", 1},
		{"unused row not empty, CRC fixed", put(1, blk1, 12288, blk1+pairs+24, 2), atVerify, ErrCorrupt, "block", 1},
		{"nonzero between values slabs, CRC fixed", put(0, blk0, 4096, blk0+1000, 1), atVerify, ErrCorrupt, "block", 0},
		{"nonzero after the last values slab, CRC fixed", put(1, blk1, 12288, blk1+12000, 1), atVerify, ErrCorrupt, "block", 1},
		{"flip sample id", flip(idsOff + 4*8 + 1), atVerify, ErrChecksum, "sample ids", 1},
		{"bump minor version, resealed", func(b []byte) []byte { b[hMinor] = 4; reseal(b); return b }, never, nil, "", 0},
	})
}
