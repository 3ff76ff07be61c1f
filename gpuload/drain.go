package gpuload

import (
	"errors"
	"io"
	"time"
)

// DrainStats is what Drain delivered from one Loader, and how long it took.
type DrainStats struct {
	Batches    int   // batches taken with Next
	Samples    int64 // samples in them, real and pad
	PadSamples int64 // pad samples among Samples
	// Bytes is the batch block bytes read: the sum of each delivered
	// step's Batch.BlockBytes (Batches x Geometry.BlockSize in a shard
	// without jagged tensors; each step's own block size from the batch
	// table in one with them).
	Bytes int64
	// Seconds and CPUSeconds are the wall time of the delivery loop and
	// the process's user+system CPU time during it (0 where the platform
	// does not report it).
	Seconds    float64
	CPUSeconds float64
}

// GBPerSecond is Bytes over Seconds in units of 10^9 bytes, or 0 when no
// time was measured.
func (s DrainStats) GBPerSecond() float64 {
	if s.Seconds <= 0 {
		return 0
	}
	return float64(s.Bytes) / s.Seconds / 1e9
}

// Drain is the delivery loop of one pass over a shard: it takes every
// batch from l with Next, from its current step until io.EOF, calls
// onBatch (if not nil) with each batch while it is held, and releases it.
// It returns the stats of the batches delivered, and on failure those
// delivered before it with Next's error. l stays open; the caller closes
// it.
func Drain(l *Loader, onBatch func(*Batch)) (s DrainStats, err error) {
	cpu0 := cpuSeconds()
	start := time.Now()
	defer func() {
		s.Seconds = time.Since(start).Seconds()
		s.CPUSeconds = max(0, cpuSeconds()-cpu0)
	}()
	for {
		var b *Batch
		b, err = l.Next()
		if errors.Is(err, io.EOF) {
			return s, nil
		}
		if err != nil {
			return s, err
		}
		s.Batches++
		s.Samples += int64(b.Count)
		s.PadSamples += int64(b.Pads)
		s.Bytes += b.BlockBytes()
		if onBatch != nil {
			onBatch(b)
		}
		b.Release()
	}
}
