package gpuload

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/prepml/prep/shardfmt"
)

func TestDrainCountsEveryBatchFromTheCurrentStep(t *testing.T) {
	dir := writeSet(t, small)
	for _, start := range []int{0, 2} {
		l := openLoader(t, dir, 1, 0, Options{StartStep: start})
		var steps []int
		s, err := Drain(l, func(b *Batch) {
			checkBatch(t, l, small, 1, 0, b.Step, b)
			steps = append(steps, b.Step)
		})
		if err != nil {
			t.Fatal(err)
		}
		batches := small.Steps - start
		samples := int64((batches-1)*small.BatchSize + small.LastCount)
		block := int64(l.Geometry().BlockSize)
		if s.Batches != batches || s.Samples != samples || s.PadSamples != int64(small.Pads) || s.Bytes != int64(batches)*block {
			t.Fatalf("from step %d: %+v, want %d batches, %d samples, %d pad, %d bytes", start, s, batches, samples, small.Pads, int64(batches)*block)
		}
		if len(steps) != batches || steps[0] != start || s.Seconds <= 0 || s.GBPerSecond() <= 0 {
			t.Fatalf("from step %d: steps %v, %+v", start, steps, s)
		}
		// Every batch was released: the ring is free again.
		if err := l.Seek(0); err != nil {
			t.Fatal(err)
		}
		if again, err := Drain(l, nil); err != nil || again.Batches != small.Steps {
			t.Fatalf("second pass: %+v, %v", again, err)
		}
		l.Close()
	}
}

func TestDrainStopsAtTheFailingStep(t *testing.T) {
	dir := writeSet(t, small)
	flipBlockByte(t, filepath.Join(dir, filepath.FromSlash(shardfmt.ShardFileName(0, 1))), 2)
	l := openLoader(t, dir, 0, 1, Options{VerifyChecksums: true})
	defer l.Close()
	s, err := Drain(l, nil)
	var le *Error
	if !errors.Is(err, ErrChecksum) || !errors.As(err, &le) || le.Step != 2 || s.Batches != 2 {
		t.Fatalf("Drain = %+v, %v; want 2 batches, then ErrChecksum at step 2", s, err)
	}
}

// TestDrainCountsEachJaggedBlock: on a shard with jagged tensors the bytes
// are each step's own block size from the shard's batch table (read with
// shardfmt), not steps x the largest block.
func TestDrainCountsEachJaggedBlock(t *testing.T) {
	path := writeJaggedShard(t)
	r, err := shardfmt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	largest := uint64(0)
	for k := range r.NumBatches() {
		bi, err := r.Batch(k)
		if err != nil {
			t.Fatal(err)
		}
		want += int64(bi.Size)
		largest = max(largest, bi.Size)
	}
	r.Close()
	if want == int64(len(jaggedRows))*int64(largest) {
		t.Fatalf("fixture: every block is %d bytes; the test needs blocks of different sizes", largest)
	}
	for _, o := range []Options{{}, {MapBlocks: true}} {
		l := openJagged(t, path, o)
		s, err := Drain(l, nil)
		l.Close()
		if err != nil {
			t.Fatal(err)
		}
		if s.Batches != len(jaggedRows) || s.Bytes != want {
			t.Errorf("%+v: %d batches, %d bytes; want %d batches, %d bytes (the batch table's block sizes)", o, s.Batches, s.Bytes, len(jaggedRows), want)
		}
	}
}
