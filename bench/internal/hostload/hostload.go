// Package hostload is the consumer loop shared by the host-delivery
// benchmark and its profile: every batch of every shard of a shard set,
// through the gpuload host backend.
package hostload

import (
	"encoding/binary"
	"fmt"

	"github.com/prepml/prep/gpuload"
	"github.com/prepml/prep/shardset"
)

// Totals is what Deliver consumed.
type Totals struct {
	Shards int
	Bytes  int64  // sum of shard file sizes from the manifest
	Rows   int64  // samples delivered (real and pad)
	Sum    uint64 // sum of the words read, so the reads cannot be elided
}

// Deliver opens each (epoch, rank) shard listed in dir's manifest, in order,
// takes every batch with gpuload.Drain (the delivery loop of prep load). For
// each tensor of a batch it reads one little-endian uint64 per 4 KiB: the
// least a trainer does with the data, enough to fault in pages handed out
// as views of the map.
func Deliver(dir string, opts gpuload.Options) (Totals, error) {
	var t Totals
	set, err := shardset.Open(dir)
	if err != nil {
		return t, err
	}
	m := set.Manifest()
	set.Close()
	for _, s := range m.Shards {
		l, err := gpuload.Open(dir, s.Epoch, s.Rank, opts)
		if err != nil {
			return t, err
		}
		d, err := gpuload.Drain(l, func(b *gpuload.Batch) {
			for _, x := range b.Tensors {
				for off := 0; off+8 <= len(x.Bytes); off += 4096 {
					t.Sum += binary.LittleEndian.Uint64(x.Bytes[off:])
				}
			}
		})
		t.Rows += d.Samples
		if err != nil {
			l.Close()
			return t, fmt.Errorf("epoch %d, rank %d: %w", s.Epoch, s.Rank, err)
		}
		if err := l.Close(); err != nil {
			return t, err
		}
		t.Shards++
		t.Bytes += s.Size
	}
	return t, nil
}
