// Package plan makes and reads deterministic epoch plans (format
// prep-plan/v1, and prep-plan/v2 for a packed mixture; specified in
// PLAN.md).
//
// A plan fixes which sample (global row index of the source) every rank's
// batch holds at every step of every epoch, as a pure function of a few
// inputs: the source fingerprint, a seed, the number of epochs, the global
// batch G, the world size R, the workers per rank W, a shuffle mode and a
// remainder policy. The plan file records those inputs, derived counts,
// per-epoch digests and fingerprints, never the indices themselves.
//
// Except in the partitioned mode, the order of an epoch (the global batch
// sequence) does not depend on R or W: rank r takes slots [r·b, (r+1)·b) of
// every global batch (b = G/R) and rank batch j is produced by worker
// j mod W. Every rank takes the same number of steps in every epoch.
package plan

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/prepml/prep/internal/atomicfile"
)

// Shuffle is a shuffle mode (PLAN.md §Shuffle modes).
type Shuffle string

// Remainder is a remainder policy: what happens to the last global batch
// when G does not divide N (PLAN.md §Remainder).
type Remainder string

const (
	// ShuffleNone keeps source order in every epoch.
	ShuffleNone Shuffle = "none"
	// ShuffleGlobal applies a keyed permutation of [0, N) per epoch.
	ShuffleGlobal Shuffle = "global"
	// ShuffleBlocks permutes the row groups (blocks) per epoch, then shuffles
	// samples inside windows of Config.Window consecutive blocks.
	ShuffleBlocks Shuffle = "blocks"
	// ShufflePartitioned assigns blocks to ranks once (balanced by rows) and
	// shuffles within each rank's partition per epoch.
	ShufflePartitioned Shuffle = "partitioned"

	// RemainderDrop drops the last N mod G samples of each epoch's order.
	RemainderDrop Remainder = "drop"
	// RemainderPad fills the short last global batch with samples from the
	// start of the same epoch's order, flagged as pad.
	RemainderPad Remainder = "pad"
	// RemainderPartial keeps a short last global batch (evaluation only).
	RemainderPartial Remainder = "partial"
)

// Upper bounds on the plan inputs, checked by Config.Validate. They keep
// every allocation a plan makes (one digest per epoch, a batch of ids per
// CPU, a partition per rank) small and every product of counts inside int64,
// far above what a training job uses.
const (
	// MaxEpochs bounds Config.Epochs: the plan file records one digest per
	// epoch (about 100 bytes) and New hashes every epoch.
	MaxEpochs = 1 << 16
	// MaxGlobalBatch bounds Config.GlobalBatch (samples per step over all
	// ranks); a rank batch of ids is held per CPU while digesting.
	MaxGlobalBatch = 1 << 24
	// MaxWorldSize bounds Config.WorldSize (it must also divide G).
	MaxWorldSize = 1 << 20
	// MaxWorkers bounds Config.Workers, data-loader workers per rank.
	MaxWorkers = 1 << 10
	// MaxWindow bounds Config.Window, row groups per shuffle window.
	MaxWindow = 1 << 30
	// MaxSamples bounds the source's row count N (2^40, about 1.1·10^12
	// rows): New hashes every sample id of every epoch (O(Epochs·N)), so a
	// larger source, or a footer claiming one, is refused before any
	// hashing starts.
	MaxSamples = 1 << 40
)

// Config holds the plan inputs other than the source.
type Config struct {
	Seed        uint64    `json:"seed"`             // any value, 0 included
	Epochs      int       `json:"epochs"`           // >= 1
	GlobalBatch int       `json:"global_batch"`     // G >= 1, samples per step over all ranks
	WorldSize   int       `json:"world_size"`       // R >= 1, must divide G
	Workers     int       `json:"workers"`          // W >= 1, data-loader workers per rank
	Shuffle     Shuffle   `json:"shuffle"`          // none, global, blocks or partitioned
	Window      int       `json:"window,omitempty"` // K >= 1 blocks per window for blocks; 0 otherwise
	Remainder   Remainder `json:"remainder"`        // drop, pad or partial
}

// Derived holds the counts a plan derives from its inputs. They are the
// same in every epoch.
type Derived struct {
	Samples         uint64   `json:"samples"`                  // N
	Blocks          int      `json:"blocks"`                   // non-empty row groups
	BatchSize       int      `json:"batch_size"`               // b = G/R
	StepsPerEpoch   int      `json:"steps_per_epoch"`          // S, equal for every rank
	DroppedPerEpoch uint64   `json:"dropped_per_epoch"`        // samples left out of each epoch (drop)
	PaddedPerEpoch  uint64   `json:"padded_per_epoch"`         // pad slots in each epoch (pad)
	PartitionRows   []uint64 `json:"partition_rows,omitempty"` // partitioned: rows of each rank's partition
}

// EpochInfo records one epoch's digest (PLAN.md §Epoch digest).
type EpochInfo struct {
	Epoch  int    `json:"epoch"`
	Digest string `json:"digest"` // "sha256:<hex>"
}

// Plan is a loaded or newly made plan. The exported fields are the plan
// file's content; do not modify them. Its methods are safe for concurrent
// use.
type Plan struct {
	Format      string `json:"format"`    // FormatVersion, or FormatPackedMixture for a packed mixture
	Algorithm   string `json:"algorithm"` // Algorithm
	Fingerprint string `json:"fingerprint"`
	// OrderFingerprint covers what fixes the global batch sequence: it
	// leaves out the epoch count, W and (except in partitioned mode) R, so a
	// resume cursor stays valid for any R dividing G.
	OrderFingerprint  string  `json:"order_fingerprint"`
	SourceFingerprint string  `json:"source_fingerprint"`
	Config            Config  `json:"config"`
	Derived           Derived `json:"derived"`
	// Packing is the packing of a token column into fixed-length rows
	// (PLAN.md §12), nil when none: then the samples are packed rows.
	Packing *Packing    `json:"packing,omitempty"`
	Epochs  []EpochInfo `json:"epochs"`
	// Mixture, when present, draws each epoch from several named sources
	// at fixed rates (PLAN.md §11); absent in a plan of one pool.
	Mixture *Mixture `json:"mixture,omitempty"`
	Source  Source   `json:"source"`

	st      *state
	packMix *mixState // a packed mixture's document draws (PLAN.md §12.1), nil otherwise
}

// New validates cfg and derives a plan over src, including every epoch's
// digest (cost O(Epochs·N), spread over all CPUs). src is normalized (see
// Source.Normalize); the caller's slices are not modified. Errors wrap
// ErrConfig.
func New(src Source, cfg Config) (*Plan, error) {
	return NewContext(context.Background(), src, cfg, nil)
}

// NewContext is New, stoppable and reporting progress: the epoch digests
// (O(Epochs·N) time, O(GOMAXPROCS) memory) are computed with
// EpochDigestContext, and progress (if not nil) is called with the epoch
// and the steps of it hashed so far, and the steps per epoch. It returns
// ctx's error when ctx is done before the last digest.
func NewContext(ctx context.Context, src Source, cfg Config, progress func(epoch, steps, total int)) (*Plan, error) {
	return newContext(ctx, src, cfg, nil, nil, progress)
}

// NewMixtureContext is NewContext for a plan whose epochs draw from the
// named sources of mix (PLAN.md §11); mix nil is NewContext. Every file of
// src belongs to exactly one of mix's sources; mix.EpochSamples 0 means the
// sum of the sources' rows. The caller's mix is not modified: the plan
// records a resolved copy. Errors wrap ErrConfig and name the source.
func NewMixtureContext(ctx context.Context, src Source, cfg Config, mix *Mixture, progress func(epoch, steps, total int)) (*Plan, error) {
	return newContext(ctx, src, cfg, nil, mix, progress)
}

// newContext is NewContext with a packing and a mixture (nil: none).
func newContext(ctx context.Context, src Source, cfg Config, pk *Packing, mix *Mixture, progress func(epoch, steps, total int)) (*Plan, error) {
	return newContextWith(ctx, src, cfg, pk, mix, progress, nil)
}

// newContextWith is newContext calling derived (when not nil) with the
// plan once all but its epoch digests is known; its error stops the plan.
func newContextWith(ctx context.Context, src Source, cfg Config, pk *Packing, mix *Mixture, progress func(epoch, steps, total int), derived func(*Plan) error) (*Plan, error) {
	p, err := derive(src, cfg, pk, mix)
	if err != nil {
		return nil, err
	}
	if derived != nil {
		if err := derived(p); err != nil {
			return nil, err
		}
	}
	p.Epochs = make([]EpochInfo, cfg.Epochs)
	for e := range p.Epochs {
		var onSteps func(int)
		if progress != nil {
			onSteps = func(k int) { progress(e, k, p.Steps()) }
		}
		d, err := p.EpochDigestContext(ctx, e, onSteps)
		if err != nil {
			return nil, err
		}
		p.Epochs[e] = EpochInfo{Epoch: e, Digest: d}
	}
	return p, nil
}

// derive builds everything but the epoch digests; with a packing, the
// samples are its packed rows; with a mixture, each epoch draws from its
// named sources; with both, the mixture chooses the documents that are
// packed (PLAN.md §12.1).
func derive(src Source, cfg Config, pk *Packing, mix *Mixture) (*Plan, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	src.Files = append([]SourceFile(nil), src.Files...)
	src.EmptyFiles = append([]SourceFile(nil), src.EmptyFiles...)
	if err := src.Normalize(); err != nil {
		return nil, err
	}
	if n := src.NumSamples(); n > MaxSamples {
		return nil, configErrorf("source", "%d rows exceed the limit of %d samples per plan (split the source into several plans)", n, uint64(MaxSamples))
	}
	idx := src.index
	if pk != nil {
		if err := pk.check(idx.n); err != nil {
			return nil, err
		}
		if err := checkPackedMixture(pk, mix, cfg.Epochs); err != nil {
			return nil, err
		}
		if cfg.Shuffle != ShuffleNone && cfg.Shuffle != ShuffleGlobal {
			return nil, configErrorf("shuffle", "packing takes shuffle none or global, not %s", cfg.Shuffle)
		}
		idx = &sourceIndex{n: pk.Rows} // the samples are packed rows
	}
	var ms *mixState
	if mix != nil {
		srcs, t, err := resolveMixture(&src, cfg, mix, pk != nil)
		if err != nil {
			return nil, err
		}
		mix = mix.resolved(srcs, t)
		ms = newMixState(src.index, srcs, t, cfg)
	}
	var packMix *mixState
	if pk != nil && ms != nil {
		// The mixture chose the packed documents (§12.1); the samples
		// are the packed rows, ordered as one pool.
		packMix, ms = ms, nil
	}
	var prows []uint64
	format := FormatVersion
	if packMix != nil {
		format = FormatPackedMixture
		prows = make([]uint64, len(pk.Epochs))
		for e, ep := range pk.Epochs {
			prows[e] = ep.Rows
		}
	}
	st, d, err := newState(idx, cfg, ms, prows)
	if err != nil {
		return nil, err
	}
	p := &Plan{
		Mixture:           mix,
		Format:            format,
		Algorithm:         Algorithm,
		SourceFingerprint: src.Fingerprint(),
		Config:            cfg,
		Derived:           d,
		Packing:           pk,
		Source:            src,
		st:                st,
		packMix:           packMix,
	}
	if pk != nil {
		p.Derived.Blocks = len(src.index.blocks)
	}
	p.OrderFingerprint = orderFingerprint(p.SourceFingerprint, cfg, pk, mix)
	p.Fingerprint = planFingerprint(format, p.OrderFingerprint, cfg)
	return p, nil
}

// Validate checks the inputs without a source: counts at least 1 and at
// most MaxEpochs, MaxGlobalBatch, MaxWorldSize, MaxWorkers and MaxWindow, G
// divisible by R, a known shuffle mode and remainder policy, a window
// exactly for blocks. Errors wrap ErrConfig and name the field.
func (c *Config) Validate() error {
	switch {
	case c.Epochs < 1:
		return configErrorf("epochs", "must be at least 1, not %d", c.Epochs)
	case c.Epochs > MaxEpochs:
		return configErrorf("epochs", "%d exceeds the limit of %d epochs per plan (make one plan per run of epochs)", c.Epochs, MaxEpochs)
	case c.GlobalBatch < 1:
		return configErrorf("global_batch", "must be at least 1, not %d", c.GlobalBatch)
	case c.GlobalBatch > MaxGlobalBatch:
		return configErrorf("global_batch", "%d exceeds the limit of %d samples per step", c.GlobalBatch, MaxGlobalBatch)
	case c.WorldSize < 1:
		return configErrorf("world_size", "must be at least 1, not %d", c.WorldSize)
	case c.WorldSize > MaxWorldSize:
		return configErrorf("world_size", "%d exceeds the limit of %d ranks", c.WorldSize, MaxWorldSize)
	case c.GlobalBatch%c.WorldSize != 0:
		return configErrorf("global_batch", "global batch %d is not divisible by world size %d", c.GlobalBatch, c.WorldSize)
	case c.Workers < 1:
		return configErrorf("workers", "must be at least 1, not %d", c.Workers)
	case c.Workers > MaxWorkers:
		return configErrorf("workers", "%d exceeds the limit of %d workers per rank", c.Workers, MaxWorkers)
	case c.Window > MaxWindow:
		return configErrorf("window", "%d exceeds the limit of %d row groups", c.Window, MaxWindow)
	}
	switch c.Shuffle {
	case ShuffleNone, ShuffleGlobal, ShufflePartitioned:
		if c.Window != 0 {
			return configErrorf("window", "only shuffle mode blocks takes a window, not %s", c.Shuffle)
		}
	case ShuffleBlocks:
		if c.Window < 1 {
			return configErrorf("window", "shuffle mode blocks needs a window of at least 1 block, not %d", c.Window)
		}
	default:
		return configErrorf("shuffle", "unknown mode %q (want none, global, blocks or partitioned)", c.Shuffle)
	}
	switch c.Remainder {
	case RemainderDrop, RemainderPad, RemainderPartial:
	default:
		return configErrorf("remainder", "unknown policy %q (want drop, pad or partial)", c.Remainder)
	}
	return nil
}

// orderFingerprint is "sha256:" + SHA-256 of PLAN.md §Fingerprints' order text.
// A plan with a packing appends its canonical text (§12); one with a
// mixture appends "mixture=<fingerprint of its canonical text>\n" (§11.5);
// a plan with neither has exactly the v1 text.
func orderFingerprint(source string, c Config, pk *Packing, mix *Mixture) string {
	var b strings.Builder
	fmt.Fprintf(&b, "prep-order/v1\nalgorithm=%s\nsource=%s\nseed=%d\nglobal_batch=%d\nshuffle=%s\nwindow=%d\nremainder=%s\n",
		Algorithm, source, c.Seed, c.GlobalBatch, c.Shuffle, c.Window, c.Remainder)
	if c.Shuffle == ShufflePartitioned {
		fmt.Fprintf(&b, "world_size=%d\n", c.WorldSize)
	}
	if pk != nil {
		b.WriteString(pk.canonical())
	}
	if mix != nil {
		fmt.Fprintf(&b, "mixture=%s\n", mix.fingerprint())
	}
	return sha256Digest(b.String())
}

// planFingerprint is "sha256:" + SHA-256 of PLAN.md §Fingerprints' plan
// text, which starts with the plan's format.
func planFingerprint(format, order string, c Config) string {
	s := fmt.Sprintf("%s\norder=%s\nepochs=%d\nworld_size=%d\nworkers=%d\n", format, order, c.Epochs, c.WorldSize, c.Workers)
	return sha256Digest(s)
}

// Load reads and validates a plan file: format and algorithm ids, inputs,
// fingerprints and derived counts are checked against a fresh derivation.
// Epoch digests are not recomputed (see EpochDigest). Errors wrap ErrFormat
// or ErrConfig, or the I/O error, inside an *Error naming path.
func Load(path string) (*Plan, error) {
	p, _, err := LoadBytes(path)
	return p, err
}

// LoadBytes is Load that also returns the file's bytes, for a caller that
// copies the plan file exactly (convert keeps one in its output).
func LoadBytes(path string) (*Plan, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, &Error{Path: path, Err: err}
	}
	p, err := Parse(data)
	if err != nil {
		var pe *Error
		if errors.As(err, &pe) && pe.Path == "" {
			pe.Path = path
			return nil, nil, pe
		}
		return nil, nil, &Error{Path: path, Err: err}
	}
	return p, data, nil
}

// Parse decodes and validates plan file bytes as Load does.
func Parse(data []byte) (*Plan, error) {
	var f Plan
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("decoding json: %v: %w", err, ErrFormat)
	}
	if f.Format != FormatVersion && f.Format != FormatPackedMixture {
		return nil, &Error{Field: "format", Err: fmt.Errorf("format %q, want %q (or %q for a packed mixture): %w", f.Format, FormatVersion, FormatPackedMixture, ErrFormat)}
	}
	packedMix := f.Packing != nil && f.Mixture != nil
	switch {
	case packedMix && f.Format == FormatVersion:
		return nil, &Error{Field: "format", Err: fmt.Errorf("this packed mixture is a %s plan, made by an earlier prep that packed the same documents in every epoch; "+
			"prep now packs each epoch's own draws (%s, PLAN.md §12.1): make the plan again with prep plan --sources: %w", FormatVersion, FormatPackedMixture, ErrFormat)}
	case !packedMix && f.Format == FormatPackedMixture:
		return nil, &Error{Field: "format", Err: fmt.Errorf("format %s is for a packed mixture only (a plan with both packing and mixture), want %s: %w", FormatPackedMixture, FormatVersion, ErrFormat)}
	}
	if f.Algorithm != Algorithm {
		return nil, &Error{Field: "algorithm", Err: fmt.Errorf("algorithm %q, want %q: %w", f.Algorithm, Algorithm, ErrFormat)}
	}
	p, err := derive(f.Source, f.Config, f.Packing, f.Mixture)
	if err != nil {
		return nil, err
	}
	if f.Mixture != nil && f.Mixture.EpochSamples == 0 {
		return nil, &Error{Field: "mixture", Err: fmt.Errorf("epoch_samples missing: %w", ErrFormat)}
	}
	check := func(field string, got, want any) error {
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return &Error{Field: field, Err: fmt.Errorf("recorded %v, inputs give %v: %w", got, want, ErrFormat)}
		}
		return nil
	}
	for _, c := range []struct {
		field     string
		got, want any
	}{
		{"source_fingerprint", f.SourceFingerprint, p.SourceFingerprint},
		{"order_fingerprint", f.OrderFingerprint, p.OrderFingerprint},
		{"fingerprint", f.Fingerprint, p.Fingerprint},
		{"derived", f.Derived, p.Derived},
		{"mixture", mixtureText(f.Mixture), mixtureText(p.Mixture)},
		{"epochs", len(f.Epochs), f.Config.Epochs},
	} {
		if err := check(c.field, c.got, c.want); err != nil {
			return nil, err
		}
	}
	for i, e := range f.Epochs {
		if e.Epoch != i || !strings.HasPrefix(e.Digest, "sha256:") || len(e.Digest) != 7+64 {
			return nil, &Error{Field: "epochs", Err: fmt.Errorf("entry %d malformed: %w", i, ErrFormat)}
		}
	}
	p.Epochs = f.Epochs
	return p, nil
}

// Marshal returns the plan file bytes: indented JSON with a trailing
// newline. The same plan always gives the same bytes.
func (p *Plan) Marshal() ([]byte, error) {
	b, err := marshalIndent(p) // json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Save writes the plan file (Marshal's bytes) atomically, mode 0644, with
// atomicfile.WriteFileParts: a temporary file in the same directory, fsync,
// rename over path, fsync of the directory. It refuses an
// empty path and a path that exists but is not a regular file (a directory,
// a device such as /dev/stdout or /dev/full, a FIFO), which the rename would
// otherwise replace; the error wraps ErrConfig inside an *Error naming path.
func (p *Plan) Save(path string) error {
	if err := checkSavePath(path); err != nil {
		return err
	}
	parts, err := fileParts(p)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFileParts(path, parts, 0o644); err != nil {
		return fmt.Errorf("saving plan %s: %w", path, err)
	}
	return nil
}

// fileParts returns the plan file's bytes (Marshal's) in pieces
// (marshalParts and the final newline).
func fileParts(p *Plan) ([][]byte, error) {
	parts, err := marshalParts(p)
	return append(parts, []byte{'\n'}), err
}

// NumSamples returns N, the total number of source rows: every sample id
// is below it.
func (p *Plan) NumSamples() uint64 { return p.Derived.Samples }

// EpochSamples returns the slots of epoch e's order before the remainder
// policy: N, T for a plan with a mixture, P_e (the epoch's packed rows)
// for a packed mixture (PLAN.md §12.1); 0 for an epoch out of range.
func (p *Plan) EpochSamples(e int) uint64 {
	switch {
	case e < 0 || e >= p.Config.Epochs:
		return 0
	case p.st.prows != nil:
		return p.st.prows[e]
	case p.Mixture != nil && p.Packing == nil:
		return p.Mixture.EpochSamples
	}
	return p.Derived.Samples
}

// CoversSource reports whether every epoch's order holds every sample id
// exactly once before the remainder policy (true for a plan without a
// mixture): then an epoch holds every id but the ones Dropped lists. A
// mixture draws some sources more than once and others partly; a packed
// mixture's samples are the packed rows of every epoch, and epoch e holds
// only its own (PLAN.md §12.1).
func (p *Plan) CoversSource() bool { return p.Mixture == nil }

// SourceOf returns the index in Mixture.Sources of the source holding
// sample id, or -1 for a plan without a mixture or an id out of range.
// O(log row groups). In a packed mixture (PLAN.md §12.1) the ids are
// packed rows: with scope per_source, the source of the row's documents;
// with scope across, -1 (a row may hold several sources' documents).
func (p *Plan) SourceOf(id uint64) int {
	if p.Packing != nil && id < p.NumSamples() {
		e := p.st.rowEpoch(id)
		return p.Packing.sourceOfRow(id, e, p.st.rowBase(e))
	}
	if p.st.mix == nil || id >= p.NumSamples() {
		return -1
	}
	return p.st.mix.sourceOf(id)
}

// BatchSize returns b = G / R, samples per rank batch.
func (p *Plan) BatchSize() int { return p.Derived.BatchSize }

// Steps returns S, the number of steps every rank takes in every epoch.
func (p *Plan) Steps() int { return p.Derived.StepsPerEpoch }

// Worker returns the worker (of a rank's W) that produces the rank batch at
// step: step mod W.
func (p *Plan) Worker(step int) int { return step % p.Config.Workers }

// WorkerSteps returns the steps of each rank's epoch that worker w
// produces, in consumption order: w, w+W, w+2W, ... below Steps. It returns
// nil for an out-of-range w.
func (p *Plan) WorkerSteps(worker int) []int {
	if worker < 0 || worker >= p.Config.Workers {
		return nil
	}
	var s []int
	for k := worker; k < p.Steps(); k += p.Config.Workers {
		s = append(s, k)
	}
	return s
}

// checkRange validates epoch, rank and step.
func (p *Plan) checkRange(epoch, rank, step int) error {
	switch {
	case epoch < 0 || epoch >= p.Config.Epochs:
		return rangeErrorf("epoch %d not in [0, %d)", epoch, p.Config.Epochs)
	case rank < 0 || rank >= p.Config.WorldSize:
		return rangeErrorf("rank %d not in [0, %d) (world size %d)", rank, p.Config.WorldSize, p.Config.WorldSize)
	case step < 0 || step >= p.Steps():
		return rangeErrorf("step %d not in [0, %d)", step, p.Steps())
	}
	return nil
}

// RankBatch returns the sample ids of rank r's batch at step k of epoch e,
// appended to dst[:0]. The last pads ids are pad samples (remainder pad):
// pad slots are always trailing. len(ids) may be < b (remainder partial,
// last step) or 0. Cost O(b) after a per-epoch setup (see PLAN.md §Memory).
// Errors wrap ErrRange.
func (p *Plan) RankBatch(epoch, rank, step int, dst []uint64) (ids []uint64, pads int, err error) {
	if err := p.checkRange(epoch, rank, step); err != nil {
		return dst[:0], 0, err
	}
	l, start := p.st.lane(epoch, rank, step)
	ids, pads = l.fill(start, uint64(p.BatchSize()), dst[:0])
	return ids, pads, nil
}

// Position says where a sample sits in an epoch.
type Position struct {
	Dropped bool `json:"dropped"` // left out of the epoch (remainder drop); other fields are 0
	Step    int  `json:"step"`
	Rank    int  `json:"rank"`
	Slot    int  `json:"slot"` // index within the rank batch
}

// Position returns where sample id sits in epoch e (its non-pad
// occurrence): the inverse of RankBatch. O(1) for none and global, O(log
// blocks) for blocks and partitioned. Errors wrap ErrRange.
func (p *Plan) Position(epoch int, id uint64) (Position, error) {
	if epoch < 0 || epoch >= p.Config.Epochs {
		return Position{}, rangeErrorf("epoch %d not in [0, %d)", epoch, p.Config.Epochs)
	}
	if id >= p.NumSamples() {
		return Position{}, rangeErrorf("sample id %d not in [0, %d)", id, p.NumSamples())
	}
	return p.st.position(epoch, id), nil
}

// Occurrences appends to dst[:0] every position of sample id in epoch e,
// in increasing step order: its non-pad position (Position), then each pad
// slot that repeats it (remainder pad: the pads at the end of a lane repeat
// its first samples, once or, in partitioned mode, where a rank's partition
// is shorter than its padded length, several times). A sample dropped from
// the epoch (remainder drop) has none. Together over all ids, the
// occurrences are exactly the slots RankBatch returns. Errors wrap
// ErrRange.
func (p *Plan) Occurrences(epoch int, id uint64, dst []Position) ([]Position, error) {
	if epoch < 0 || epoch >= p.Config.Epochs {
		return dst[:0], rangeErrorf("epoch %d not in [0, %d)", epoch, p.Config.Epochs)
	}
	if id >= p.NumSamples() {
		return dst[:0], rangeErrorf("sample id %d not in [0, %d)", id, p.NumSamples())
	}
	return p.st.occurrences(epoch, id, dst[:0]), nil
}

// Dropped returns the ids left out of epoch e (remainder drop), in the
// epoch's order; nil when none are. Errors wrap ErrRange.
func (p *Plan) Dropped(epoch int) ([]uint64, error) {
	if epoch < 0 || epoch >= p.Config.Epochs {
		return nil, rangeErrorf("epoch %d not in [0, %d)", epoch, p.Config.Epochs)
	}
	return p.st.dropped(epoch), nil
}

// Cursor is a resume point: the order fingerprint and the global step
// (epoch·Steps + step) of the next batch to consume. It is valid for every
// plan with the same order fingerprint, whatever its R (dividing G) or W.
type Cursor struct {
	Fingerprint string `json:"fingerprint"` // Plan.OrderFingerprint
	GlobalStep  uint64 `json:"global_step"`
}

// CursorAt returns the cursor for step k of epoch e (k may equal Steps,
// which is step 0 of the next epoch).
func (p *Plan) CursorAt(epoch, step int) Cursor {
	return Cursor{Fingerprint: p.OrderFingerprint, GlobalStep: uint64(epoch)*uint64(p.Steps()) + uint64(step)}
}

// Resume returns the (epoch, step) to continue from. done is true when c
// points at or past the end of the plan. Errors wrap ErrMismatch when c was
// made for another order.
func (p *Plan) Resume(c Cursor) (epoch, step int, done bool, err error) {
	if c.Fingerprint != p.OrderFingerprint {
		return 0, 0, false, fmt.Errorf("cursor fingerprint %s, plan order %s: %w", c.Fingerprint, p.OrderFingerprint, ErrMismatch)
	}
	s := uint64(p.Steps())
	if s == 0 || c.GlobalStep >= s*uint64(p.Config.Epochs) {
		return p.Config.Epochs, 0, true, nil
	}
	return int(c.GlobalStep / s), int(c.GlobalStep % s), false, nil
}

// mixtureText renders a mixture for comparison ("" for none).
func mixtureText(m *Mixture) string {
	if m == nil {
		return ""
	}
	b, _ := json.Marshal(m)
	return string(b)
}
