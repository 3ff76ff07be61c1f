package convert

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/internal/sysmem"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/shardset"
	"github.com/prepml/prep/source"
)

// LockName is the lock file of an output directory (shardset.LockName).
const LockName = shardset.LockName

// PlanFileName is the copy of the plan file inside a shard set
// (OUT/plan.json, shardset.PlanName): byte-identical to Options.PlanBytes,
// written atomically before the first shard. `prep verify OUT` reads it by
// default.
const PlanFileName = shardset.PlanName

// TempDirName is the directory under the output that holds a run's staging
// files (shardset.TempDirName); it is removed at the end of every run and at
// the start of the next.
const TempDirName = shardset.TempDirName

// Stage names passed to Options.OnStage and Options.Progress.
const (
	StageDecode = "decode" // stage 1: rows decoded into staging; bytes are 0
	StageWrite  = "write"  // stage 2: samples and shard bytes written
)

// Options configures Run.
type Options struct {
	Plan *plan.Plan // the loaded plan (plan.Load or plan.Parse)
	// PlanBytes are the bytes of the plan file Plan was parsed from, copied
	// to Output/plan.json; nil: Plan.Marshal().
	PlanBytes []byte
	Spec      *feature.Spec // a validated feature spec
	Output    string        // shard set directory; created if missing

	Epochs []int // epochs to materialize; nil = all
	Ranks  []int // ranks to materialize; nil = all

	Jobs        int   // parallel column chunks (stage 1); stage 2 writes 2*Jobs shards at once (1 for Jobs 1); <= 0: GOMAXPROCS
	MemoryLimit int64 // bytes of memory proportional to the data, all counted against it (--memory-limit; its shares: feature.Budget): staging and the values arena in anonymous memory (at most half; larger ones spill to disk), decoded column chunks in flight (estimated) and jagged batch blocks in the Go heap; <= 0: feature.DefaultMemoryLimit
	// ObjectStore reports that Source is an object store, whose read-ahead
	// (feature.Budget.ReadAhead) counts against MemoryLimit: the run's own
	// shares are those of the rest (feature.Budget.AfterReadAhead).
	ObjectStore bool
	Force       bool // replace an output made from another plan, source or spec

	ToolVersion string       // recorded in shards and manifest
	Logger      *slog.Logger // nil: discard
	Limits      feature.Limits
	// Source is where the plan's files are read from; nil: the local
	// directory Plan.Source.Root.
	Source source.Store

	// OnStage is called when a stage starts with its total rows and bytes
	// (bytes are 0 for StageDecode). Progress is called with increments;
	// both are serialised (never called concurrently).
	OnStage  func(stage string, totalRows, totalBytes int64)
	Progress func(stage string, rows, bytes int64)
	// OnShard is called in stage 2 when shard (epoch, rank) starts being
	// written (done false) and once it is committed (done true); serialised
	// with Progress. Up to Jobs shards are in flight at a time.
	OnShard func(epoch, rank int, done bool)
	// HeapLimit, when set, is called once before stage 1 with the bytes
	// of MemoryLimit left to the Go heap: MemoryLimit less the staging
	// records and values arena held in anonymous memory (at least half
	// of it). prep convert makes it the Go runtime's soft memory limit
	// (debug.SetMemoryLimit), so that the collector keeps the heap with
	// its garbage within it; the decode admission and stage 2's jagged
	// blocks take at most half of it live (Summary.AdmittedPeakBytes).
	HeapLimit func(bytes int64)
}

// Summary reports a finished run. JSON field names are stable (used by
// `prep convert --json`).
type Summary struct {
	Output        string `json:"output"`
	Rows          int64  `json:"rows"`           // sample slots written to shards this run, pads included
	Shards        int    `json:"shards"`         // shards written this run
	SkippedShards int    `json:"skipped_shards"` // shards already complete in the manifest
	Bytes         int64  `json:"bytes"`          // shard bytes written this run
	StagingBytes  int64  `json:"staging_bytes"`  // bytes of decoded samples staged
	SpillBytes    int64  `json:"spill_bytes"`    // bytes written to the spill file (0: staging fit the memory limit)
	SpillWindows  int    `json:"spill_windows"`  // output windows of a spilled run
	// ValuesArenaBytes is the size of the values arena of jagged tensors
	// (an upper bound from the footers; 0 without jagged tensors), and
	// ValuesArenaFile whether it was a file (it did not fit the memory
	// limit beside the staging records) rather than memory.
	ValuesArenaBytes int64   `json:"values_arena_bytes,omitempty"`
	ValuesArenaFile  bool    `json:"values_arena_file,omitempty"`
	RowGroupsRead    int     `json:"row_groups_read"`    // row groups read; a packed run decoding its documents in groups sums the groups' counts (both fields)
	RowGroupsSkipped int     `json:"row_groups_skipped"` // row groups without a needed sample
	RowGroupsSliced  int     `json:"row_groups_sliced"`  // row groups over the memory limit, decoded in row slices
	RowSlices        int     `json:"row_slices"`         // row slices of those row groups
	SamplesDecoded   int64   `json:"samples_decoded"`    // distinct sample ids decoded
	Seconds          float64 `json:"seconds"`
	DecodeSeconds    float64 `json:"decode_seconds"`
	WriteSeconds     float64 `json:"write_seconds"`
	MBPerSecond      float64 `json:"throughput_mb_s"` // Bytes / Seconds / 1e6
	PeakRSSBytes     int64   `json:"peak_rss_bytes"`  // peak RSS of the process, VmHWM on Linux (mapped staging pages included)
	PeakHeapBytes    int64   `json:"peak_heap_bytes"` // largest Go heap (objects) seen, sampled every 20 ms
	// AnonBudgetBytes is the part of the memory limit given to staging
	// records and the values arena in anonymous memory (or a spilled
	// run's stage-2 window), HeapBudgetBytes the rest, left to the Go
	// heap (Options.HeapLimit). AdmittedPeakBytes is the most bytes the
	// run's own accounting held admitted at once in the Go heap: decoded
	// column chunks in flight by their estimates (grown for long rows),
	// then jagged batch blocks; deterministic for a given input, Jobs and
	// limit, unlike the heap, which depends on when the collector runs.
	AnonBudgetBytes   int64 `json:"anon_budget_bytes"`
	HeapBudgetBytes   int64 `json:"heap_budget_bytes"`
	AdmittedPeakBytes int64 `json:"admitted_peak_bytes"`
	// PackedHeldPeakBytes, for a packed plan, is the most bytes of decoded
	// documents held at once (tokens at the dtype's size plus their
	// staging records), at most half of MemoryLimit (feature/packed.go).
	PackedHeldPeakBytes int64  `json:"packed_held_peak_bytes,omitempty"`
	StaleLock           string `json:"stale_lock,omitempty"`
	// Overflows counts, per tensor name, the source values decoded this run
	// that were too large for the tensor's F16, BF16 or F8 dtype and were
	// stored as ±Inf (±448 for F8_E4M3) under cast.overflow inf (see
	// cast.go). Tensors without overflows are absent; nil when none.
	Overflows map[string]int64 `json:"overflows,omitempty"`
}

type shardKey struct{ epoch, rank int }

// Run materializes the requested shards of a plan; see the package
// documentation for the stages and guarantees. On error nothing from this
// run is left in Output (shards it committed are removed and the manifest
// restored) and the returned error is an *Error, a *pqread.Error, a
// *shardset.HeldError (exit code 3) or wraps a sentinel of this package.
// When ctx is cancelled, the shards already committed stay (complete and
// listed in the manifest) so that a rerun resumes; temporaries are removed.
func Run(ctx context.Context, o Options) (_ *Summary, err error) {
	t0 := time.Now()
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.Jobs <= 0 {
		o.Jobs = runtime.GOMAXPROCS(0)
	}
	budget := feature.NewBudget(o.MemoryLimit)
	if o.ObjectStore {
		budget = budget.AfterReadAhead()
	}
	o.MemoryLimit = budget.Limit
	p, spec := o.Plan, o.Spec
	if p == nil || spec == nil {
		return nil, fmt.Errorf("convert: plan and spec are required")
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	epochs, err := selectRange("epoch", o.Epochs, p.Config.Epochs)
	if err != nil {
		return nil, err
	}
	ranks, err := selectRange("rank", o.Ranks, p.Config.WorldSize)
	if err != nil {
		return nil, err
	}

	// Everything that can fail on the inputs fails here, before the output
	// directory is touched.
	var prog *feature.Program
	var tensors []shardfmt.TensorInfo
	if p.Packing != nil {
		// A packed plan (packed.go): its samples are packed rows.
		if tensors, err = feature.PackedTensors(spec, p.Packing); err != nil {
			return nil, err
		}
	} else {
		if prog, err = feature.Compile(ctx, p, o.Source, spec, feature.Budget{Limit: o.MemoryLimit, Reader: o.Limits}); err != nil {
			return nil, err
		}
		defer prog.Close()
		tensors = prog.Tensors()
	}
	geo, err := shardfmt.NewGeometry(p.BatchSize(), tensors)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", feature.ErrSpec, err)
	}
	prov := shardfmt.Provenance{
		PlanFingerprint: p.Fingerprint, SourceFingerprint: p.SourceFingerprint, SpecHash: spec.Hash(),
		WorldSize: uint32(p.Config.WorldSize), Workers: uint32(p.Config.Workers), ToolVersion: o.ToolVersion,
	}

	// Output directory, lock, leftovers of killed runs, earlier manifest
	// (shardset.Begin; every name is reached without following a link).
	tx, err := shardset.Begin(o.Output)
	if err != nil {
		return nil, err
	}
	sum := &Summary{Output: o.Output}
	if lock := tx.Lock(); lock.Stale != nil {
		sum.StaleLock = lock.Stale.String()
		log.Warn("stale lock taken over: a previous run died without releasing it", "lock", lock.Path, "previous_owner", lock.Stale.String())
	}
	stopSampler := sampleHeap(&sum.PeakHeapBytes)
	defer stopSampler()
	r := &runner{o: o, p: p, spec: spec, prog: prog, tensors: tensors, geo: geo, prov: prov,
		log: log, sum: sum, tx: tx}
	err = r.run(ctx, epochs, ranks)
	switch {
	case err != nil && ctx.Err() != nil:
		// Interrupted: keep the shards committed so far (they are complete
		// and in the manifest, so a rerun resumes); drop only temporaries.
		tx.RemoveTemp()
		err = fmt.Errorf("convert interrupted after %d shards (rerun to resume): %w", sum.Shards, err)
	case err != nil:
		if rerr := tx.Rollback(); rerr != nil {
			log.Error("rollback: manifest not restored; keeping this run's shards", "err", rerr.Error())
		}
	}
	tx.End(err != nil)
	if err != nil {
		return nil, err
	}
	sum.Seconds = time.Since(t0).Seconds()
	if sum.Seconds > 0 {
		sum.MBPerSecond = float64(sum.Bytes) / sum.Seconds / 1e6
	}
	sum.PeakRSSBytes = peakRSS()
	stopSampler()
	return sum, nil
}

// sampleHeap records the largest Go heap object bytes into *peak every 20 ms
// until the returned stop function is called (safe to call twice).
func sampleHeap(peak *int64) (stop func()) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() {
		metrics.Read(sample)
		if v := int64(sample[0].Value.Uint64()); v > *peak {
			*peak = v
		}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				read()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			<-finished
			read()
		})
	}
}

// runner is the state of one Run after the checks.
type runner struct {
	o       Options
	p       *plan.Plan
	spec    *feature.Spec
	prog    *feature.Program // the compiled spec; nil for a packed plan
	tensors []shardfmt.TensorInfo
	geo     shardfmt.Geometry
	prov    shardfmt.Provenance
	log     *slog.Logger
	sum     *Summary

	tx *shardset.Txn // the output's write transaction: lock, commits, rollback

	arena     *feature.Arena     // jagged tensors' values; nil when none
	jagBlock  int64              // the most bytes of a jagged batch block (feature.Budget.JaggedBlock)
	jagBudget *feature.Admission // bytes of jagged batch blocks being built and written
	// jagCtx is stage 2's context (writeShards): a writer waiting on
	// jagBudget stops waiting when it is cancelled.
	jagCtx context.Context

	mu         sync.Mutex
	manifest   *shardfmt.Manifest // owned by tx once handed to it
	planBytes  []byte             // the plan file bytes, for Output/plan.json
	planOnDisk bool               // Output/plan.json already holds planBytes
	replace    *shardfmt.Manifest // --force: the manifest of the shard set being replaced
	progMu     sync.Mutex
}

func (r *runner) progress(stage string, rows, bytes int64) {
	if r.o.Progress == nil {
		return
	}
	r.progMu.Lock()
	r.o.Progress(stage, rows, bytes)
	r.progMu.Unlock()
}

// shardEvent reports a shard's start or commit to Options.OnShard.
func (r *runner) shardEvent(k shardKey, done bool) {
	if r.o.OnShard == nil {
		return
	}
	r.progMu.Lock()
	r.o.OnShard(k.epoch, k.rank, done)
	r.progMu.Unlock()
}

func (r *runner) run(ctx context.Context, epochs, ranks []int) error {
	out := r.o.Output
	// Earlier manifest (read by shardset.Begin, which also removed the
	// leftovers of killed runs): same inputs -> resume; other inputs ->
	// refuse or replace with Force.
	skip := map[shardKey]bool{}
	if b := r.tx.OldManifest(); b != nil {
		old, err := shardfmt.ParseManifest(b, out)
		if err != nil {
			return err
		}
		same := old.PlanFingerprint == r.p.Fingerprint && old.SourceFingerprint == r.p.SourceFingerprint && r.spec.MatchesHash(old.SpecHash)
		switch {
		case same:
			// The set keeps the hash it was made with (an earlier version's
			// too: MatchesHash), in the manifest and in every new shard.
			r.manifest = old
			r.manifest.Spec = r.spec.ManifestSpec(old.SpecHash)
			r.prov.SpecHash = old.SpecHash
			for _, s := range old.Shards {
				if r.tx.Complete(s) {
					skip[shardKey{s.Epoch, s.Rank}] = true
				}
			}
		case !r.o.Force:
			if d := inputDifferences(r.tx.OldPlan(), old.SpecHash, r.p, r.spec); d != "" {
				return fmt.Errorf("%s: %w: it was made from other inputs: %s (use --force to replace it)", out, ErrOutputMismatch, d)
			}
			return fmt.Errorf("%s: %w: it was made from plan %s, source %s, spec %s; this run has plan %s, source %s, spec %s (use --force to replace it)",
				out, ErrOutputMismatch, old.PlanFingerprint, old.SourceFingerprint, old.SpecHash, r.p.Fingerprint, r.p.SourceFingerprint, r.spec.Hash())
		default:
			// Replaced after stage 1 succeeds, so a failing run leaves it.
			r.replace = old
		}
	}
	// Earlier plan copy: byte-identical or another plan (refused without
	// Force, replaced before the first shard with it).
	if err := r.checkPlanCopy(); err != nil {
		return err
	}

	if r.manifest == nil {
		r.manifest = &shardfmt.Manifest{Format: shardfmt.ManifestFormat, ToolVersion: r.o.ToolVersion,
			PlanFingerprint: r.p.Fingerprint, SourceFingerprint: r.p.SourceFingerprint, SpecHash: r.prov.SpecHash,
			Spec: r.spec.ManifestSpec(r.prov.SpecHash), BatchSize: r.p.BatchSize(), Tensors: r.tensors, Shards: []shardfmt.ShardEntry{}}
		if r.geo.HasJagged() {
			r.manifest.ShardFormat = fmt.Sprintf("%d.%d", shardfmt.JaggedMajorVersion, shardfmt.JaggedMinorVersion)
		}
		for _, f := range r.p.Source.EmptyFiles {
			r.manifest.EmptyFiles = append(r.manifest.EmptyFiles, shardfmt.EmptyFile{Path: f.Path})
		}
		for e := 0; e < r.p.Config.Epochs && r.p.Derived.DroppedPerEpoch > 0; e++ {
			ids, err := r.p.Dropped(e)
			if err != nil {
				return err
			}
			r.manifest.Dropped = append(r.manifest.Dropped, shardfmt.DroppedIDs{Epoch: e, IDs: ids})
		}
	}
	r.tx.SetManifest(r.manifest)

	var todo []shardKey
	for _, e := range epochs {
		for _, k := range ranks {
			if skip[shardKey{e, k}] {
				r.sum.SkippedShards++
				continue
			}
			todo = append(todo, shardKey{e, k})
		}
	}
	if len(todo) == 0 { // the summary says so: SkippedShards
		return r.writePlanCopy() // a shard set made before plan.json was kept
	}

	if r.p.Packing != nil {
		return r.runPacked(ctx, todo)
	}

	// Needed ids, staging and shard sizes, free space.
	set, err := neededIDs(ctx, r.p, todo)
	if err != nil {
		return err
	}
	stageTotal := int64(set.Len()) * int64(feature.RecordSize(r.tensors))
	budget := feature.NewBudget(r.o.MemoryLimit)
	block := budget.JaggedBlock()
	r.arena = r.prog.NewArena(set)
	var shardTotal int64
	for _, k := range todo {
		n, err := r.shardSize(k, set)
		if err != nil {
			return err
		}
		shardTotal += n
	}
	// One budget (see Memory in the package documentation): the staging
	// records and the values arena held in anonymous memory take at most
	// half of the limit; the Go heap has the rest.
	anonCap := budget.Anon()
	st, err := newStage(ctx, r.p, todo, set, r.tensors, anonCap, r.o.Jobs)
	if err != nil {
		return err
	}
	defer st.close()
	if r.arena != nil {
		r.arena.Place(st.memBytes(), anonCap, r.o.Jobs)
		defer r.arena.Close()
		r.sum.ValuesArenaBytes, r.sum.ValuesArenaFile = r.arena.Size(), !r.arena.InMemory()
	}
	heap := budget.Heap(st.memBytes() + r.arena.MemBytes())
	r.sum.AnonBudgetBytes, r.sum.HeapBudgetBytes = r.o.MemoryLimit-heap, heap
	if r.o.HeapLimit != nil {
		r.o.HeapLimit(heap)
	}
	r.jagBlock, r.jagBudget = block, feature.NewAdmission(budget.JaggedInFlight(heap))
	need := st.diskBytes() + r.arena.DiskBytes() + shardTotal
	if free, ok := sysmem.FreeBytes(out); ok && free < need {
		if a := r.arena.DiskBytes(); a > 0 {
			return fmt.Errorf("%s: %w: need %d bytes (%d spill + %d values arena + %d for %d shards), %d free", out, feature.ErrNoSpace, need, st.diskBytes(), a, shardTotal, len(todo), free)
		}
		return fmt.Errorf("%s: %w: need %d bytes (%d spill + %d for %d shards), %d free", out, feature.ErrNoSpace, need, st.diskBytes(), shardTotal, len(todo), free)
	}
	tmp := filepath.Join(out, TempDirName, strconv.Itoa(os.Getpid()))
	if err := st.open(tmp); err != nil {
		return err
	}
	if r.arena != nil {
		if err := r.arena.Open(tmp); err != nil {
			return err
		}
	}
	if n := st.spillWindows(); n > 0 {
		r.sum.SpillBytes, r.sum.SpillWindows = st.diskBytes(), n
		r.log.Info("staging exceeds the memory limit: spilling to disk by output window",
			"staging_bytes", stageTotal, "memory_limit", r.o.MemoryLimit, "spill_bytes", st.diskBytes(), "windows", n)
	}

	// Stage 1: decode once into staging.
	t1 := time.Now()
	if r.o.OnStage != nil {
		r.o.OnStage(StageDecode, int64(set.Len()), 0)
	}
	ds, err := r.prog.Decode(ctx, set, feature.Target{Records: st.records(), Sink: st.sink, Arena: r.arena}, r.o.Jobs, budget.Decode(heap),
		func(rows int64) { r.progress(StageDecode, rows, 0) })
	if err != nil {
		return err
	}
	if err := st.finish(); err != nil {
		return err
	}
	r.reportOverflows()
	r.sum.RowGroupsRead, r.sum.RowGroupsSkipped = ds.RowGroupsRead, ds.RowGroupsSkipped
	r.sum.RowGroupsSliced, r.sum.RowSlices = ds.RowGroupsSliced, ds.RowSlices
	r.sum.AdmittedPeakBytes = ds.AdmittedPeakBytes
	r.sum.SamplesDecoded, r.sum.StagingBytes = int64(set.Len()), stageTotal
	r.sum.DecodeSeconds = time.Since(t1).Seconds()

	if r.replace != nil {
		r.log.Warn("replacing a shard set made from other inputs (--force)", "output", out, "old_plan", r.replace.PlanFingerprint, "old_spec", r.replace.SpecHash)
		if err := r.tx.Replace(r.replace); err != nil {
			return err
		}
	}

	if err := r.writePlanCopy(); err != nil {
		return err
	}

	// Stage 2: gather batches into shards, in parallel over shards.
	t2 := time.Now()
	if r.o.OnStage != nil {
		r.o.OnStage(StageWrite, int64(len(todo))*int64(r.p.Steps())*int64(r.p.BatchSize()), shardTotal)
	}
	if err := r.writeShards(ctx, st); err != nil {
		return err
	}
	r.sum.AdmittedPeakBytes = max(r.sum.AdmittedPeakBytes, r.jagBudget.PeakBytes())
	r.sum.WriteSeconds = time.Since(t2).Seconds()
	return nil
}

// shardSize returns the size of shard k (shardfmt.FileSize), or, with
// jagged tensors, whose shard size depends on their values, an estimate
// from above: the shard with each jagged tensor's offsets counted as a
// fixed 16-byte sample, plus per batch the longer batch table entry and
// the alignment of the values slabs and the block, plus the values, each
// sample slot taking the arena's bytes per needed sample (the footers'
// bound over the row groups read).
func (r *runner) shardSize(k shardKey, set *feature.IDSet) (int64, error) {
	opts := r.writerOptions(k)
	if r.arena == nil {
		return shardfmt.FileSize(opts)
	}
	fixed := opts
	fixed.Tensors = append([]shardfmt.TensorInfo(nil), opts.Tensors...)
	for i, t := range fixed.Tensors {
		if t.Jagged {
			fixed.Tensors[i] = shardfmt.TensorInfo{Name: t.Name, DType: shardfmt.I64, Shape: []uint64{2}}
		}
	}
	n, err := shardfmt.FileSize(fixed)
	if err != nil {
		return 0, err
	}
	j := int64(r.arena.Jagged())
	batches := int64(opts.NumBatches)
	perSample := (r.arena.Size() + int64(set.Len()) - 1) / max(1, int64(set.Len()))
	n += shardfmt.BlockAlign + batches*(shardfmt.BatchEntryLenV2+8*j+j*shardfmt.SlabAlign+shardfmt.BlockAlign)
	return n + batches*int64(opts.BatchSize)*perSample, nil
}

// reportOverflows copies stage 1's narrow-float overflow counts into the
// summary and logs one warning per tensor that had any.
func (r *runner) reportOverflows() {
	for _, ov := range r.prog.Overflows() {
		if r.sum.Overflows == nil {
			r.sum.Overflows = map[string]int64{}
		}
		r.sum.Overflows[ov.Tensor] += ov.Count
		stored := "±Inf"
		if ov.DType == shardfmt.F8_E4M3 {
			stored = "±448"
		}
		r.log.Warn("values too large for the tensor's dtype were stored as "+stored+" (set cast.overflow: error to refuse them)",
			"tensor", ov.Tensor, "dtype", ov.DType.String(), "count", ov.Count)
	}
}

// checkPlanCopy compares Output/plan.json, when present, with the plan
// bytes of this run: any difference means another plan, refused with
// ErrOutputMismatch unless Force (the copy is then replaced before the first
// shard).
func (r *runner) checkPlanCopy() error {
	if r.planBytes = r.o.PlanBytes; r.planBytes == nil {
		b, err := r.p.Marshal()
		if err != nil {
			return fmt.Errorf("encoding plan: %w", err)
		}
		r.planBytes = b
	}
	path := filepath.Join(r.o.Output, PlanFileName)
	old := r.tx.OldPlan()
	switch {
	case old == nil:
		return nil
	case bytes.Equal(old, r.planBytes):
		r.planOnDisk = true
		return nil
	case r.o.Force:
		r.log.Warn("replacing the shard set's plan copy with another plan (--force)", "path", path)
		return nil
	}
	if d := inputDifferences(old, r.spec.Hash(), r.p, r.spec); d != "" {
		return fmt.Errorf("%s: %w: its plan.json differs from this run's plan in %s (use --force to replace it)", r.o.Output, ErrOutputMismatch, d)
	}
	return fmt.Errorf("%s: %w: its plan.json differs from this run's plan %s (use --force to replace it)", r.o.Output, ErrOutputMismatch, r.p.Fingerprint)
}

// writePlanCopy writes Output/plan.json atomically unless it already holds
// the plan bytes.
func (r *runner) writePlanCopy() error {
	if r.planOnDisk {
		return nil
	}
	if err := r.tx.WritePlan(r.planBytes); err != nil {
		return err
	}
	r.planOnDisk = true
	return nil
}

// selectRange returns the requested values, or 0..n-1 when none are given,
// checking each is in [0, n).
func selectRange(what string, req []int, n int) ([]int, error) {
	if req == nil {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out, nil
	}
	seen := map[int]bool{}
	var out []int
	for _, v := range req {
		if v < 0 || v >= n {
			return nil, fmt.Errorf("%w: %s %d not in the plan's [0, %d)", feature.ErrSpec, what, v, n)
		}
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out, nil
}

// peakRSS returns the process's peak resident set size in bytes: VmHWM
// where the system has it, else getrusage's ru_maxrss.
func peakRSS() int64 {
	if n, ok := vmHWM(); ok {
		return n
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * maxrssUnit
}
