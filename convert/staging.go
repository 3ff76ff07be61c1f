package convert

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
)

// stage is where stage 1 leaves the record of every needed sample and stage
// 2 takes it from: in memory (memStage: anonymous memory, records at their
// slots) or spilled to disk by output window (spiller, spill.go). newStage
// picks one; the rest of a run does not ask which.
type stage interface {
	// records is the record layout; its data is the staging records in
	// memory, nil for a spilled stage.
	records() *records
	// sink returns a new recordSink, one per decode worker: how stage 1
	// hands the stage its records.
	sink() recordSink
	// diskBytes is the space the stage takes on disk (0 in memory).
	diskBytes() int64
	// memBytes is the memory the stage holds outside the Go heap, in
	// anonymous memory counted against the memory limit: the staging
	// records in memory, or the largest output window a spilled stage
	// reads back in stage 2.
	memBytes() int64
	// spillWindows is the number of output windows the records are
	// spilled by (0 in memory).
	spillWindows() int
	// open makes the stage ready for stage 1, using dir for its files.
	open(dir string) error
	// finish checks, after stage 1, that every record arrived.
	finish() error
	// phases cuts stage 2 into phases (write.go).
	phases() []phase
	// close releases the stage's memory and files.
	close()
}

// recordSink is one decode worker's way into a stage: stage 1 assembles
// each block of records where block says, then hands it over with put.
type recordSink interface {
	// inPlace reports whether records are assembled straight into the
	// staging records (records().data), so that a record may be written a
	// column at a time (in memory); otherwise every block of records is
	// built whole in scratch and then handed over (spilled).
	inPlace() bool
	// block returns the records to assemble a block of slots staging
	// slots into, from slot base on, with blk's runs (slots relative to
	// base) made relative to them, and scratch (grown if the block is
	// built in it) for reuse.
	block(blk []run, base int64, slots int, scratch []byte) (*records, []byte)
	// put hands over an assembled block: blk's rows of a row group whose
	// first sample id is start, their records in r.
	put(start uint64, blk []run, r *records) error
	// flush hands over whatever the sink still buffers; a decode worker
	// calls it once at the end of a stage 1 that was not cancelled.
	flush() error
}

// newStage returns the stage of todo, whose needed ids are set: anonymous
// memory when the records fit memoryLimit (and the mapping succeeds),
// otherwise spilled by output window, so that memory stays bounded by the
// limit whatever the input size. A stage with no records is in memory.
func newStage(ctx context.Context, p *plan.Plan, todo []shardKey, set *idSet, tensors []shardfmt.TensorInfo, memoryLimit int64, jobs int) (stage, error) {
	rec := recordSize(tensors)
	size := int64(set.count) * int64(rec)
	mem := &staging{} // nothing staged
	if anonStaging(size, memoryLimit) && !spillAlways {
		if a := newStaging(size); a != nil {
			mem = a
		}
	}
	if size == 0 || mem.data != nil {
		return &memStage{mem: mem, recs: newRecords(tensors, mem.data), set: set, todo: todo, steps: p.Steps(), par: shardWriters(jobs)}, nil
	}
	sp, err := newSpiller(ctx, p, todo, rec, memoryLimit, jobs, shardWriters(jobs))
	if err != nil {
		return nil, err
	}
	sp.layout, sp.jobs = newRecords(tensors, nil), max(1, jobs)
	return sp, nil
}

// spillAlways, when set (tests only), spills staging of any size.
var spillAlways bool

// memStage is a stage in memory: every needed sample's record at its slot
// (idSet.rank) of one staging area.
type memStage struct {
	mem   *staging
	recs  *records
	set   *idSet
	todo  []shardKey
	steps int
	par   int // shards written at once
}

func (m *memStage) records() *records { return m.recs }
func (m *memStage) sink() recordSink  { return memSink{m.recs} }
func (m *memStage) diskBytes() int64  { return 0 }
func (m *memStage) memBytes() int64   { return int64(len(m.mem.data)) }
func (m *memStage) spillWindows() int { return 0 }
func (m *memStage) open(string) error { return nil }
func (m *memStage) finish() error     { return nil }
func (m *memStage) close()            { m.mem.remove() }

// memSink assembles records in place in the staging records: a block's
// records are stored as they are built, and nothing is left to hand over.
type memSink struct{ recs *records }

func (s memSink) inPlace() bool { return true }

func (s memSink) block(blk []run, base int64, _ int, scratch []byte) (*records, []byte) {
	for i := range blk {
		blk[i].dst += base
	}
	return s.recs, scratch
}

func (s memSink) put(uint64, []run, *records) error { return nil }
func (s memSink) flush() error                      { return nil }

// phases is one phase: every shard, every step, shardWriters(Jobs) shards
// at once (each writer spends part of its time blocked in fsync, shard
// commit and manifest, while another gathers), each sample gathered from
// its slot.
func (m *memStage) phases() []phase {
	return []phase{{keys: m.todo, s0: 0, s1: m.steps, par: m.par, commit: true,
		filler: func(_ int, o *shardOut) fillFunc {
			ga := newGatherer(m.recs, m.set, o)
			return func(_ int, block []byte, ids []uint64, _ int) error { return ga.gather(block, ids) }
		}}}
}

// staging is a run's stage-1 output when it fits the memory limit: the
// staging records (see records), sized exactly (slots x record bytes), in
// private anonymous memory outside the Go heap (huge-page aligned and
// advised). A run whose records do not fit spills them to disk instead
// (spill.go).
type staging struct {
	data []byte
	anon []byte // the whole anonymous mapping behind data
}

// anonStaging reports whether size bytes of staging go to anonymous memory
// under memoryLimit.
func anonStaging(size, memoryLimit int64) bool {
	return anonSupported && size > 0 && size <= memoryLimit
}

// newStaging returns size bytes of zeroed anonymous staging, or nil when the
// mapping fails (the run then spills).
func newStaging(size int64) *staging {
	data, whole, ok := mapAnon(size)
	if !ok {
		return nil
	}
	return &staging{data: data, anon: whole}
}

// zeroChunk is the write size of reserveSpace's fallback.
const zeroChunk = 1 << 20

// reserveSpace makes f exactly size bytes long with every block allocated on
// disk: fallocate(2) mode 0, or, where the file system does not support it
// (EOPNOTSUPP), writing zeros. ENOSPC (or EDQUOT) gives an error wrapping
// ErrNoSpace naming the path with the bytes needed and free.
func reserveSpace(f *os.File, size int64) error {
	err := fallocate(f, size)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		err = writeZeros(f, size)
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		free, _ := freeBytes(filepath.Dir(f.Name()))
		return fmt.Errorf("%s: %w: need %d bytes for staging, %d free: %v", f.Name(), ErrNoSpace, size, free, err)
	}
	return fmt.Errorf("reserving %d bytes for %s: %w", size, f.Name(), err)
}

// fallocate reserves [0, size) of f (fallocate_linux.go, fallocate_other.go).
// It is a variable so tests can stand in for a file system without
// fallocate support.
var fallocate = fallocateFile

// writeZeros writes size zero bytes at the start of f, so the file system
// allocates every block.
func writeZeros(f *os.File, size int64) error {
	buf := make([]byte, min(size, zeroChunk))
	for off := int64(0); off < size; {
		n := min(int64(len(buf)), size-off)
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// remove unmaps the staging.
func (s *staging) remove() {
	if s.anon != nil {
		unmapAnon(s.anon)
	}
	s.anon, s.data = nil, nil
}

// removeTemp deletes a run's temporary directory, then its parent (OUT/.prep-tmp)
// if now empty.
func removeTemp(dir string) {
	os.RemoveAll(dir)
	os.Remove(filepath.Dir(dir))
}
