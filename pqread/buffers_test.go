package pqread

import (
	"fmt"
	"testing"
	"unsafe"
)

// poisonHeld overwrites every buffer b holds that done does not list
// (by address and capacity), over its whole capacity, and lists it in
// done: a read that took one and relied on its contents being zero
// would differ. A buffer handed back holds another column's bytes,
// which poison it as well.
func poisonHeld(b *Buffers, done map[[2]uintptr]bool) {
	fill := func(p unsafe.Pointer, n int) {
		k := [2]uintptr{uintptr(p), uintptr(n)}
		if n == 0 || done[k] {
			return
		}
		done[k] = true
		s := unsafe.Slice((*byte)(p), n)
		for i := range s {
			s[i] = 0xa5
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.b {
		fill(unsafe.Pointer(unsafe.SliceData(s)), cap(s))
	}
	for _, s := range b.u8 {
		fill(unsafe.Pointer(unsafe.SliceData(s)), cap(s))
	}
	for _, s := range b.u32 {
		fill(unsafe.Pointer(unsafe.SliceData(s)), 4*cap(s))
	}
	for _, s := range b.i32 {
		fill(unsafe.Pointer(unsafe.SliceData(s)), 4*cap(s))
	}
	for _, s := range b.i64 {
		fill(unsafe.Pointer(unsafe.SliceData(s)), 8*cap(s))
	}
	for _, s := range b.f32 {
		fill(unsafe.Pointer(unsafe.SliceData(s)), 4*cap(s))
	}
	for _, s := range b.f64 {
		fill(unsafe.Pointer(unsafe.SliceData(s)), 8*cap(s))
	}
}

// TestReadColumnIntoEqualsReadColumn reads every column chunk of every
// Parquet file in testdata (real writers' files, the field cases and the
// bad files), plain and, for BYTE_ARRAY columns, in dictionary form, with
// ReadColumnInto through one Buffers that every column read is handed
// back to, its held memory overwritten before each read: the same
// columns as ReadColumn's (validity nil the same way), and the same
// errors.
func TestReadColumnIntoEqualsReadColumn(t *testing.T) {
	defer func(f int) { bufferFloor = f }(bufferFloor)
	bufferFloor = 1 // hold buffers of any size, as the files are small
	files := readableFiles(t)
	if len(files) < 80 {
		t.Fatalf("only %d files", len(files))
	}
	b := NewBuffers(64 << 20)
	done := map[[2]uintptr]bool{}
	chunks := 0
	for _, path := range files {
		f, err := Open(path, Limits{})
		if err != nil {
			continue // Open's own errors are the conformance test's
		}
		for rg := range f.RowGroups() {
			for _, ci := range f.Columns() {
				for _, dict := range []bool{false, true} {
					if dict && ci.Kind != KindBytes {
						continue
					}
					what := fmt.Sprintf("%s rg %d %q dict %v", path, rg, ci.Name, dict)
					want, werr := f.readWhole(rg, ci, dict, nil)
					poisonHeld(b, done)
					got, err := f.ReadColumnInto(b, rg, ci, dict)
					switch {
					case (err == nil) != (werr == nil):
						t.Errorf("%s: ReadColumnInto error %v, ReadColumn %v", what, err, werr)
						continue
					case err != nil:
						if err.Error() != werr.Error() {
							t.Errorf("%s: ReadColumnInto error %v, ReadColumn %v", what, err, werr)
						}
						continue
					}
					chunks++
					if (got.RowValid == nil) != (want.RowValid == nil) || (got.ElemValid == nil) != (want.ElemValid == nil) ||
						(got.ListValid == nil) != (want.ListValid == nil) {
						t.Errorf("%s: validity nil differs", what)
					}
					sameRows(t, what, got, want)
					b.Put(got)
				}
			}
		}
	}
	if chunks < 500 {
		t.Fatalf("only %d column chunks read", chunks)
	}
}

// TestReadColumnIntoReusesMemory reads the same column chunk twice
// through one Buffers, handing the first column back: the second decodes
// into the first one's memory, and equals it.
func TestReadColumnIntoReusesMemory(t *testing.T) {
	rows := makeRows(20000)
	path := writeParquet(t, rows)
	f := mustOpen(t, path)
	b := NewBuffers(64 << 20)
	for _, ci := range f.Columns() {
		if k := ci.Kind; k != KindInt32 && k != KindInt64 && k != KindFloat32 && k != KindFloat64 {
			continue
		}
		first, err := f.ReadColumnInto(b, 0, ci, false)
		if err != nil {
			t.Fatal(err)
		}
		want, err := f.ReadColumn(0, ci)
		if err != nil {
			t.Fatal(err)
		}
		p := dataOf(first)
		if p == 0 {
			t.Fatalf("%s: no values", ci.Name)
		}
		b.Put(first)
		poisonHeld(b, map[[2]uintptr]bool{})
		second, err := f.ReadColumnInto(b, 0, ci, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := dataOf(second); got != p {
			t.Errorf("%s: second read's values at %#x, the first's at %#x", ci.Name, got, p)
		}
		sameRows(t, ci.Name, second, want)
		b.Put(second)
	}
}

// TestBuffersHold checks what Buffers holds: buffers of at least
// bufferFloor elements, each memory once, within the limit; a take gets
// the smallest held buffer with room and at most about twice the room
// asked for, and otherwise new memory with a sixteenth more room, in
// whole pages.
func TestBuffersHold(t *testing.T) {
	b := NewBuffers(200 << 10)
	a := make([]int64, 10, 4<<10)
	b.Put(&Column{Int64: a})
	if got := b.HeldBytes(); got != 32<<10 {
		t.Fatalf("held %d, want %d", got, 32<<10)
	}
	b.Put(&Column{Offsets: a}) // the same memory again
	b.Put(&Column{Int64: make([]int64, 0, 100)})
	if got := b.HeldBytes(); got != 32<<10 {
		t.Fatalf("held %d after the same memory and a small buffer, want %d", got, 32<<10)
	}
	big := make([]int64, 0, 16<<10)
	b.Put(&Column{Int64: big})
	if got := b.HeldBytes(); got != 160<<10 {
		t.Fatalf("held %d, want %d", got, 160<<10)
	}
	b.Put(&Column{Float64: make([]float64, 0, 8<<10)}) // over the limit: dropped
	if got := b.HeldBytes(); got != 160<<10 {
		t.Fatalf("held %d after a put over the limit, want %d", got, 160<<10)
	}
	s := takeT(b, int64sOf, 3000, 3000)
	if unsafe.SliceData(s) != unsafe.SliceData(a) || len(s) != 0 || cap(s) != 4<<10 {
		t.Fatalf("take 3000: cap %d, not the smallest buffer that fits", cap(s))
	}
	if got := b.HeldBytes(); got != 128<<10 {
		t.Fatalf("held %d after a take, want %d", got, 128<<10)
	}
	// The buffer of 16384 is more than twice 3000 and a page: new memory,
	// 3000 and a sixteenth (3187) rounded up to whole pages of 512.
	if s := takeT(b, int64sOf, 3000, 3000); unsafe.SliceData(s) == unsafe.SliceData(big) || cap(s) != 3584 {
		t.Fatalf("take 3000 with only a buffer of 16384 held: cap %d, want new memory of 3584", cap(s))
	}
	if s := takeT(b, int64sOf, 1000, 1000); cap(s) != 1000 {
		t.Fatalf("take 1000: cap %d, want new memory of 1000 (under half the floor)", cap(s))
	}
	if s := takeT(b, int64sOf, 7000, 7000); unsafe.SliceData(s) != unsafe.SliceData(big) {
		t.Fatalf("take 7000: cap %d, not the buffer of 16384", cap(s))
	}
	if got := b.HeldBytes(); got != 0 {
		t.Fatalf("held %d after taking everything, want 0", got)
	}
	var none *Buffers
	none.Put(&Column{Int64: big}) // nil Buffers: nothing
	if s := takeT(none, int64sOf, 5000, 5000); cap(s) != 5000 {
		t.Fatalf("take from nil Buffers: cap %d, want 5000", cap(s))
	}
}
