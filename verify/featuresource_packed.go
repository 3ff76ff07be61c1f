package verify

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/source"
)

// packedDeepSource is the verify --deep source of a packed plan's shards
// (PLAN.md §12, SPEC.md §2.9). The packing is read again once for the
// shards checked in this process (feature.OpenPackedGroups, which
// recomputes it from the token lengths and checks the plan's digests);
// each shard's source then decodes the documents of its batches a group
// of consecutive batches at a time, grouped as a packed convert groups
// its steps (feature.PackedGroups.Decode): the batch compared, then the
// packed rows of the batches verify prefetches after it, while their
// documents fit the source's memory limit (MemoryLimiter: half of
// the check's share of --memory-limit, with one job the half a packed
// convert holds its documents within). A batch whose documents alone
// exceed it is refused, naming the bytes they take. Each packed row's
// expected tokens, segment ids, positions, cu_seqlens and per-document
// columns are built from the group's documents. Memory: the documents
// held (at most the limit), the decoded column chunks in flight (at most
// half the limit: the quarter of the share verify leaves for prefetched
// samples, of which this source holds only the ids), and the lengths
// (4 bytes a source row, shared).
type packedDeepSource struct {
	g      shardfmt.Geometry
	shared *packedPlan
	fs     *featureSources
	limit  int64 // bytes of documents held at once (SetMemoryLimit); 0: not set

	docs    *feature.PackedDocuments // the current group's documents; nil: none
	rows    map[uint64]bool          // the packed rows they build
	ahead   []uint64                 // the ids of the batches of the last Prefetch, in order
	next    int                      // ahead[next:] are the batches after the last FillBlock's
	peak    int64                    // the most bytes of documents held at once (HeldBytes)
	decodes int                      // the groups decoded
}

// packedPlan is the packing of one plan, read once for all shards.
type packedPlan struct {
	once   sync.Once
	groups *feature.PackedGroups
	err    error
	refs   int
}

func (fs *featureSources) newPackedDeepSource(p *plan.Plan, spec *feature.Spec, st source.Store, g shardfmt.Geometry, tensors []shardfmt.TensorInfo) (SampleSource, error) {
	want, err := feature.PackedTensors(spec, p.Packing)
	if err != nil {
		return nil, err
	}
	if !shardfmt.SameTensors(want, tensors) {
		return nil, fmt.Errorf("spec yields tensors %s, shard has %s", shardfmt.TensorList(want), shardfmt.TensorList(tensors))
	}
	key := p.Fingerprint + "\x00" + p.Source.Root
	fs.mu.Lock()
	d := fs.packed[key]
	if d == nil {
		d = &packedPlan{}
		fs.packed[key] = d
	}
	d.refs++
	fs.mu.Unlock()
	d.once.Do(func() {
		d.groups, d.err = feature.OpenPackedGroups(context.Background(), st, 0, p, spec)
	})
	s := &packedDeepSource{g: g, shared: d, fs: fs}
	if d.err != nil {
		s.Close()
		return nil, d.err
	}
	return s, nil
}

// SetMemoryLimit bounds the bytes of documents held at once
// (MemoryLimiter).
func (s *packedDeepSource) SetMemoryLimit(bytes int64) { s.limit = bytes }

// Prefetch keeps the ids of the upcoming batches, in order (the packed
// rows a group may add after the batch compared; Prefetcher).
func (s *packedDeepSource) Prefetch(ctx context.Context, ids []uint64) error {
	s.ahead, s.next = append(s.ahead[:0], ids...), 0
	return nil
}

// budget returns the bytes of documents a group may hold: the memory
// limit set, else half of prep verify's --memory-limit, else no bound.
func (s *packedDeepSource) budget() int64 {
	switch {
	case s.limit > 0:
		return s.limit
	case s.fs.runLimit > 0:
		return feature.NewBudget(s.fs.runLimit).PackedDocuments()
	}
	return math.MaxInt64
}

// hold makes the current group hold the documents of the packed rows ids
// (one batch), decoding a new group from that batch on when it does not.
func (s *packedDeepSource) hold(ctx context.Context, ids []uint64) error {
	var after []uint64 // the prefetched rows after this batch
	if rest := s.ahead[s.next:]; len(rest) >= len(ids) && slices.Equal(rest[:len(ids)], ids) {
		s.next += len(ids)
		after = s.ahead[s.next:]
	}
	if s.docs != nil && !slices.ContainsFunc(ids, func(id uint64) bool { return !s.rows[id] }) {
		return nil
	}
	s.release()
	budget := s.budget()
	// The batch is the first step, then each prefetched row one step.
	docs, n, err := s.shared.groups.Decode(ctx, func(i int) ([]uint64, bool, error) {
		if i == 0 {
			return ids, true, nil
		}
		if i > len(after) {
			return nil, false, nil
		}
		return after[i-1 : i], true, nil
	}, budget, feature.Bounds{Memory: max(1, budget/2), Run: s.fs.runLimit})
	var be *feature.PackedBudgetError
	if errors.As(err, &be) {
		return fmt.Errorf("the documents of the batch's packed rows take %d bytes decoded, more than the %d bytes this check may hold (half of --memory-limit, shared among --jobs checks): raise --memory-limit to at least %d (with --jobs 1)", be.Need, be.Budget, 2*be.Need)
	}
	if err != nil {
		return err
	}
	s.docs, s.rows = docs, make(map[uint64]bool, len(ids)+n-1)
	for _, id := range ids {
		s.rows[id] = true
	}
	for _, id := range after[:n-1] {
		s.rows[id] = true
	}
	s.peak = max(s.peak, docs.HeldBytes())
	s.decodes++
	return nil
}

// release closes the current group's documents.
func (s *packedDeepSource) release() {
	if s.docs != nil {
		s.docs.Close()
	}
	s.docs, s.rows = nil, nil
}

// FillBlock writes the expected fixed-shape tensors of the packed rows ids
// (tokens, segment ids, positions, per-token columns; SampleSource).
func (s *packedDeepSource) FillBlock(ctx context.Context, ids []uint64, block []byte) error {
	if err := s.hold(ctx, ids); err != nil {
		return err
	}
	g := s.g
	for i, id := range ids {
		slot := func(t int) []byte { return block[g.SlabOffset[t]+uint64(i)*g.SampleBytes[t]:][:g.SampleBytes[t]] }
		if err := s.docs.FillFixed(id, slot); err != nil {
			return err
		}
	}
	return nil
}

// JaggedValues returns each packed row's values of jagged tensor t: its
// cu_seqlens, or a per-document column's values (JaggedSource).
func (s *packedDeepSource) JaggedValues(ctx context.Context, t int, ids []uint64) ([][]byte, error) {
	if s.docs == nil || slices.ContainsFunc(ids, func(id uint64) bool { return !s.rows[id] }) {
		if err := s.hold(ctx, ids); err != nil {
			return nil, err
		}
	}
	out := make([][]byte, len(ids))
	for i, id := range ids {
		var err error
		if out[i], err = s.docs.AppendJagged(t, id, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Close releases the documents held, and the packing when no other
// shard's source holds it.
func (s *packedDeepSource) Close() error {
	s.release()
	if s.shared == nil {
		return nil
	}
	s.fs.mu.Lock()
	defer s.fs.mu.Unlock()
	s.shared.refs--
	if s.shared.refs == 0 {
		for k, d := range s.fs.packed {
			if d == s.shared {
				delete(s.fs.packed, k)
			}
		}
	}
	s.shared = nil
	return nil
}

var (
	_ JaggedSource  = (*packedDeepSource)(nil)
	_ Prefetcher    = (*packedDeepSource)(nil)
	_ MemoryLimiter = (*packedDeepSource)(nil)
)
