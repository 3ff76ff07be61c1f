package convert

import (
	"context"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/internal/sysmem"
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
	records() *feature.Records
	// sink returns a new recordSink, one per decode worker: how stage 1
	// hands the stage its records.
	sink() feature.RecordSink
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

// newStage returns the stage of todo, whose needed ids are set: anonymous
// memory when the records fit memoryLimit (and the mapping succeeds),
// otherwise spilled by output window, so that memory stays bounded by the
// limit whatever the input size. A stage with no records is in memory.
func newStage(ctx context.Context, p *plan.Plan, todo []shardKey, set *feature.IDSet, tensors []shardfmt.TensorInfo, memoryLimit int64, jobs int) (stage, error) {
	rec := feature.RecordSize(tensors)
	size := int64(set.Len()) * int64(rec)
	mem := &staging{} // nothing staged
	if sysmem.AnonFits(size, memoryLimit) && !spillAlways {
		if a := newStaging(size); a != nil {
			mem = a
		}
	}
	if size == 0 || mem.data != nil {
		return &memStage{mem: mem, recs: feature.NewRecords(tensors, mem.data), set: set, todo: todo, steps: p.Steps(), par: shardWriters(jobs)}, nil
	}
	sp, err := newSpiller(ctx, p, todo, rec, memoryLimit, jobs, shardWriters(jobs))
	if err != nil {
		return nil, err
	}
	sp.layout, sp.jobs = feature.NewRecords(tensors, nil), max(1, jobs)
	return sp, nil
}

// spillAlways, when set (tests only), spills staging of any size.
var spillAlways bool

// memStage is a stage in memory: every needed sample's record at its slot
// (idSet.rank) of one staging area.
type memStage struct {
	mem   *staging
	recs  *feature.Records
	set   *feature.IDSet
	todo  []shardKey
	steps int
	par   int // shards written at once
}

func (m *memStage) records() *feature.Records { return m.recs }
func (m *memStage) sink() feature.RecordSink  { return feature.NewMemSink(m.recs) }
func (m *memStage) diskBytes() int64          { return 0 }
func (m *memStage) memBytes() int64           { return int64(len(m.mem.data)) }
func (m *memStage) spillWindows() int         { return 0 }
func (m *memStage) open(string) error         { return nil }
func (m *memStage) finish() error             { return nil }
func (m *memStage) close()                    { m.mem.remove() }

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

// newStaging returns size bytes of zeroed anonymous staging, or nil when the
// mapping fails (the run then spills).
func newStaging(size int64) *staging {
	data, whole, ok := sysmem.MapAnon(size)
	if !ok {
		return nil
	}
	return &staging{data: data, anon: whole}
}

// remove unmaps the staging.
func (s *staging) remove() {
	if s.anon != nil {
		sysmem.UnmapAnon(s.anon)
	}
	s.anon, s.data = nil, nil
}
