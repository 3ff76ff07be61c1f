package verify

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/source"
)

// SampleSource produces the bytes convert should have written for a batch,
// straight from the source Parquet and the feature spec. For a shard with
// jagged tensors it must also be a JaggedSource.
type SampleSource interface {
	// FillBlock writes into block (len >= Geometry.BlockSize, zeroed by the
	// caller) the expected block for the present samples ids (real and pad,
	// in slot order): tensor t's sample i at SlabOffset[t] + i*SampleBytes[t],
	// every byte outside present samples left zero. In a shard with jagged
	// tensors it writes the fixed-shape tensors only, leaving each jagged
	// tensor's offsets slab zero (verify lays out offsets and values from
	// JaggedSource.JaggedValues).
	FillBlock(ctx context.Context, ids []uint64, block []byte) error
	// Close releases open source files.
	Close() error
}

// Prefetcher is implemented by a SampleSource that reads many samples more
// cheaply at once. Before comparing, verify calls Prefetch with the ids of a
// window of upcoming batches (about PrefetchBytes of samples); FillBlock
// and JaggedValues must still work for ids not prefetched. With jagged
// tensors a batch's sample bytes are estimated from the shard: its block's
// values slabs plus 8 bytes of offset per sample and jagged tensor.
type Prefetcher interface {
	Prefetch(ctx context.Context, ids []uint64) error
}

// PrefetchBytes bounds the sample bytes verify asks a Prefetcher to hold.
const PrefetchBytes = 64 << 20

// MemoryLimiter is implemented by a SampleSource whose decoding memory can
// be bounded: verify calls SetMemoryLimit once, before the first
// Prefetch, FillBlock, JaggedValues or Hold, with the bytes the source may
// use to decode: half of the check's share of Options.MemoryLimit when
// comparing batch by batch; a quarter of the whole limit on the one
// source of a group of shards that holds the parts (PartSource, one
// decode at a time for the set), none on the group's other sources.
type MemoryLimiter interface {
	SetMemoryLimit(bytes int64)
}

// SourceOpener opens a SampleSource for one shard's geometry and tensors.
// Run calls it once per shard checked deeply, from that shard's goroutine;
// a PartSource's Hold may later run on another goroutine (one call at a
// time) and Held on several at once. sourceRoot is the directory the plan's relative source paths resolve to.
type SourceOpener func(p *plan.Plan, m *shardfmt.Manifest, sourceRoot string, g shardfmt.Geometry, tensors []shardfmt.TensorInfo) (SampleSource, error)

// sourceRoot returns where the plan's source files are read from.
func (c *checker) sourceRoot() string {
	if c.opts.SourceRoot != "" {
		return c.opts.SourceRoot
	}
	if c.plan != nil {
		return c.plan.Source.Root
	}
	return ""
}

// checkSourceFingerprints compares each source file's size and footer hash
// with the plan's record of it (plan.SourceFile): a file edited, replaced or
// removed since convert is reported before any value is compared.
func (c *checker) checkSourceFingerprints() {
	if c.plan == nil {
		c.add(Finding{Kind: KindSourceUnreadable, Message: "values not compared: no plan to locate the source"})
		return
	}
	if c.opts.Source == nil {
		c.add(Finding{Kind: KindSourceUnreadable, Message: "values not compared: this build has no source reader for --deep"})
	}
	var st source.Store
	var err error
	if c.opts.Store != nil {
		st, err = c.opts.Store(c.plan, c.sourceRoot())
	} else {
		st, err = source.NewLocal(c.sourceRoot())
	}
	if err != nil {
		c.add(Finding{Kind: KindSourceUnreadable, Message: err.Error()})
		return
	}
	for _, sf := range c.plan.Source.Files {
		name := strings.TrimSuffix(st.String(), "/") + "/" + sf.Path // an object's URL
		if l, ok := st.(*source.Local); ok {
			name = l.Path(sf.Path)
		}
		c.addSourceFinding(name, source.Check(context.Background(), st, sf))
	}
}

// addSourceFinding reports the result of checking one source file: a
// *source.ChangedError is a source_changed finding with what differs, any
// other error a source_unreadable finding giving the real cause.
func (c *checker) addSourceFinding(path string, err error) {
	if err == nil {
		return
	}
	var ce *source.ChangedError
	if !errors.As(err, &ce) {
		c.add(Finding{Kind: KindSourceUnreadable, Shard: path, Message: "source file unreadable: " + err.Error()})
		return
	}
	f := Finding{Kind: KindSourceChanged, Shard: path, What: ce.What, Expected: ce.Expected, Actual: ce.Actual,
		Message: "source file changed since the plan was made"}
	if ce.Missing() {
		f.What, f.Expected, f.Actual = "", "", ""
		f.Message = "source file is missing"
		if c.opts.SourceRoot == "" {
			f.Message += " (if the source moved, give its directory with --source-root)"
		}
	}
	c.add(f)
}

// deepFraction returns the fraction of batches compared.
func (c *checker) deepFraction() float64 {
	if f := c.opts.DeepFraction; f > 0 {
		return math.Min(f, 1)
	}
	var total int64
	for _, s := range c.man.Shards {
		total += s.Size
	}
	if total <= DeepAllBytes {
		return 1
	}
	return float64(DeepAllBytes) / float64(total)
}

// deepCheck compares sampled batches of one shard with the source.
type deepCheck struct {
	s        *shardCheck
	r        *shardfmt.Reader
	src      SampleSource
	g        shardfmt.Geometry
	tensors  []shardfmt.TensorInfo
	epoch    int
	rank     int
	seed     uint64
	fraction float64
	want     []byte

	per     uint64        // sample bytes of one sample (fixed-shape shards)
	jag     *jaggedCheck  // a shard with jagged tensors; nil otherwise
	derived *derivedCheck // the spec's derived tensors checked on their own (derived.go); nil: none
	part    *partCheck    // compare by parts (a PartSource, deeppart.go); nil: batch by batch
	// keepWant: want is kept between batches (all Jobs pairs of blocks
	// fit the blocks' share); otherwise it is nil outside compareAdmitted.
	keepWant bool

	fetchedTo int    // batches below this were prefetched (Prefetcher only)
	fetchErr  error  // the error of that prefetch, reported per batch
	fetchMax  uint64 // bytes one prefetch may hold: samples and their bookkeeping (prefetchIDBytes an id)
}

// prefetchIDBytes is the memory counted per sample id prefetched beside
// its sample bytes: the id lists and index of verify and of the source, and
// the decoder's runs of needed rows.
const prefetchIDBytes = 128

// prefetch hands a Prefetcher the ids of the selected batches from k on, up
// to PrefetchBytes of samples and fetchMax bytes of samples and
// bookkeeping (and at least one batch).
func (d *deepCheck) prefetch(ctx context.Context, k int) {
	pf, ok := d.src.(Prefetcher)
	if !ok || k < d.fetchedTo {
		return
	}
	var ids []uint64
	var held uint64 // sample bytes of ids
	j := k
	for n := d.r.NumBatches(); j < n && held < PrefetchBytes && held+uint64(len(ids))*prefetchIDBytes < d.fetchMax; j++ {
		if !d.selected(j) {
			continue
		}
		if b, err := d.r.SampleIDs(j); err == nil {
			ids = append(ids, b...)
			held += d.batchBytes(j, len(b))
		}
	}
	d.fetchedTo = j
	d.fetchErr = pf.Prefetch(ctx, ids)
}

// newDeepCheck opens the source for one shard, or reports why it cannot
// and returns nil.
func (c *checker) newDeepCheck(s *shardCheck, r *shardfmt.Reader, path string, idx, epoch, rank int) *deepCheck {
	g, ts := r.Geometry(), r.Tensors()
	if c.opts.Source == nil || c.plan == nil {
		return nil // reported once by checkSourceFingerprints
	}
	src, err := c.opts.Source(c.plan, c.man, c.sourceRoot(), g, ts)
	if err != nil {
		s.add(Finding{Kind: KindSourceUnreadable, Message: "opening source: " + err.Error()})
		return nil
	}
	var js JaggedSource
	if g.HasJagged() {
		var ok bool
		if js, ok = src.(JaggedSource); !ok {
			_ = src.Close()
			s.add(Finding{Kind: KindSourceUnreadable, Message: fmt.Sprintf("values not compared: tensor %q is jagged and the source reader does not materialize jagged tensors", firstJagged(ts))})
			return nil
		}
	}
	d := &deepCheck{s: s, r: r, src: src, g: g, tensors: ts, epoch: epoch, rank: rank,
		seed: c.opts.Seed, fraction: c.deepFraction()}
	if c.man != nil && c.man.Spec != nil {
		rules, err := derivedRules(c.man.Spec, ts)
		if err != nil {
			s.add(Finding{Kind: KindSourceUnreadable, Message: "derived tensors not checked: reading the manifest's spec: " + err.Error()})
		}
		for _, f := range declFindings(rules, ts) {
			s.add(f)
		}
		if len(rules) > 0 {
			d.derived = &derivedCheck{g: g, r: r, ts: ts, rules: rules}
		}
	}
	for _, n := range g.SampleBytes {
		d.per += n
	}
	if js != nil {
		d.initJagged(js)
	}
	d.initParts(c.rowGroups, c.opts.MaxPerShard, idx)
	if d.part != nil {
		return d // the limits of the set's deep check by parts (deepset.go)
	}
	// Each of the Jobs checks that may run at once gets an equal share of
	// the limit: a quarter for the samples prefetched, half for decoding.
	decode, prefetch := feature.NewBudget(c.opts.MemoryLimit).VerifyCheck(c.opts.Jobs)
	if ml, ok := src.(MemoryLimiter); ok {
		ml.SetMemoryLimit(decode)
	}
	d.fetchMax = uint64(prefetch)
	// The expected block is kept between batches only when every Jobs
	// check's pair of blocks fits the blocks' quarter of the limit at
	// once; otherwise it is allocated per admitted batch (compareAdmitted).
	d.keepWant = 2*int64(g.BlockSize)*int64(max(1, c.opts.Jobs)) <= c.blocks.limit
	return d
}

// compareAdmitted compares batch k (deepCheck.compare) once its shard
// block and expected block (2 × BlockSize bytes, or twice the expected
// block kept from an earlier jagged batch whose layout grew it) are
// admitted against
// the blocks' share of the memory limit, and drops the expected block
// after unless all Jobs pairs fit the share at once.
func (c *checker) compareAdmitted(ctx context.Context, d *deepCheck, k int, bi shardfmt.BatchInfo, ids []uint64) {
	cost := 2 * int64(max(d.g.BlockSize, uint64(cap(d.want))))
	if !c.blocks.admit(ctx, cost) {
		return
	}
	defer c.blocks.release(cost)
	if d.want == nil {
		d.want = make([]byte, d.g.BlockSize)
		if d.jag != nil {
			d.jag.dirty = 0
		}
	}
	d.compare(ctx, k, bi, ids)
	if !d.keepWant {
		d.want = nil
	}
}

func (d *deepCheck) close() { _ = d.src.Close() }

// selected reports whether batch k is in the seeded deep sample:
// splitmix64 over (seed, epoch, rank, batch) below fraction * 2^64.
func (d *deepCheck) selected(k int) bool {
	if d.fraction >= 1 {
		return true
	}
	h := splitmix64(d.seed)
	h = splitmix64(h ^ uint64(d.epoch))
	h = splitmix64(h ^ uint64(d.rank))
	h = splitmix64(h ^ uint64(k))
	return float64(h>>11)/float64(1<<53) < d.fraction
}

// splitmix64 is the SplitMix64 finalizer (Steele, Lea, Flood 2014).
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// compare materializes batch k from the source and reports, per tensor and
// sample, the first element that differs bit for bit.
func (d *deepCheck) compare(ctx context.Context, k int, bi shardfmt.BatchInfo, ids []uint64) {
	got, err := d.r.Block(k)
	if err != nil {
		d.s.add(Finding{Kind: KindHeaderInvalid, Batch: intp(k), Message: "reading block: " + err.Error()})
		return
	}
	d.prefetch(ctx, k)
	if d.fetchErr != nil {
		d.s.add(Finding{Kind: KindSourceUnreadable, Batch: intp(k), Message: d.fetchErr.Error()})
		return
	}
	if d.derived != nil {
		d.derived.check(k, got, ids, func(_, _ int, f Finding) { d.s.add(f) })
	}
	if d.jag != nil {
		d.compareJagged(ctx, k, got, ids)
		return
	}
	clear(d.want)
	if err := d.src.FillBlock(ctx, ids, d.want); err != nil {
		d.s.add(Finding{Kind: KindSourceUnreadable, Batch: intp(k), Message: err.Error()})
		return
	}
	d.s.res.deep++
	if bytes.Equal(got, d.want) {
		return
	}
	if !d.diffFixed(k, got, d.want, ids) {
		d.s.add(Finding{Kind: KindValueMismatch, Batch: intp(k), Message: "bytes outside the present samples are not zero"})
	}
}

// diffFixed reports, per fixed-shape tensor and sample of ids, the first
// element of got that differs from want, and whether any differs.
func (d *deepCheck) diffFixed(k int, got, want []byte, ids []uint64) bool {
	found := false
	for t, ti := range d.tensors {
		if d.g.IsJagged(t) {
			continue
		}
		sb := int(d.g.SampleBytes[t])
		off := int(d.g.SlabOffset[t])
		for i := 0; i < len(ids); i++ {
			a := got[off+i*sb : off+(i+1)*sb]
			w := want[off+i*sb : off+(i+1)*sb]
			if f := valueDiff(k, ti, i, ids[i], a, w); f != nil {
				found = true
				d.s.add(*f)
			}
		}
	}
	return found
}

// valueDiff returns the value_mismatch finding for slot i (sample id) of
// tensor ti in batch k when its bytes a differ from the source's w (of
// a's length): the first element that differs, both values formatted.
// It returns nil when a and w are equal.
func valueDiff(k int, ti shardfmt.TensorInfo, i int, id uint64, a, w []byte) *Finding {
	if bytes.Equal(a, w) {
		return nil
	}
	b := 0
	for a[b] == w[b] {
		b++
	}
	es := ti.DType.Size()
	el := b / es
	return &Finding{Kind: KindValueMismatch, Batch: intp(k), Tensor: ti.Name, SampleID: u64p(id), Element: intp(el),
		What: "value", Expected: FormatValue(ti.DType, w[el*es:(el+1)*es]), Actual: FormatValue(ti.DType, a[el*es:(el+1)*es]),
		Message: fmt.Sprintf("slot %d differs from the source", i)}
}

// FormatValue renders one little-endian element of dtype d as text, exact:
// integers in decimal, floats in Go's shortest round-trip form followed by
// their bits in hex ("1.5 (0x3fc00000)"), BF16 and F8 as hex bits only.
func FormatValue(d shardfmt.DType, b []byte) string {
	if len(b) != d.Size() {
		return fmt.Sprintf("% x", b)
	}
	le := binary.LittleEndian
	switch d {
	case shardfmt.BOOL, shardfmt.U8:
		return fmt.Sprint(b[0])
	case shardfmt.I8:
		return fmt.Sprint(int8(b[0]))
	case shardfmt.U16:
		return fmt.Sprint(le.Uint16(b))
	case shardfmt.I16:
		return fmt.Sprint(int16(le.Uint16(b)))
	case shardfmt.U32:
		return fmt.Sprint(le.Uint32(b))
	case shardfmt.I32:
		return fmt.Sprint(int32(le.Uint32(b)))
	case shardfmt.U64:
		return fmt.Sprint(le.Uint64(b))
	case shardfmt.I64:
		return fmt.Sprint(int64(le.Uint64(b)))
	case shardfmt.F32:
		u := le.Uint32(b)
		return fmt.Sprintf("%v (0x%08x)", math.Float32frombits(u), u)
	case shardfmt.F64:
		u := le.Uint64(b)
		return fmt.Sprintf("%v (0x%016x)", math.Float64frombits(u), u)
	case shardfmt.F16, shardfmt.BF16:
		return fmt.Sprintf("0x%04x", le.Uint16(b))
	}
	return fmt.Sprintf("0x%02x", b[0])
}
