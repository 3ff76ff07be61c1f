package feature

import (
	"context"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/pqread"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/source"
)

// Limits are the Parquet reader's fixed bounds (pqread.Limits): the most
// bytes of a page, of a value, of level entries in one row. The zero value
// takes pqread's defaults.
type Limits = pqread.Limits

// Program is a feature spec compiled against the source files of a plan
// (Compile): every spec column resolved in every file, each tensor's
// transform chosen, the shard tensors it yields known. Decode runs it over
// a set of sample ids: stage 1 of a conversion, and what verify --deep
// decodes to compare shards against. A Program holds the files it opened
// (the footers within its budget) until Close. Its Decode calls must not
// overlap.
type Program struct {
	files      []*sourceFile
	plans      []*tensorPlan
	tensors    []shardfmt.TensorInfo
	runLimit   int64  // the memory limit whose row bounds apply (Budget.Limit)
	numSamples uint64 // the plan's samples
	fixedCap   int64  // pqread's fixed row bound (Limits.MaxRowSlots), 0: its default
}

// Compile checks spec (Spec.Validate), opens every source file of p from
// st (nil: the local directory p.Source.Root), checks each against the plan
// (size, footer hash, row groups: a *source.ChangedError wrapping
// ErrSourceChanged when it differs) and compiles the spec against their
// schemas. Rows are bounded as a run under b.Limit bounds them: a row of a
// jagged tensor may hold a jagged block's values (a quarter of the limit,
// at least 1 MiB), a fixed list's row the limit over 22 bytes per level
// entry; footers of at most b.Footers bytes stay held for Decode. A packed
// plan is refused with ErrSpec (its samples are packed rows:
// PackedTensors, OpenPackedGroups). Errors: ErrSpec, ErrSchema,
// ErrSourceChanged, *source.Error and *pqread.Error, nothing opened left
// held.
func Compile(ctx context.Context, p *plan.Plan, st source.Store, spec *Spec, b Budget) (*Program, error) {
	b = b.normal()
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	files, plans, err := openForSpec(ctx, p, st, spec, rowSlotLimit(spec, b.Reader, b.Limit), b.footers())
	if err != nil {
		return nil, err
	}
	pr := &Program{files: files, plans: plans, tensors: outputs(plans), runLimit: b.Limit, fixedCap: b.Reader.MaxRowSlots, numSamples: p.NumSamples()}
	setRowLimit(plans, b.Limit)
	return pr, nil
}

// Tensors returns the shard tensors the program yields, in shard table
// order (masks, lengths and other derived tensors after the tensor they
// belong to).
func (pr *Program) Tensors() []shardfmt.TensorInfo { return pr.tensors }

// Close releases the footers and descriptors the program holds. It is
// safe to call more than once.
func (pr *Program) Close() {
	if pr != nil {
		closeSources(pr.files)
	}
}

// NewArena lays out the values arena of the program's jagged tensors for
// the row groups holding an id of set (sealed): nil when no tensor is
// jagged. The caller places it in memory or a file (Arena.Place,
// Arena.Open) before Decode.
func (pr *Program) NewArena(set *IDSet) *Arena {
	return newArena(pr.files, pr.plans, pr.tensors, set)
}

// Target is where Decode leaves what it decodes.
type Target struct {
	// Records is the record layout (NewRecords over Tensors()); its data
	// holds the records of set's ids at their slots when records are in
	// memory (nil data when they are not).
	Records *Records
	// Sink returns the way in of one decode worker (called once per
	// worker): each assembled block of records goes where it says.
	Sink func() RecordSink
	// Arena holds the values of jagged tensors (Program.NewArena); nil
	// when none is jagged.
	Arena *Arena
}

// DecodeStats counts what a Decode read.
type DecodeStats struct {
	RowGroupsRead    int // row groups holding a wanted id, read
	RowGroupsSkipped int // non-empty row groups without one, skipped
	RowGroupsSliced  int // row groups over the memory bound, read in row windows
	RowSlices        int // the row windows of those
	// AdmittedPeakBytes is the most bytes of decoded column chunks held
	// admitted at once, by their estimates (grown for long rows).
	AdmittedPeakBytes int64
}

// Decode decodes the members of set (sealed) from the program's files
// into t: each row group holding a member read once (in row windows when
// its decoded column chunks exceed memory), each column chunk decoded by
// one of jobs workers, the spec's transforms applied, each member's record
// assembled at its slot (its rank in set). memory bounds the estimated
// bytes of decoded column chunks in flight; images decode jobs at a time
// within a share of the program's limit. progress, when set, is called
// with rows assembled (serialised). On failure it returns the error of
// the earliest failing column chunk in task order (an *Error naming file,
// column, row group and row; a *pqread.Error naming its file relative to
// the plan's root, a row over the row bound explained), whatever jobs.
func (pr *Program) Decode(ctx context.Context, set *IDSet, t Target, jobs int, memory int64, progress func(rows int64)) (_ DecodeStats, err error) {
	defer relativeNames(&err, pr.files)
	defer explainRowSlots(&err, pr.plans, pr.fixedCap)
	setImageLimits(pr.plans, pr.runLimit, jobs)
	dec := &decoder{files: pr.files, plans: pr.plans, set: set, bufs: t.Records, sink: t.Sink, arena: t.Arena,
		jobs: jobs, memoryLimit: memory, progress: progress}
	err = dec.run(ctx)
	st := DecodeStats{RowGroupsRead: dec.rowGroupsRead, RowGroupsSkipped: dec.rowGroupsSkipped,
		RowGroupsSliced: dec.rowGroupsSliced, RowSlices: dec.rowSlices}
	if dec.adm != nil {
		st.AdmittedPeakBytes = dec.adm.PeakBytes()
	}
	return st, err
}

// Overflow counts the source values of one tensor too large for its F16,
// BF16 or F8 dtype, stored as ±Inf (±448 for F8_E4M3) under cast.overflow
// inf (cast.go).
type Overflow struct {
	Tensor string
	DType  shardfmt.DType
	Count  int64
}

// Overflows returns the overflows of the tensors that had any, in spec
// order, counted over every Decode so far.
func (pr *Program) Overflows() []Overflow {
	var out []Overflow
	for _, tp := range pr.plans {
		if n := tp.overflows.Load(); n > 0 {
			out = append(out, Overflow{Tensor: tp.spec.Name, DType: tp.dt, Count: n})
		}
	}
	return out
}
