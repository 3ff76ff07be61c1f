package gpuload

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prepml/prep/gpuload/internal/testshards"
	"github.com/prepml/prep/shardfmt"
)

// flipIDByte flips a bit of the first sample id of step k in the shard at
// path, so that step's ids fail their CRC-32C.
func flipIDByte(t *testing.T, path string, k int) {
	t.Helper()
	r, err := shardfmt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var ids shardfmt.Region
	for _, reg := range r.Layout().Regions {
		if reg.Name == "sample ids" {
			ids = reg
		}
	}
	b := r.Geometry().BatchSize
	r.Close()
	if ids.Size == 0 {
		t.Fatal("no sample ids region")
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	off := int64(ids.Offset) + int64(8*b*k)
	var one [1]byte
	if _, err := f.ReadAt(one[:], off); err != nil {
		t.Fatal(err)
	}
	one[0] ^= 0x10
	if _, err := f.WriteAt(one[:], off); err != nil {
		t.Fatal(err)
	}
}

// TestSampleIDsReadAhead reads every batch with the sample ids read ahead 1,
// 2 and 3 batches at a time and by default (the whole shard at once), with
// pread and mapped blocks, holding batches while later ones arrive, and
// checks every batch (ids included) exactly.
func TestSampleIDsReadAhead(t *testing.T) {
	c := testshards.Config{Epochs: 1, Ranks: 1, BatchSize: 5, Steps: 23, LastCount: 2, Pads: 1}
	dir := writeSet(t, c)
	old := idsAhead
	defer func() { idsAhead = old }()
	for _, ahead := range []int{1, 8 * 5, 2 * 8 * 5, 3 * 8 * 5, old} {
		idsAhead = ahead
		for _, o := range []Options{{Prefetch: 6}, {Prefetch: 6, MapBlocks: true}, {Prefetch: 1}} {
			l := openLoader(t, dir, 0, 0, o)
			var held []*Batch
			for k := range c.Steps {
				b := mustNext(t, l)
				checkBatch(t, l, c, 0, 0, k, b)
				held = append(held, b)
				if len(held) == l.Ring() {
					for _, h := range held {
						checkBatch(t, l, c, 0, 0, h.Step, h)
						h.Release()
					}
					held = held[:0]
				}
			}
			for _, h := range held {
				checkBatch(t, l, c, 0, 0, h.Step, h)
				h.Release()
			}
			// Back to a step before the ids read last.
			seekAndCheck(t, l, c, 0, 0, 1).Release()
			l.Close()
		}
	}
}

// TestSampleIDChecksumInsideTheReadAhead damages the ids of step 5: the
// steps before it are delivered with their ids, Next at step 5 fails with
// ErrChecksum located there, and after Seek the steps after it read fine,
// whether the read ahead covers the damaged step alone, with its
// neighbours, or the whole shard.
func TestSampleIDChecksumInsideTheReadAhead(t *testing.T) {
	c := testshards.Config{Epochs: 1, Ranks: 1, BatchSize: 5, Steps: 12, LastCount: 5}
	dir := writeSet(t, c)
	flipIDByte(t, filepath.Join(dir, filepath.FromSlash(shardfmt.ShardFileName(0, 0))), 5)
	old := idsAhead
	defer func() { idsAhead = old }()
	for _, ahead := range []int{8 * 5, 2 * 8 * 5, 4 * 8 * 5, old} {
		idsAhead = ahead
		for _, o := range []Options{{Prefetch: 6}, {Prefetch: 6, MapBlocks: true}} {
			l := openLoader(t, dir, 0, 0, o)
			for k := range 5 {
				b := mustNext(t, l)
				checkBatch(t, l, c, 0, 0, k, b)
				b.Release()
			}
			_, err := l.Next()
			var e *Error
			if !errors.Is(err, shardfmt.ErrChecksum) || !errors.As(err, &e) || e.Step != 5 || !strings.Contains(err.Error(), "sample ids") {
				t.Fatalf("ahead %d %+v: Next at the damaged step = %v, want a sample ids checksum error at step 5", ahead, o, err)
			}
			for k := 6; k < c.Steps; k++ {
				seekAndCheck(t, l, c, 0, 0, k).Release()
			}
			if err := l.Seek(4); err != nil {
				t.Fatal(err)
			}
			b := mustNext(t, l)
			checkBatch(t, l, c, 0, 0, 4, b)
			b.Release()
			if _, err := l.Next(); !errors.Is(err, shardfmt.ErrChecksum) {
				t.Fatalf("ahead %d %+v: step 5 after Seek(4) = %v, want ErrChecksum", ahead, o, err)
			}
			l.Close()
		}
	}
}

// TestConsumerReadsWhenNothingIsReady turns the producer off, so that the
// consumer reads every group itself (the path it takes when no group is
// ready or being read): every batch is delivered byte for byte in step
// order, across a Seek back and at every ring size; a block whose CRC-32C
// fails (VerifyChecksums) and a step whose sample ids fail stop Next there
// with the error located at that step, sticky until Seek.
func TestConsumerReadsWhenNothingIsReady(t *testing.T) {
	defer func(old bool) { producerOff = old }(producerOff)
	producerOff = true
	c := testshards.Config{Epochs: 1, Ranks: 1, BatchSize: 3, Steps: 23, LastCount: 1}
	dir := writeSet(t, c)
	for _, o := range []Options{{Prefetch: 1}, {}, {Prefetch: 6, VerifyChecksums: true}, {MapBlocks: true}} {
		l := openLoader(t, dir, 0, 0, o)
		for _, from := range []int{0, 7} {
			if err := l.Seek(from); err != nil {
				t.Fatalf("%+v: Seek(%d): %v", o, from, err)
			}
			var held []*Batch
			for k := from; k < c.Steps; k++ {
				b := mustNext(t, l)
				checkBatch(t, l, c, 0, 0, k, b)
				// Hold up to the whole ring but one, then give it back.
				if held = append(held, b); len(held) == l.Ring()-1 || k == c.Steps-1 {
					for _, b := range held {
						b.Release()
					}
					held = held[:0]
				}
			}
			if b, err := l.Next(); !errors.Is(err, io.EOF) {
				t.Fatalf("%+v: Next after the last step = %v, %v; want io.EOF", o, b, err)
			}
		}
		l.Close()
	}

	path := filepath.Join(dir, filepath.FromSlash(shardfmt.ShardFileName(0, 0)))
	flipIDByte(t, path, 5)
	r, err := shardfmt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	bi, _ := r.Batch(9)
	r.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	one := []byte{0}
	if _, err := f.ReadAt(one, int64(bi.Offset)+1); err != nil {
		t.Fatal(err)
	}
	one[0] ^= 0x20
	if _, err := f.WriteAt(one, int64(bi.Offset)+1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, o := range []Options{{Prefetch: 6, VerifyChecksums: true}, {Prefetch: 2, VerifyChecksums: true}} {
		l := openLoader(t, dir, 0, 0, o)
		for k := range 5 {
			b := mustNext(t, l)
			checkBatch(t, l, c, 0, 0, k, b)
			b.Release()
		}
		var e *Error
		if _, err := l.Next(); !errors.Is(err, shardfmt.ErrChecksum) || !errors.As(err, &e) || e.Step != 5 {
			t.Fatalf("%+v: Next at step 5 = %v, want a checksum error at step 5", o, err)
		}
		if _, err := l.Next(); !errors.Is(err, shardfmt.ErrChecksum) {
			t.Fatalf("%+v: Next after the error = %v, want it again (sticky)", o, err)
		}
		if err := l.Seek(6); err != nil {
			t.Fatal(err)
		}
		for k := 6; k < 9; k++ {
			b := mustNext(t, l)
			checkBatch(t, l, c, 0, 0, k, b)
			b.Release()
		}
		if _, err := l.Next(); !errors.Is(err, ErrChecksum) || !errors.As(err, &e) || e.Step != 9 {
			t.Fatalf("%+v: Next at step 9 = %v, want the block's checksum error at step 9", o, err)
		}
		l.Close()
	}
}

// TestReleaseKicksTheProducer: a batch given back at once wakes nobody
// (the consumer reads the next groups itself); one given back kickGap or
// more after it was handed out, or while the consumer is parked waiting
// for a group, leaves one wake-up token for the producer. The producer is
// off, so that nothing takes the token before it is looked at.
func TestReleaseKicksTheProducer(t *testing.T) {
	defer func(old bool) { producerOff = old }(producerOff)
	producerOff = true
	c := testshards.Config{Epochs: 1, Ranks: 1, BatchSize: 3, Steps: 9, LastCount: 3}
	l := openLoader(t, writeSet(t, c), 0, 0, Options{Prefetch: 2})
	defer l.Close()
	h := l.be.(*hostBackend)
	kicked := func() bool {
		select {
		case <-h.kick:
			return true
		default:
			return false
		}
	}
	for _, tc := range []struct {
		name   string
		slow   bool // given back kickGap or more after it was handed out
		parked bool
		want   bool
	}{
		{"given back at once", false, false, false},
		{"given back after kickGap", true, false, true},
		{"given back at once, consumer parked", false, true, true},
	} {
		b := mustNext(t, l)
		kicked()
		handed := time.Now().Add(time.Hour) // surely within kickGap of the release
		if tc.slow {
			handed = time.Now().Add(-10 * kickGap)
		}
		h.handed.Store(handed.UnixNano())
		h.parked.Store(tc.parked)
		b.Release()
		h.parked.Store(false)
		if got := kicked(); got != tc.want {
			t.Errorf("%s: producer kicked %v, want %v", tc.name, got, tc.want)
		}
	}
}
