package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/prepml/prep/convert"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/source"
	"github.com/prepml/prep/verify"
)

// packedDeepSource is the verify --deep source of a packed plan's shards
// (PLAN.md §12, SPEC.md §2.9): every document of the plan is decoded once
// (convert.MaterializePacked, which first recomputes the packing from the
// token lengths and checks the plan's digests) and shared by the shards
// checked in this process; each packed row's expected tokens, segment
// ids, positions, cu_seqlens and per-document columns are built from
// them. Memory: the tokens of every document (the dtype's size each)
// while any shard is checked.
type packedDeepSource struct {
	g       shardfmt.Geometry
	tensors []shardfmt.TensorInfo
	shared  *packedDocs
}

// packedDocs is the documents of one plan, decoded once for all shards.
type packedDocs struct {
	once sync.Once
	docs *convert.PackedDocuments
	err  error
	refs int
}

var (
	packedMu    sync.Mutex
	packedCache = map[string]*packedDocs{} // by plan fingerprint and source root
)

func newPackedDeepSource(p *plan.Plan, spec *convert.Spec, st source.Store, g shardfmt.Geometry, tensors []shardfmt.TensorInfo) (verify.SampleSource, error) {
	want, err := convert.PackedTensors(spec, p.Packing)
	if err != nil {
		return nil, err
	}
	if !shardfmt.SameTensors(want, tensors) {
		return nil, fmt.Errorf("spec yields tensors %s, shard has %s", shardfmt.TensorList(want), shardfmt.TensorList(tensors))
	}
	key := p.Fingerprint + "\x00" + p.Source.Root
	packedMu.Lock()
	d := packedCache[key]
	if d == nil {
		d = &packedDocs{}
		packedCache[key] = d
	}
	d.refs++
	packedMu.Unlock()
	d.once.Do(func() {
		d.docs, d.err = convert.MaterializePacked(context.Background(), convert.Options{Source: st, MemoryLimit: deepRunLimit}, p, spec, nil)
	})
	s := &packedDeepSource{g: g, tensors: tensors, shared: d}
	if d.err != nil {
		s.Close()
		return nil, d.err
	}
	return s, nil
}

// FillBlock writes the expected fixed-shape tensors of the packed rows ids
// (tokens, segment ids, positions, per-token columns; verify.SampleSource).
func (s *packedDeepSource) FillBlock(ctx context.Context, ids []uint64, block []byte) error {
	g := s.g
	for i, id := range ids {
		if id >= s.shared.docs.Layout.Rows() {
			return fmt.Errorf("packed row %d not in [0, %d)", id, s.shared.docs.Layout.Rows())
		}
		slot := func(t int) []byte { return block[g.SlabOffset[t]+uint64(i)*g.SampleBytes[t]:][:g.SampleBytes[t]] }
		if err := s.shared.docs.FillFixed(id, slot); err != nil {
			return err
		}
	}
	return nil
}

// JaggedValues returns each packed row's values of jagged tensor t: its
// cu_seqlens, or a per-document column's values (verify.JaggedSource).
func (s *packedDeepSource) JaggedValues(ctx context.Context, t int, ids []uint64) ([][]byte, error) {
	out := make([][]byte, len(ids))
	for i, id := range ids {
		if id >= s.shared.docs.Layout.Rows() {
			return nil, fmt.Errorf("packed row %d not in [0, %d)", id, s.shared.docs.Layout.Rows())
		}
		var err error
		if out[i], err = s.shared.docs.AppendJagged(t, id, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Close releases the documents when no other shard's source holds them.
func (s *packedDeepSource) Close() error {
	if s.shared == nil {
		return nil
	}
	packedMu.Lock()
	defer packedMu.Unlock()
	s.shared.refs--
	if s.shared.refs == 0 {
		for k, d := range packedCache {
			if d == s.shared {
				delete(packedCache, k)
			}
		}
		if s.shared.docs != nil {
			s.shared.docs.Close()
		}
	}
	s.shared = nil
	return nil
}

var _ verify.JaggedSource = (*packedDeepSource)(nil)
