package gpuload

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestResidentFraction maps a file, drops it from the page cache
// (fsync + POSIX_FADV_DONTNEED), reads back half of it and checks what
// mincore reports at each stage.
func TestResidentFraction(t *testing.T) {
	page := os.Getpagesize()
	path := filepath.Join(t.TempDir(), "f")
	data := make([]byte, 64*page)
	for i := range data {
		data[i] = byte(i)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, len(data), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	if got, err := residentFraction(m); err != nil || got != 1 {
		t.Errorf("just written: residentFraction = %v, %v; want 1", got, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	got, err := residentFraction(m)
	if err != nil {
		t.Fatal(err)
	}
	if got != 0 {
		t.Skipf("the page cache kept %v of the file after POSIX_FADV_DONTNEED (file system or memory cgroup keeps it)", got)
	}
	buf := make([]byte, len(data)/2)
	if _, err := f.ReadAt(buf, int64(len(data)/2)); err != nil {
		t.Fatal(err)
	}
	// Buffered reads may read ahead past what was asked for, never before.
	if got, err := residentFraction(m[:len(data)/2]); err != nil || got != 0 {
		t.Errorf("first half after reading the second: residentFraction = %v, %v; want 0", got, err)
	}
	if got, err := residentFraction(m[len(data)/2:]); err != nil || got != 1 {
		t.Errorf("second half after reading it: residentFraction = %v, %v; want 1", got, err)
	}
	if got, err := residentFraction(m); err != nil || got != 0.5 {
		t.Errorf("whole file: residentFraction = %v, %v; want 0.5", got, err)
	}
	if got, err := residentFraction(nil); err != nil || got != 1 {
		t.Errorf("empty span: residentFraction = %v, %v; want 1", got, err)
	}
}

// TestOpenDirectReadsAlignedBlocks opens a file with O_DIRECT (where the
// file system here allows it) and checks the alignment it reports and that
// an aligned read into page-aligned memory returns the file's bytes.
func TestOpenDirectReadsAlignedBlocks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	data := make([]byte, 3*4096)
	for i := range data {
		data[i] = byte(i * 3)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	plain, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	f, offAlign, memAlign, err := openDirect(plain, path)
	if err != nil {
		t.Skipf("this file system refuses O_DIRECT: %v", err)
	}
	defer f.Close()
	var st unix.Statx_t
	wantOff, wantMem := uint32(assumedDirectAlign), uint32(assumedDirectAlign)
	if unix.Statx(unix.AT_FDCWD, path, 0, unix.STATX_DIOALIGN, &st) == nil && st.Mask&unix.STATX_DIOALIGN != 0 {
		wantOff, wantMem = st.Dio_offset_align, st.Dio_mem_align
	}
	if offAlign != wantOff || memAlign != wantMem {
		t.Errorf("alignment %d/%d, want %d/%d (statx)", offAlign, memAlign, wantOff, wantMem)
	}
	buf, err := allocBuffer(2 * 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer freeBuffer(buf)
	if err := readFull(f, buf, 4096); err != nil {
		t.Fatal(err)
	}
	if string(buf) != string(data[4096:]) {
		t.Errorf("O_DIRECT read of 8 KiB at 4096 returned other bytes")
	}
	// Past the end: the short read is an ErrSize.
	if err := readFull(f, buf, 8192); err == nil || err.Error() != "wrong file size: read 4096 of 8192 bytes at offset 8192" {
		t.Errorf("read across the end = %v, want a short read", err)
	}
}

// TestOpenDirectReopensTheOpenFile: the O_DIRECT file is the file already
// open, not whatever the name points to now (a shard renamed over, or a
// symbolic link put in its place, after the shard set opened it).
func TestOpenDirectReopensTheOpenFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "shard")
	if err := os.WriteFile(path, bytes4096(1), 0o644); err != nil {
		t.Fatal(err)
	}
	plain, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other, bytes4096(2), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	f, _, _, err := openDirect(plain, path)
	if err != nil {
		t.Skipf("this file system refuses O_DIRECT: %v", err)
	}
	defer f.Close()
	buf, err := allocBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer freeBuffer(buf)
	if err := readFull(f, buf, 0); err != nil {
		t.Fatal(err)
	}
	if buf[0] != 1 {
		t.Errorf("O_DIRECT read byte %d: read the file now at the name, not the one open", buf[0])
	}
	if _, _, _, err := openDirect(nil, "x.shard"); err == nil || err.Error() != "opening x.shard for O_DIRECT: the shard is not an open file" {
		t.Errorf("openDirect(nil) = %v", err)
	}
}

func bytes4096(v byte) []byte {
	b := make([]byte, 4096)
	for i := range b {
		b[i] = v
	}
	return b
}
