package shardfmt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCutShortWhileMapping pins that a shard cut short between Open's size
// check and its mapping fails Open with ErrSize (the size checked again
// after mapping), instead of a Reader whose first access past the new end
// faults.
func TestCutShortWhileMapping(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.shard")
	writeShard(t, path, testOpts(5, 8), nil, nil, 2)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { mappedHook = nil }()
	// Opened read-only, the file is cut through its name.
	mappedHook = func(*os.File) {
		if err := os.Truncate(path, 8192); err != nil {
			t.Error(err)
		}
	}
	r, err := Open(path)
	if r != nil {
		r.Close()
		if !errors.Is(err, ErrSize) {
			t.Skip("not mapped on this platform")
		}
	}
	want := fmt.Sprintf("%s: file at offset %d: wrong file size: file changed size while being opened: %d bytes, then 8192 after mapping", path, hFileLen, st.Size())
	if err == nil || err.Error() != want {
		t.Fatalf("Open = %v, want %s", err, want)
	}
}

// TestCutShortAfterMappedSizeCheck pins that a shard cut short after
// Open has checked its size again on the mapping, while Open still reads
// its footer and tables through the mapping, fails Open with ErrSize
// naming the footer's page (its first read past the new end), never a
// crash.
func TestCutShortAfterMappedSizeCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.shard")
	writeShard(t, path, testOpts(5, 8), nil, nil, 2)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { mappedCheckedHook = nil }()
	mappedCheckedHook = func(*os.File) {
		if err := os.Truncate(path, 8192); err != nil {
			t.Error(err)
		}
	}
	r, err := Open(path)
	if r != nil {
		r.Close()
		t.Skip("not mapped on this platform")
	}
	page := int64(os.Getpagesize())
	footer := (st.Size() - FooterLen) / page * page
	if footer < 8192 {
		t.Fatalf("test shard of %d bytes: its footer is not past the cut", st.Size())
	}
	want := fmt.Sprintf("%s: footer at offset %d: wrong file size: memory fault reading the mapping (file cut short after open?)", path, footer)
	if !errors.Is(err, ErrSize) || err.Error() != want {
		t.Fatalf("Open = %v, want %s", err, want)
	}
}

// TestFaultNamesBatchAndPage pins what a memory fault on the mapping of a
// shard cut short after Open reports: ErrSize naming the batch, the
// section holding the faulting address and the page of the file at the
// address, never a crash. The file is cut where batch 2's block starts,
// so its first byte faults, as do the batch table the digest reads and
// the sample ids, which follow it.
func TestFaultNamesBatchAndPage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.shard")
	writeShard(t, path, testOpts(5, 8), nil, nil, 2)
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.Mapped() {
		t.Skip("not mapped on this platform")
	}
	b2, _ := r.Batch(2)
	last, _ := r.Batch(r.NumBatches() - 1)
	page := uint64(os.Getpagesize())
	if b2.Offset%page != 0 {
		t.Skipf("block at %d is not at a page boundary (%d-byte pages)", b2.Offset, page)
	}
	if err := r.VerifyBatch(2); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, int64(b2.Offset)); err != nil {
		t.Fatal(err)
	}
	// Format 1: the batch table follows the blocks, the sample ids the
	// batch table; batch 1's block is readable, its ids are not.
	btOff := last.Offset + last.Size
	ids1 := btOff + uint64(r.NumBatches())*BatchEntryLen + 1*5*8
	const fault = "wrong file size: memory fault reading the mapping (file cut short after open?)"
	want := fmt.Sprintf("%s: sample ids of batch 1 at offset %d: %s", path, ids1/page*page, fault)
	if err := r.VerifyBatch(1); err == nil || err.Error() != want {
		t.Errorf("VerifyBatch(1) = %v, want %s", err, want)
	}
	want = fmt.Sprintf("%s: block of batch 2 at offset %d: %s", path, b2.Offset, fault)
	if err := r.VerifyBatch(2); err == nil || err.Error() != want {
		t.Errorf("VerifyBatch(2) = %v, want %s", err, want)
	}
	want = fmt.Sprintf("%s: batch table at offset %d: %s", path, btOff/page*page, fault)
	if _, err := r.Digest(); err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("Digest = %v, want an error ending %s", err, want)
	}
}
