package feature

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"

	"github.com/prepml/prep/internal/sysmem"
	"github.com/prepml/prep/pqread"
	"github.com/prepml/prep/shardfmt"
)

// The values arena: where the values of jagged tensors wait between the
// stages. A jagged sample has no fixed size, so its staging record holds
// only a fixed reference (refBytes: the arena byte offset of its values,
// u64, then its values count, u64, little-endian) and the values go to the
// arena. Every row group read gets, per jagged output tensor, a region of
// the arena sized before stage 1 from the footer (valuesBound: a column
// chunk holds at most its num_values level entries, so at most that many
// values), so decode workers write their row groups' values without
// coordination, each region in row order, and the arena's contents do not
// depend on Jobs. The arena is anonymous memory when the staging records
// (or a spilled run's window) and the arena together fit half the memory
// limit (the anonymous share of the run's one budget), else a file beside the
// spill file (ArenaFileName), every block reserved before stage 1 like the
// spill file's, written through a small buffer per region and read back by
// stage 2 with one pread per stretch of a batch's samples whose values lie
// next to each other.

// refBytes is the size of a jagged tensor's reference in a staging record.
const RefBytes = 16

// ArenaFileName is the values arena's file inside a run's temporary
// directory (OUT/.prep-tmp/<pid>/), present while a run with jagged
// tensors whose values do not fit the memory limit is in progress.
const ArenaFileName = "values.bin"

// arenaSlot is one region of the arena: bytes [base, base+size).
type arenaSlot struct{ base, size int64 }

// rowGroupKey names a row group of a source file.
type rowGroupKey struct{ fi, rg int }

// Arena is the values arena of a run (nil when no tensor is jagged).
type Arena struct {
	size    int64
	regions map[rowGroupKey][]arenaSlot // per row group read: per jagged ordinal
	ord     []int                       // per output tensor: jagged ordinal, -1 when fixed
	jagged  int                         // the number of jagged output tensors
	bufCap  int                         // write buffer per region of a file arena

	mem  []byte // in anonymous memory (anon the whole mapping), or
	anon []byte
	file *os.File // in a file under dir
	dir  string
}

// recordBytes returns the bytes tensor t takes in a staging record: its
// sample, or a jagged tensor's reference.
func recordBytes(t shardfmt.TensorInfo) int {
	if t.Jagged {
		return RefBytes
	}
	return sampleBytes(t)
}

// valuesBound returns an upper bound on the list values of a column
// chunk whose decoded size pqread.File.DecodedSize estimates as size: that
// estimate counts, per level entry, the value's bytes, a byte per kind of
// level and one for validity, so size divided by their sum is at least
// the chunk's level entries, and a chunk holding more entries than its
// footer declares fails to read.
func valuesBound(size int64, ci pqread.ColumnInfo) int64 {
	return max(0, size) / entryBytes(ci)
}

// entryBytes is the decoded bytes pqread.File.DecodedSize counts per
// level entry of column ci: the value's (8 for a BYTE_ARRAY's offset), a
// byte per kind of level and one for validity, and a list of lists' inner
// offsets and validity.
func entryBytes(ci pqread.ColumnInfo) int64 {
	per := int64(8) // KindInt64, KindFloat64, and KindBytes' offset
	switch ci.Kind {
	case pqread.KindBool:
		per = 1
	case pqread.KindInt32, pqread.KindFloat32:
		per = 4
	case pqread.KindInt96:
		per = 12
	case pqread.KindFixed:
		per = int64(max(1, ci.Width))
	}
	if ci.MaxDef > 0 {
		per += 2
	}
	if ci.MaxRep > 0 {
		per++
	}
	if ci.MaxRep > 1 {
		per += 9 // inner list offsets and validity
	}
	return per
}

// newArena lays out the arena of the jagged output tensors (tensors, of
// plans) for the row groups of files holding an id of set; nil when no
// tensor is jagged.
func newArena(files []*sourceFile, plans []*tensorPlan, tensors []shardfmt.TensorInfo, set *IDSet) *Arena {
	a := &Arena{regions: map[rowGroupKey][]arenaSlot{}, ord: make([]int, len(tensors))}
	n := 0
	for t, ti := range tensors {
		a.ord[t] = -1
		if ti.Jagged {
			a.ord[t] = n
			n++
		}
	}
	if n == 0 {
		return nil
	}
	a.jagged = n
	for fi, f := range files {
		start := f.start
		for rg, rows := range f.meta.RowGroups {
			first := start
			start += uint64(rows)
			if rows == 0 || len(set.runs(first, rows)) == 0 {
				continue
			}
			slots := make([]arenaSlot, n)
			for _, tp := range plans {
				if vk, ok := tp.kind.(valuesKind); ok {
					vk.regions(a, f, fi, rg, slots)
				}
			}
			a.regions[rowGroupKey{fi, rg}] = slots
		}
	}
	return a
}

// region appends a region of size bytes (8-aligned) to the arena.
func (a *Arena) region(size int64) arenaSlot {
	s := arenaSlot{base: a.size, size: size}
	a.size += (size + 7) &^ 7
	return s
}

// Place puts the arena in anonymous memory when it and recBytes of staging
// records fit memoryLimit, the anonymous share of the run's limit (and the
// mapping succeeds), else marks it for a
// file (open); it sets the write buffer of a file arena's regions so
// that jobs decode workers' buffers take a small part of the limit.
func (a *Arena) Place(recBytes, memoryLimit int64, jobs int) {
	if a.size > 0 && sysmem.AnonFits(a.size+recBytes, memoryLimit) {
		if data, whole, ok := sysmem.MapAnon(a.size); ok {
			a.mem, a.anon = data, whole
		}
	}
	a.bufCap = int(min(256<<10, max(4<<10, memoryLimit/int64(16*max(1, jobs)*a.jagged))))
}

// InMemory reports whether the arena is in anonymous memory (or empty).
func (a *Arena) InMemory() bool { return a.mem != nil || a.size == 0 }

// MemBytes is the anonymous memory the arena takes (0 in a file or
// without jagged tensors): counted against the memory limit, though only
// the pages written are touched.
func (a *Arena) MemBytes() int64 {
	if a == nil || a.mem == nil {
		return 0
	}
	return a.size
}

// DiskBytes is the space the arena takes on disk (0 in memory).
func (a *Arena) DiskBytes() int64 {
	if a == nil || a.InMemory() {
		return 0
	}
	return a.size
}

// Open creates the arena's file under dir, every block reserved
// (reserveSpace: ErrNoSpace now rather than midway), unless it is in
// memory.
func (a *Arena) Open(dir string) error {
	if a.InMemory() {
		return nil
	}
	a.dir = dir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating values arena: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, ArenaFileName), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("creating values arena: %w", err)
	}
	a.file = f
	if err := sysmem.Reserve(f, a.size); err != nil {
		a.Close()
		return err
	}
	return nil
}

// Close releases the arena's memory or file (and the run's temporary
// directory, when it made it).
func (a *Arena) Close() {
	if a == nil {
		return
	}
	if a.anon != nil {
		sysmem.UnmapAnon(a.anon)
		a.anon, a.mem = nil, nil
	}
	if a.file != nil {
		a.file.Close()
		a.file = nil
		sysmem.RemoveTemp(a.dir)
	}
}

// ReadAt fills dst with the arena's bytes at off.
func (a *Arena) ReadAt(dst []byte, off int64) error {
	if off < 0 || off+int64(len(dst)) > a.size {
		return fmt.Errorf("%w: values arena read [%d, %d) beyond its %d bytes", ErrInternal, off, off+int64(len(dst)), a.size)
	}
	if a.mem != nil {
		copy(dst, a.mem[off:])
		return nil
	}
	if _, err := a.file.ReadAt(dst, off); err != nil {
		return fmt.Errorf("reading values arena: %w", err)
	}
	return nil
}

// valueWriter writes one row group's jagged values into its regions of
// the arena, each region from its start in the order reserve is called
// (one goroutine at a time: the worker assembling the row group). A
// discarding valueWriter (nil arena) checks nothing and keeps nothing:
// transforms rerun to find an error write through one.
type valueWriter struct {
	a       *Arena
	slots   []arenaSlot
	cur     []int64  // per jagged ordinal: bytes reserved
	bufs    [][]byte // file arena: bytes not yet written, starting at done
	done    []int64  // per jagged ordinal: bytes written to the file
	scratch []byte
	ord     []int // a checking valueWriter (checker): the arena's ordinals, its slots' bounds checked
}

// writer returns the valueWriter of row group rg of file fi.
func (a *Arena) writer(fi, rg int) *valueWriter {
	slots := a.regions[rowGroupKey{fi, rg}]
	w := &valueWriter{a: a, slots: slots, cur: make([]int64, len(slots))}
	if !a.InMemory() {
		w.bufs, w.done = make([][]byte, len(slots)), make([]int64, len(slots))
	}
	return w
}

// discardValues returns a valueWriter that keeps nothing.
func discardValues() *valueWriter { return &valueWriter{} }

// checker returns a valueWriter for row group rg of file fi that keeps
// nothing but refuses what writer's would refuse (values beyond a
// region's bound), from the row group's first row: a transform rerun to
// find an error (decoder.checkColumn) meets the same error. A nil arena
// gives discardValues.
func (a *Arena) checker(fi, rg int) *valueWriter {
	if a == nil {
		return discardValues()
	}
	slots := a.regions[rowGroupKey{fi, rg}]
	return &valueWriter{slots: slots, ord: a.ord, cur: make([]int64, len(slots))}
}

// reserve returns n bytes to write the next values of output tensor t
// into, and the arena offset they will have. Values beyond the region's
// footer bound are an error (the footer understates the chunk's values).
func (w *valueWriter) reserve(t int, n int64) ([]byte, int64, error) {
	if w.a == nil {
		if w.ord != nil {
			j := w.ord[t]
			if w.cur[j]+n > w.slots[j].size {
				return nil, 0, ValueErrorf("column chunk holds more list values than the %d bytes its footer allows", w.slots[j].size)
			}
			w.cur[j] += n
		}
		if int64(cap(w.scratch)) < n {
			w.scratch = make([]byte, n)
		}
		return w.scratch[:n], 0, nil
	}
	j := w.a.ord[t]
	s := w.slots[j]
	at := w.cur[j]
	if at+n > s.size {
		return nil, 0, ValueErrorf("column chunk holds more list values than the %d bytes its footer allows", s.size)
	}
	w.cur[j] = at + n
	if w.a.mem != nil {
		o := s.base + at
		return w.a.mem[o : o+n : o+n], o, nil
	}
	buf := w.bufs[j]
	if len(buf) > 0 && len(buf)+int(n) > w.a.bufCap {
		if err := w.write(j); err != nil {
			return nil, 0, err
		}
		buf = w.bufs[j]
	}
	if cap(buf)-len(buf) < int(n) {
		nb := make([]byte, len(buf), max(w.a.bufCap, len(buf)+int(n)))
		copy(nb, buf)
		buf = nb
	}
	w.bufs[j] = buf[:len(buf)+int(n)]
	return buf[len(buf) : len(buf)+int(n) : len(buf)+int(n)], s.base + at, nil
}

// write writes region j's buffered bytes to the arena file.
func (w *valueWriter) write(j int) error {
	buf := w.bufs[j]
	if len(buf) == 0 {
		return nil
	}
	if _, err := w.a.file.WriteAt(buf, w.slots[j].base+w.done[j]); err != nil {
		return fmt.Errorf("writing values arena: %w", err)
	}
	w.done[j] += int64(len(buf))
	if cap(buf) > w.a.bufCap {
		buf = nil // a buffer grown for one long row is not kept
	}
	w.bufs[j] = buf[:0]
	return nil
}

// flush writes what w still buffers and drops its buffers.
func (w *valueWriter) flush() error {
	if w == nil || w.a == nil || w.bufs == nil {
		return nil
	}
	for j := range w.bufs {
		if err := w.write(j); err != nil {
			return err
		}
		w.bufs[j] = nil
	}
	return nil
}

// putRef writes a jagged reference (arena offset, values count) into b.
func putRef(b []byte, off, count int64) {
	binary.LittleEndian.PutUint64(b, uint64(off))
	binary.LittleEndian.PutUint64(b[8:], uint64(count))
}

// Size returns the arena's bytes: the footers' bound on the values of the
// row groups it was laid out for (8-aligned regions).
func (a *Arena) Size() int64 { return a.size }

// Jagged returns the number of jagged output tensors.
func (a *Arena) Jagged() int { return a.jagged }
