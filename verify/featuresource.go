package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/source"
)

// FeatureSource returns the SourceOpener of `prep verify --deep`: each
// shard's source rebuilds the feature spec recorded in the manifest
// (checking it against the manifest's spec hash) and decodes expected
// samples with package feature, the same decode and transform code convert
// writes shards with, reading only the row groups that hold the requested
// samples. Source files are resolved under the source root, read from
// store(p, root) (nil store, or a nil Store returned: the local directory).
// memoryLimit is the --memory-limit whose row bounds apply
// (feature.Bounds.Run): verify --deep accepts every row convert accepts
// under the same limit, though it decodes within a share of it; <= 0: the
// share it decodes in. A packed plan's packing is read once for all the
// shards opened through one FeatureSource.
func FeatureSource(store func(p *plan.Plan, root string) (source.Store, error), memoryLimit int64) SourceOpener {
	fs := &featureSources{store: store, runLimit: memoryLimit, packed: map[string]*packedPlan{}}
	return fs.open
}

// featureSources is the state one FeatureSource shares among the shards
// it opens sources for.
type featureSources struct {
	store    func(p *plan.Plan, root string) (source.Store, error)
	runLimit int64 // the row bounds' memory limit (feature.Bounds.Run); 0: the decoding share

	mu     sync.Mutex
	packed map[string]*packedPlan // by plan fingerprint and source root
}

// open is the SourceOpener of FeatureSource.
func (fs *featureSources) open(p *plan.Plan, m *shardfmt.Manifest, sourceRoot string, g shardfmt.Geometry, tensors []shardfmt.TensorInfo) (SampleSource, error) {
	spec, err := specFromManifest(m)
	if err != nil {
		return nil, err
	}
	var st source.Store // nil: the local directory p.Source.Root
	if fs.store != nil {
		if st, err = fs.store(p, sourceRoot); err != nil {
			return nil, err
		}
	}
	if sourceRoot != "" && sourceRoot != p.Source.Root {
		q := *p
		q.Source.Root = sourceRoot
		p = &q
	}
	if p.Packing != nil {
		return fs.newPackedDeepSource(p, spec, st, g, tensors)
	}
	return &deepSource{p: p, spec: spec, g: g, tensors: tensors, st: st, run: fs.runLimit}, nil
}

// specFromManifest decodes the manifest's spec and checks its hash.
func specFromManifest(m *shardfmt.Manifest) (*feature.Spec, error) {
	if m.Spec == nil {
		return nil, fmt.Errorf("manifest records no feature spec")
	}
	b, err := json.Marshal(m.Spec)
	if err != nil {
		return nil, fmt.Errorf("re-encoding manifest spec: %w", err)
	}
	var spec feature.Spec
	if err := json.Unmarshal(b, &spec); err != nil {
		return nil, fmt.Errorf("decoding manifest spec: %w", err)
	}
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("manifest spec: %w", err)
	}
	if !spec.MatchesHash(m.SpecHash) {
		return nil, fmt.Errorf("manifest spec hashes to %s, manifest says %s", spec.Hash(), m.SpecHash)
	}
	return &spec, nil
}

// deepSource materializes expected samples: by parts of row groups with
// feature.Hold (Hold, Held), or by windows of batches with
// feature.Materialize (Prefetch, FillBlock, JaggedValues).
type deepSource struct {
	st      source.Store
	p       *plan.Plan
	spec    *feature.Spec
	g       shardfmt.Geometry
	tensors []shardfmt.TensorInfo

	samples *feature.Samples
	index   map[uint64]int       // id -> position in samples
	held    *feature.HeldSamples // the ids of the last Hold
	limit   int64                // decoding memory (SetMemoryLimit); 0: Materialize's default
	run     int64                // the row bound's memory limit (feature.Bounds.Run); 0: limit
}

// SetMemoryLimit bounds the decoding of each Prefetch (MemoryLimiter).
func (s *deepSource) SetMemoryLimit(bytes int64) { s.limit = bytes }

// Prefetch materializes ids (duplicates allowed) and keeps them, replacing
// the previous window.
func (s *deepSource) Prefetch(ctx context.Context, ids []uint64) error {
	uniq := make([]uint64, 0, len(ids))
	index := make(map[uint64]int, len(ids))
	for _, id := range ids {
		if _, ok := index[id]; !ok {
			index[id] = len(uniq)
			uniq = append(uniq, id)
		}
	}
	got, err := feature.Materialize(ctx, s.st, s.p, s.spec, uniq, feature.Bounds{Memory: s.limit, Run: s.run})
	if err != nil {
		return err
	}
	if !shardfmt.SameTensors(got.Tensors, s.tensors) {
		return fmt.Errorf("spec yields tensors %s, shard has %s", shardfmt.TensorList(got.Tensors), shardfmt.TensorList(s.tensors))
	}
	s.samples, s.index = got, index
	return nil
}

// have materializes ids unless every one of them is held already.
func (s *deepSource) have(ctx context.Context, ids []uint64) error {
	for _, id := range ids {
		if _, ok := s.index[id]; !ok {
			return s.Prefetch(ctx, ids)
		}
	}
	return nil
}

// FillBlock lays out the samples of ids' fixed-shape tensors as a shard
// block; a jagged tensor's offsets slab is left zero (JaggedValues).
func (s *deepSource) FillBlock(ctx context.Context, ids []uint64, block []byte) error {
	if err := s.have(ctx, ids); err != nil {
		return err
	}
	for t := range s.tensors {
		if s.g.IsJagged(t) {
			continue
		}
		n := s.g.SampleBytes[t]
		for i, id := range ids {
			off := s.g.SlabOffset[t] + uint64(i)*n
			copy(block[off:off+n], s.samples.Sample(t, s.index[id]))
		}
	}
	return nil
}

// JaggedValues returns each of ids' values of jagged tensor t, as
// feature.Samples.Sample gives them (JaggedSource): a sample's
// values bytes, little-endian, a whole number of values. The slices alias
// the materialized samples, valid until the next Prefetch.
func (s *deepSource) JaggedValues(ctx context.Context, t int, ids []uint64) ([][]byte, error) {
	if err := s.have(ctx, ids); err != nil {
		return nil, err
	}
	out := make([][]byte, len(ids))
	for i, id := range ids {
		out[i] = s.samples.Sample(t, s.index[id])
	}
	return out, nil
}

// Hold materializes ids (sorted, unique) with one
// feature.Hold, which decodes each row group holding one of
// them once and keeps the samples where it staged them, and releases
// what was held before first (PartSource).
func (s *deepSource) Hold(ctx context.Context, ids []uint64) error {
	s.held.Close()
	s.held = nil
	got, err := feature.Hold(ctx, s.st, s.p, s.spec, ids, feature.Bounds{Memory: s.limit, Run: s.run})
	if err != nil {
		return err
	}
	if !shardfmt.SameTensors(got.Tensors(), s.tensors) {
		got.Close()
		return fmt.Errorf("spec yields tensors %s, shard has %s", shardfmt.TensorList(got.Tensors()), shardfmt.TensorList(s.tensors))
	}
	s.held = got
	return nil
}

// Held returns tensor t's bytes of the i-th id of the last Hold, as
// feature.HeldSamples.Sample gives them (PartSource). They depend
// on the tensors only, not on the shard's geometry: verify may hold the
// ids of several shards with the same tensors through one source.
func (s *deepSource) Held(t, i int) []byte { return s.held.Sample(t, i) }

// Close releases the samples held.
func (s *deepSource) Close() error {
	s.held.Close()
	s.held = nil
	return nil
}

var (
	_ JaggedSource = (*deepSource)(nil)
	_ PartSource   = (*deepSource)(nil)
)
