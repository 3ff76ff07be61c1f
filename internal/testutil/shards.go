package testutil

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/prepml/prep/shardfmt"
)

// ShardSet describes a shard set for WriteShardSet: one shard per (epoch,
// rank) of Steps batches of BatchSize slots holding Tensors.
type ShardSet struct {
	Epochs, Ranks   int
	Steps           int
	BatchSize       int
	Tensors         []shardfmt.TensorInfo
	Provenance      shardfmt.Provenance // of every shard; Epoch and Rank are set per shard
	Manifest        shardfmt.Manifest   // the manifest's fields but Tensors, BatchSize and Shards
	RecordBatchSize bool                // set Manifest.BatchSize to BatchSize
	// Batch returns the sample ids of batch k of shard (epoch, rank), the
	// last pads of them pad samples.
	Batch func(epoch, rank, k int) (ids []uint64, pads int, err error)
	// Values returns, for a shard with jagged tensors, the values count of
	// each jagged tensor (table order) in batch k of shard (epoch, rank)
	// holding ids; the block is sized by g.BatchLayout of them. Nil: every
	// jagged tensor's rows are empty.
	Values func(epoch, rank, k int, ids []uint64) []uint64
	// Fill lays out the samples of ids in a zeroed batch block of g (of the
	// size Values gives, for a shard with jagged tensors).
	Fill func(g shardfmt.Geometry, ids []uint64, block []byte)
}

// WriteShardSet writes s into dir with the real shardfmt writer: every
// shard at shardfmt.ShardFileName, committed, then the manifest listing
// them in (epoch, rank) order with their sizes and digests. It is the one
// shard-set builder of the tests (verify/verifytest and
// gpuload/internal/testshards describe their sets through it).
func WriteShardSet(dir string, s ShardSet) (*shardfmt.Manifest, error) {
	m := s.Manifest
	m.Tensors = s.Tensors
	if s.RecordBatchSize {
		m.BatchSize = s.BatchSize
	}
	for e := range s.Epochs {
		for r := range s.Ranks {
			rel := shardfmt.ShardFileName(e, r)
			path := filepath.Join(dir, filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return nil, err
			}
			prov := s.Provenance
			prov.Epoch, prov.Rank = uint32(e), uint32(r)
			w, err := shardfmt.Create(path, shardfmt.WriterOptions{BatchSize: s.BatchSize, NumBatches: s.Steps, Tensors: s.Tensors, Provenance: prov})
			if err != nil {
				return nil, err
			}
			g := w.Geometry()
			for k := range s.Steps {
				ids, pads, err := s.Batch(e, r, k)
				if err != nil {
					w.Abort()
					return nil, err
				}
				size := g.BlockSize
				if g.HasJagged() {
					// Without Values every jagged tensor's rows are empty:
					// zeroed offsets.
					var jagged int
					for _, t := range s.Tensors {
						if t.Jagged {
							jagged++
						}
					}
					values := make([]uint64, jagged)
					if s.Values != nil {
						values = s.Values(e, r, k, ids)
					}
					lay, err := g.BatchLayout(values)
					if err != nil {
						w.Abort()
						return nil, err
					}
					size = lay.Size
				}
				block := make([]byte, size)
				s.Fill(g, ids, block)
				if err := w.WriteBatch(block, ids, pads); err != nil {
					w.Abort()
					return nil, err
				}
			}
			if err := w.Commit(); err != nil {
				return nil, err
			}
			st, err := os.Stat(path)
			if err != nil {
				return nil, err
			}
			digest, err := shardfmt.FileDigest(path)
			if err != nil {
				return nil, err
			}
			m.Shards = append(m.Shards, shardfmt.ShardEntry{Path: rel, Epoch: e, Rank: r, Batches: s.Steps, Size: st.Size(), Digest: digest})
		}
	}
	if err := shardfmt.WriteManifest(dir, &m); err != nil {
		return nil, fmt.Errorf("writing manifest: %w", err)
	}
	return &m, nil
}
