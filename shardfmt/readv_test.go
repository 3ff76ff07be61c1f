package shardfmt

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestReadBlocksAndReadSampleIDs checks the bulk read paths against what
// was written, both on a mapped file and through OpenReaderAt.
func TestReadBlocksAndReadSampleIDs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.shard")
	opts := testOpts(7, 9)
	counts := []int{7, 7, 7, 7, 7, 7, 7, 7, 4}
	pads := []int{0, 0, 0, 0, 0, 0, 0, 0, 2}
	want := writeShard(t, path, opts, counts, pads, 11)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	mapped, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer mapped.Close()
	plain, err := OpenReaderAt(f, st.Size(), "v.shard")
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*Reader{"Open": mapped, "OpenReaderAt": plain} {
		t.Run(name, func(t *testing.T) {
			bs := r.Geometry().BlockSize
			// Every window [k, k+n) of the shard, so groups start and end
			// everywhere, the short last batch included.
			for k := range 9 {
				for n := 1; k+n <= 9; n++ {
					dst := make([][]byte, n)
					for i := range dst {
						dst[i] = bytes.Repeat([]byte{0xee}, int(bs)+3) // longer than a block: only [:bs] is written
					}
					if err := r.ReadBlocks(k, dst); err != nil {
						t.Fatalf("ReadBlocks(%d, %d blocks): %v", k, n, err)
					}
					for i := range dst {
						if !bytes.Equal(dst[i][:bs], want[k+i].block) || !bytes.Equal(dst[i][bs:], []byte{0xee, 0xee, 0xee}) {
							t.Fatalf("ReadBlocks(%d, %d blocks): block %d differs", k, n, k+i)
						}
					}
				}
			}
			buf := make([]uint64, 0, 7)
			for k := range 9 {
				ids, err := r.ReadSampleIDs(k, buf)
				if err != nil || !slices.Equal(ids, want[k].ids) {
					t.Fatalf("ReadSampleIDs(%d) = %v, %v; want %v", k, ids, err, want[k].ids)
				}
				if &ids[:1][0] != &buf[:1][0] {
					t.Fatalf("ReadSampleIDs(%d) did not reuse a buffer of capacity BatchSize", k)
				}
				app, err := r.AppendSampleIDs([]uint64{42}, k)
				if err != nil || app[0] != 42 || !slices.Equal(app[1:], want[k].ids) {
					t.Fatalf("AppendSampleIDs(%d) = %v, %v", k, app, err)
				}
			}
			for k := range 9 {
				for n := 1; k+n <= 9; n++ {
					slots, err := r.ReadSampleIDSlots(k, n, nil)
					if err != nil || len(slots) != 7*n {
						t.Fatalf("ReadSampleIDSlots(%d, %d) = %d slots, %v", k, n, len(slots), err)
					}
					for i := range n {
						got := slots[7*i : 7*(i+1)]
						c := len(want[k+i].ids)
						if !slices.Equal(got[:c], want[k+i].ids) {
							t.Fatalf("ReadSampleIDSlots(%d, %d): batch %d ids %v, want %v", k, n, k+i, got[:c], want[k+i].ids)
						}
						for _, id := range got[c:] {
							if id != UnusedSampleID {
								t.Fatalf("ReadSampleIDSlots(%d, %d): batch %d unused slot holds %d", k, n, k+i, id)
							}
						}
					}
				}
			}
			if _, err := r.ReadSampleIDSlots(7, 3, nil); !errors.Is(err, ErrRange) {
				t.Errorf("ReadSampleIDSlots past the last batch = %v, want ErrRange", err)
			}
			if ids, err := r.ReadSampleIDs(8, nil); err != nil || !slices.Equal(ids, []uint64{56, 57, 58, 59}) {
				t.Fatalf("ReadSampleIDs(8, nil) = %v, %v; want [56 57 58 59]", ids, err)
			}
			if err := r.ReadBlocks(8, make([][]byte, 2)); !errors.Is(err, ErrRange) {
				t.Errorf("ReadBlocks past the last batch = %v, want ErrRange", err)
			}
			if err := r.ReadBlocks(0, [][]byte{make([]byte, bs), make([]byte, bs-1)}); !errors.Is(err, ErrInvalid) {
				t.Errorf("ReadBlocks into a short buffer = %v, want ErrInvalid", err)
			}
			if _, err := r.ReadSampleIDs(9, nil); !errors.Is(err, ErrRange) {
				t.Errorf("ReadSampleIDs(9) = %v, want ErrRange", err)
			}
		})
	}
}

// TestReadSampleIDsDetectsDamage flips one byte of batch 3's ids, in a used
// and in an unused slot: the CRC-32C must catch both.
func TestReadSampleIDsDetectsDamage(t *testing.T) {
	for _, slot := range []int{1, 6} {
		path := filepath.Join(t.TempDir(), "d.shard")
		writeShard(t, path, testOpts(7, 5), []int{7, 7, 7, 5, 7}, []int{0, 0, 0, 0, 0}, 3)
		r, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		off := int64(r.h.idsOff) + 3*7*8 + int64(8*slot)
		r.Close()
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte{0x99}, off); err != nil {
			t.Fatal(err)
		}
		f.Close()
		r, err = Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var fe *FormatError
		if _, err := r.ReadSampleIDs(3, nil); !errors.Is(err, ErrChecksum) || !errors.As(err, &fe) || fe.Batch != 3 {
			t.Errorf("slot %d: ReadSampleIDs(3) = %v, want ErrChecksum at batch 3", slot, err)
		}
		var fe2 *FormatError
		if _, err := r.ReadSampleIDSlots(1, 4, nil); !errors.Is(err, ErrChecksum) || !errors.As(err, &fe2) || fe2.Batch != 3 {
			t.Errorf("slot %d: ReadSampleIDSlots(1, 4) = %v, want ErrChecksum at batch 3", slot, err)
		}
		if ids, err := r.ReadSampleIDs(2, nil); err != nil || !slices.Equal(ids, []uint64{14, 15, 16, 17, 18, 19, 20}) {
			t.Errorf("slot %d: ReadSampleIDs(2) = %v, %v; want [14 ... 20]", slot, ids, err)
		}
		r.Close()
	}
}

// TestBulkReadsAfterTruncation pins that the pread paths report a shard cut
// short after Open as ErrSize.
func TestBulkReadsAfterTruncation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.shard")
	writeShard(t, path, testOpts(5, 8), nil, nil, 2)
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	bs := r.Geometry().BlockSize
	if err := r.ReadBlocks(5, [][]byte{make([]byte, bs), make([]byte, bs)}); !errors.Is(err, ErrSize) {
		t.Errorf("ReadBlocks after truncation = %v, want ErrSize", err)
	}
	if _, err := r.ReadSampleIDs(7, nil); !errors.Is(err, ErrSize) {
		t.Errorf("ReadSampleIDs after truncation = %v, want ErrSize", err)
	}
}
