package gpuload

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prepml/prep/gpuload/internal/testshards"
	"github.com/prepml/prep/shardfmt"
)

// small is the shard set most tests read: 2 epochs x 2 ranks, 5 steps of 4
// samples, the last with 3 samples of which 1 is a pad.
var small = testshards.Config{Epochs: 2, Ranks: 2, BatchSize: 4, Steps: 5, LastCount: 3, Pads: 1}

func writeSet(t testing.TB, c testshards.Config) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := testshards.Write(dir, c); err != nil {
		t.Fatal(err)
	}
	return dir
}

// openLoader opens the loader of (epoch, rank) over dir and fails the test
// when Open returns an error.
func openLoader(t testing.TB, dir string, epoch, rank int, o Options) *Loader {
	t.Helper()
	l, err := Open(dir, epoch, rank, o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// mustNext returns l's next batch and fails the test when Next returns an
// error.
func mustNext(t testing.TB, l *Loader) *Batch {
	t.Helper()
	b, err := l.Next()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// seekAndCheck seeks l to step k, reads the batch there and checks its
// bytes against c (see checkBatch).
func seekAndCheck(t *testing.T, l *Loader, c testshards.Config, epoch, rank, k int) *Batch {
	t.Helper()
	if err := l.Seek(k); err != nil {
		t.Fatal(err)
	}
	b, err := l.Next()
	if err != nil {
		t.Fatalf("Next after Seek(%d): %v", k, err)
	}
	checkBatch(t, l, c, epoch, rank, k, b)
	return b
}

// checkBatch asserts that b is step k of shard (epoch, rank) of set c, byte
// for byte, reading tensors through l.CopyToHost (so it works on cuda too).
func checkBatch(t *testing.T, l *Loader, c testshards.Config, epoch, rank, k int, b *Batch) {
	t.Helper()
	if b.Step != k || b.Count != c.Count(k) || b.Pads != c.Pad(k) {
		t.Fatalf("step %d: got Step %d Count %d Pads %d, want %d %d %d", k, b.Step, b.Count, b.Pads, k, c.Count(k), c.Pad(k))
	}
	ids := c.IDs(epoch, rank, k)
	if !slices.Equal(b.SampleIDs, ids) {
		t.Fatalf("step %d: SampleIDs %v, want %v", k, b.SampleIDs, ids)
	}
	flags := b.PadFlags()
	for j, f := range flags {
		if f != (j >= c.Count(k)-c.Pad(k)) {
			t.Fatalf("step %d: PadFlags %v with %d pads", k, flags, c.Pad(k))
		}
	}
	if len(b.Tensors) != len(testshards.Tensors) {
		t.Fatalf("step %d: %d tensors, want %d", k, len(b.Tensors), len(testshards.Tensors))
	}
	for ti, info := range testshards.Tensors {
		tn := &b.Tensors[ti]
		wantShape := []int64{int64(c.Count(k))}
		for _, d := range info.Shape {
			wantShape = append(wantShape, int64(d))
		}
		if tn.Name != info.Name || tn.DType != info.DType || !slices.Equal(tn.Shape, wantShape) {
			t.Fatalf("step %d tensor %d: %s %v %v, want %s %v %v", k, ti, tn.Name, tn.DType, tn.Shape, info.Name, info.DType, wantShape)
		}
		var want []byte
		for _, id := range ids {
			want = append(want, testshards.Sample(ti, id)...)
		}
		got := make([]byte, tn.Size())
		if err := l.CopyToHost(got, tn); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("step %d tensor %s: bytes differ\n got %x\nwant %x", k, tn.Name, got, want)
		}
	}
}

func TestHostDeliversEveryBatchInOrder(t *testing.T) {
	dir := writeSet(t, small)
	for _, o := range []Options{
		{},
		{VerifyChecksums: true, Prefetch: 1},
		{MapBlocks: true},
		{MapBlocks: true, VerifyChecksums: true, Prefetch: 7},
	} {
		t.Run(fmt.Sprintf("map=%v,verify=%v,prefetch=%d", o.MapBlocks, o.VerifyChecksums, o.Prefetch), func(t *testing.T) {
			l := openLoader(t, dir, 1, 1, o)
			defer l.Close()
			if l.Steps() != small.Steps {
				t.Fatalf("Steps() = %d, want %d", l.Steps(), small.Steps)
			}
			for k := range small.Steps {
				b, err := l.Next()
				if err != nil {
					t.Fatalf("Next at step %d: %v", k, err)
				}
				if b.Device != -1 {
					t.Fatalf("host batch Device = %d, want -1", b.Device)
				}
				checkBatch(t, l, small, 1, 1, k, b)
				b.Release()
				b.Release() // idempotent
			}
			for range 2 {
				if b, err := l.Next(); err != io.EOF {
					t.Fatalf("Next after the last step = %v, %v; want io.EOF", b, err)
				}
			}
		})
	}
}

func TestHostTensorLayout(t *testing.T) {
	dir := writeSet(t, small)
	l := openLoader(t, dir, 0, 0, Options{})
	defer l.Close()
	b := mustNext(t, l)
	x := b.Tensor("x")
	if x == nil || !slices.Equal(x.Strides, []int64{3, 1}) || x.Size() != 48 {
		t.Fatalf("x = %+v, want strides [3 1] and 48 bytes", x)
	}
	if y := b.Tensor("y"); !slices.Equal(y.Shape, []int64{4}) || !slices.Equal(y.Strides, []int64{1}) {
		t.Fatalf("y shape %v strides %v, want [4] [1]", y.Shape, y.Strides)
	}
	geo := l.Geometry()
	for i := range b.Tensors {
		tn := &b.Tensors[i]
		if tn.Ptr != addr(tn.Bytes) {
			t.Errorf("%s: Ptr %#x is not the address of Bytes %#x", tn.Name, tn.Ptr, addr(tn.Bytes))
		}
		if d := tn.Ptr - b.Tensors[0].Ptr; uint64(d) != geo.SlabOffset[i]-geo.SlabOffset[0] {
			t.Errorf("%s: slab at +%d, geometry says +%d", tn.Name, d, geo.SlabOffset[i]-geo.SlabOffset[0])
		}
	}
	if b.Tensors[0].Ptr%4096 != 0 {
		t.Errorf("first slab at %#x, want a page-aligned ring buffer", b.Tensors[0].Ptr)
	}
	if b.Tensor("nope") != nil {
		t.Error("Tensor(unknown name) != nil")
	}
}

func TestResumeAndSeek(t *testing.T) {
	dir := writeSet(t, small)
	l := openLoader(t, dir, 0, 1, Options{StartStep: 3, Prefetch: 2})
	defer l.Close()
	b := mustNext(t, l)
	checkBatch(t, l, small, 0, 1, 3, b)
	// A batch held across Seek stays valid until released.
	if err := l.Seek(1); err != nil {
		t.Fatal(err)
	}
	for k := 1; k < small.Steps; k++ {
		nb, err := l.Next()
		if err != nil {
			t.Fatalf("Next at step %d after Seek(1): %v", k, err)
		}
		checkBatch(t, l, small, 0, 1, k, nb)
		nb.Release()
	}
	checkBatch(t, l, small, 0, 1, 3, b)
	b.Release()
	if err := l.Seek(small.Steps); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Next(); err != io.EOF {
		t.Fatalf("Next after Seek(Steps) = %v, want io.EOF", err)
	}
	var ge *Error
	if err := l.Seek(small.Steps + 1); !errors.Is(err, ErrInvalid) || !errors.As(err, &ge) || ge.Op != "seeking" || ge.Step != small.Steps+1 {
		t.Fatalf("Seek past the end = %v, want a seeking *Error at step %d wrapping ErrInvalid", err, small.Steps+1)
	}
	if _, err := Open(dir, 0, 1, Options{StartStep: -1}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "start step -1 outside") {
		t.Fatalf("Open with StartStep -1 = %v, want ErrInvalid naming start step -1", err)
	}
}

func TestHeldBatchesStayIntactAndBoundTheRing(t *testing.T) {
	dir := writeSet(t, small)
	l := openLoader(t, dir, 1, 0, Options{Prefetch: 2})
	defer l.Close()
	if l.Ring() != 3 {
		t.Fatalf("Ring() = %d with Prefetch 2, want 3", l.Ring())
	}
	var held []*Batch
	for range l.Ring() {
		b := mustNext(t, l)
		held = append(held, b)
	}
	_, err := l.Next()
	if !errors.Is(err, ErrRingFull) {
		t.Fatalf("Next with the whole ring held = %v, want ErrRingFull", err)
	}
	held[1].Release()
	b, err := l.Next()
	if err != nil {
		t.Fatalf("Next after a release: %v", err)
	}
	checkBatch(t, l, small, 1, 0, 3, b)
	checkBatch(t, l, small, 1, 0, 0, held[0])
	checkBatch(t, l, small, 1, 0, 2, held[2])
}

func TestCloseInvalidatesBatches(t *testing.T) {
	dir := writeSet(t, small)
	l := openLoader(t, dir, 0, 0, Options{})
	b := mustNext(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b.Release() // no-op after Close
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := l.Next(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close = %v, want ErrClosed", err)
	}
	if err := l.Seek(0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Seek after Close = %v, want ErrClosed", err)
	}
}

// TestCopyToHostAfterCloseReturnsErrClosed is the regression test for
// CopyToHost on a batch of a closed Loader: on the host backend it copied
// from the ring buffer Close had unmapped (a segmentation fault), on cuda
// it returned the internal "cuda context closed" instead of ErrClosed.
func TestCopyToHostAfterCloseReturnsErrClosed(t *testing.T) {
	dir := writeSet(t, small)
	for _, o := range []Options{{}, {MapBlocks: true}} {
		copyToHostAfterClose(t, dir, o)
	}
}

// copyToHostAfterClose checks that CopyToHost of a batch held over Close
// returns ErrClosed and leaves dst alone.
func copyToHostAfterClose(t *testing.T, dir string, o Options) {
	t.Helper()
	l := openLoader(t, dir, 0, 0, o)
	b := mustNext(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	dst := bytes.Repeat([]byte{0xEE}, int(b.Tensors[0].Size()))
	if err := l.CopyToHost(dst, &b.Tensors[0]); !errors.Is(err, ErrClosed) {
		t.Fatalf("%+v: CopyToHost after Close = %v, want ErrClosed", o, err)
	}
	if !bytes.Equal(dst, bytes.Repeat([]byte{0xEE}, len(dst))) {
		t.Fatalf("%+v: CopyToHost after Close wrote to dst", o)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := writeSet(t, small)
	node := writeSet(t, small)
	shard := filepath.Join(dir, filepath.FromSlash(shardfmt.ShardFileName(1, 0)))
	cases := []struct {
		name    string
		dir     string
		epoch   int
		opts    Options
		damage  func(t *testing.T)
		want    error
		mention []string
	}{
		{name: "no manifest", dir: t.TempDir(), want: ErrNoShardSet, mention: []string{"manifest.json"}},
		{name: "no directory", dir: filepath.Join(t.TempDir(), "gone"), want: ErrNoShardSet, mention: []string{"gone: no shard set: no such directory"}},
		{name: "epoch outside the plan", dir: dir, epoch: 2, want: ErrOutsidePlan, mention: []string{"epoch 2 outside the plan's epochs [0, 2)"}},
		{name: "shard not on this node", dir: node, epoch: 1, damage: func(t *testing.T) {
			m, err := shardfmt.ReadManifest(node)
			if err != nil {
				t.Fatal(err)
			}
			m.Shards = m.Shards[:2] // epoch 0 only: epoch 1 converted elsewhere
			if err := shardfmt.WriteManifest(node, m); err != nil {
				t.Fatal(err)
			}
		}, want: ErrNoShard, mention: []string{"epoch 1 rank 0 not in manifest.json (in the plan, but not converted on this node"}},
		{name: "other plan", dir: dir, opts: Options{PlanFingerprint: "plan:other"}, want: ErrPlanMismatch, mention: []string{"plan:other", testshards.PlanFingerprint}},
		{name: "unknown backend", dir: dir, opts: Options{Backend: "tpu"}, mention: []string{`"tpu"`}},
		{name: "negative prefetch", dir: dir, opts: Options{Prefetch: -1}, mention: []string{"prefetch -1"}},
		{name: "truncated shard", dir: dir, epoch: 1, damage: func(t *testing.T) {
			fi, err := os.Stat(shard)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(shard, fi.Size()-4096); err != nil {
				t.Fatal(err)
			}
		}, want: ErrCorrupt, mention: []string{"rank-00000.shard", "expected size", "actual size"}},
		{name: "missing shard", dir: dir, epoch: 1, damage: func(t *testing.T) {
			if err := os.Remove(shard); err != nil {
				t.Fatal(err)
			}
		}, want: ErrNoShard, mention: []string{"rank-00000.shard"}},
		// Regression: prep load --prefetch 100000000000 died with "fatal
		// error: runtime: out of memory" allocating the ring.
		{name: "huge prefetch", dir: dir, opts: Options{Prefetch: 100_000_000_000}, want: ErrInvalid, mention: []string{"prefetch 100000000000 exceeds 1024"}},
		// Regression: a directory in place of the shard was reported as a
		// size mismatch with the directory's size.
		{name: "directory in place of shard", dir: dir, epoch: 1, damage: func(t *testing.T) {
			if err := os.Mkdir(shard, 0o755); err != nil {
				t.Fatal(err)
			}
		}, want: ErrCorrupt, mention: []string{"rank-00000.shard: not a regular file"}},
		// Regression: a manifest entry edited to point outside the shard
		// set made Open stat and map that file.
		{name: "manifest path outside set", dir: dir, damage: func(t *testing.T) {
			m, err := shardfmt.ReadManifest(dir)
			if err != nil {
				t.Fatal(err)
			}
			m.Shards[0].Path = "../../outside.shard"
			if err := shardfmt.WriteManifest(dir, m); err != nil {
				t.Fatal(err)
			}
		}, want: shardfmt.ErrManifest, mention: []string{`"../../outside.shard"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.damage != nil {
				c.damage(t)
			}
			l, err := Open(c.dir, c.epoch, 0, c.opts)
			if err == nil {
				l.Close()
				t.Fatal("Open succeeded")
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("error %v, want %v", err, c.want)
			}
			for _, s := range c.mention {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			// A sentinel's text is said once: "shard file damaged: shard
			// file damaged: ..." was printed for a truncated shard.
			for _, sentinel := range []error{ErrCorrupt, ErrNoShard, ErrPlanMismatch, ErrNoShardSet} {
				if n := strings.Count(err.Error(), sentinel.Error()); n > 1 {
					t.Errorf("error %q says %q %d times", err, sentinel, n)
				}
			}
		})
	}
}

// flipBlockByte flips one byte inside batch k's block of a shard file,
// keeping its size, and returns the byte's file offset.
func flipBlockByte(t *testing.T, path string, k int) int64 {
	t.Helper()
	r, err := shardfmt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	info, err := r.Batch(k)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	off := int64(info.Offset) + 5
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	return off
}

func TestChecksumMismatchSurfacesAtItsStep(t *testing.T) {
	dir := writeSet(t, small)
	flipBlockByte(t, filepath.Join(dir, filepath.FromSlash(shardfmt.ShardFileName(0, 1))), 2)
	for _, mapBlocks := range []bool{false, true} {
		l := openLoader(t, dir, 0, 1, Options{VerifyChecksums: true, MapBlocks: mapBlocks})
		for k := range 2 {
			b, err := l.Next()
			if err != nil {
				t.Fatalf("step %d: %v", k, err)
			}
			b.Release()
		}
		_, err := l.Next()
		var le *Error
		if !errors.Is(err, ErrChecksum) || !errors.As(err, &le) || le.Step != 2 || le.Offset <= 0 || !strings.Contains(err.Error(), "rank-00001.shard step 2") {
			t.Fatalf("Next at the damaged step = %v, want ErrChecksum located at step 2", err)
		}
		if _, err2 := l.Next(); !errors.Is(err2, ErrChecksum) {
			t.Fatalf("error not sticky: %v", err2)
		}
		// Seek clears the error; a later good step reads fine.
		seekAndCheck(t, l, small, 0, 1, 3)
		l.Close()
	}
	// Without verification the damaged block is delivered as is.
	l := openLoader(t, dir, 0, 1, Options{StartStep: 2})
	defer l.Close()
	if _, err := l.Next(); err != nil {
		t.Fatalf("unverified read of the damaged step: %v", err)
	}
}

// jaggedRows is the row lengths of the "hist" tensor per step of the jagged
// test shard: step 2 is the largest block (5000 I32 values), step 3 a short
// batch whose rows are all empty.
var jaggedRows = [][]int{{3, 0, 1, 7}, {1, 1, 1, 1}, {5000, 2, 0, 1}, {0, 0}}

// histValue is value e of sample j's row of "hist" at step k.
func histValue(k, j, e int) int32 { return int32(100000*k + 1000*j + e) }

// writeJaggedShard writes a shard with a jagged I32 tensor "hist" and a
// fixed F32 "y" (batch size 4) holding jaggedRows, and returns its path.
func writeJaggedShard(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jagged.shard")
	w, err := shardfmt.Create(path, shardfmt.WriterOptions{BatchSize: 4, NumBatches: len(jaggedRows),
		Tensors: []shardfmt.TensorInfo{{Name: "hist", DType: shardfmt.I32, Jagged: true}, {Name: "y", DType: shardfmt.F32}}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	g := w.Geometry()
	for k, rows := range jaggedRows {
		n := 0
		for _, r := range rows {
			n += r
		}
		lay, err := g.BatchLayout([]uint64{uint64(n)})
		if err != nil {
			t.Fatal(err)
		}
		block := make([]byte, lay.Size)
		o, v := 0, lay.ValuesOffset[0]
		ids := make([]uint64, len(rows))
		for j := 0; j <= 4; j++ {
			binary.LittleEndian.PutUint64(block[g.SlabOffset[0]+8*uint64(j):], uint64(o))
			if j < len(rows) {
				for e := range rows[j] {
					binary.LittleEndian.PutUint32(block[v:], uint32(histValue(k, j, e)))
					v += 4
				}
				o += rows[j]
				binary.LittleEndian.PutUint32(block[g.SlabOffset[1]+4*uint64(j):], math.Float32bits(float32(k)+float32(j)/4))
				ids[j] = uint64(10*k + j)
			}
		}
		if err := w.WriteBatch(block, ids, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	return path
}

// openJagged opens a loader over the shard at path (no shard set needed).
func openJagged(t *testing.T, path string, o Options) *Loader {
	t.Helper()
	r, err := shardfmt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	l, err := newLoader(r, path, 0, 0, o)
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TestHostDeliversJaggedTensors reads every step of a jagged shard, with
// pread (single and grouped reads) and with mapped views, and checks the
// values and offsets of "hist" and the fixed "y" exactly; the ring is sized
// by the largest block.
func TestHostDeliversJaggedTensors(t *testing.T) {
	path := writeJaggedShard(t)
	for _, o := range []Options{{Prefetch: 1, VerifyChecksums: true}, {Prefetch: 4, VerifyChecksums: true}, {MapBlocks: true, VerifyChecksums: true}} {
		t.Run(fmt.Sprintf("prefetch=%d,map=%v", o.Prefetch, o.MapBlocks), func(t *testing.T) {
			l := openJagged(t, path, o)
			if bs := l.Geometry().BlockSize; bs != 24576 {
				t.Fatalf("largest block %d, want 24576 (5003 I32 values at 512, rounded up to a page)", bs)
			}
			if h, ok := l.be.(*hostBackend); ok && !o.MapBlocks {
				for _, b := range h.bufs {
					if len(b) != 24576 {
						t.Fatalf("ring buffer of %d bytes, want 24576", len(b))
					}
				}
			}
			for k, rows := range jaggedRows {
				b := mustNext(t, l)
				h, y := b.Tensor("hist"), b.Tensor("y")
				var vals []byte
				offs := []int64{0}
				for j, r := range rows {
					for e := range r {
						vals = binary.LittleEndian.AppendUint32(vals, uint32(histValue(k, j, e)))
					}
					offs = append(offs, offs[j]+int64(r))
				}
				n := offs[len(offs)-1]
				if !h.Jagged || h.Offsets == nil || !slices.Equal(h.Shape, []int64{n}) || !slices.Equal(h.Strides, []int64{1}) ||
					!bytes.Equal(h.Bytes, vals) || h.Size() != 4*n || (n > 0 && h.Ptr != addr(h.Bytes)) {
					t.Fatalf("step %d hist: shape %v, %d bytes, want %d values", k, h.Shape, len(h.Bytes), n)
				}
				oT := h.Offsets
				if oT.DType != shardfmt.I64 || !slices.Equal(oT.Shape, []int64{int64(len(rows) + 1)}) || oT.Ptr != addr(oT.Bytes) || oT.Ptr%8 != 0 {
					t.Fatalf("step %d offsets tensor %+v", k, oT)
				}
				for j, want := range offs {
					if got := int64(binary.LittleEndian.Uint64(oT.Bytes[8*j:])); got != want {
						t.Fatalf("step %d offsets[%d] = %d, want %d", k, j, got, want)
					}
				}
				if y.Jagged || y.Offsets != nil || !slices.Equal(y.Shape, []int64{int64(len(rows))}) ||
					math.Float32frombits(binary.LittleEndian.Uint32(y.Bytes[4:])) != float32(k)+0.25 {
					t.Fatalf("step %d y: %+v", k, y)
				}
				if !slices.Equal(b.SampleIDs, []uint64{uint64(10 * k), uint64(10*k + 1), uint64(10*k + 2), uint64(10*k + 3)}[:len(rows)]) {
					t.Fatalf("step %d ids %v", k, b.SampleIDs)
				}
				b.Release()
			}
			if _, err := l.Next(); err != io.EOF {
				t.Fatalf("after the last step: %v, want io.EOF", err)
			}
		})
	}
}

// corruptJaggedOffsets damages step 1's offsets of the shard at path
// (written by writeJaggedShard) to [0 1 0 ...], fixing the block's CRC and
// the batch table's, so that only the offsets check can see it.
func corruptJaggedOffsets(t *testing.T, path string) {
	t.Helper()
	r, err := shardfmt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	bi, _ := r.Batch(1)
	bt := r.Layout().Regions[6]
	r.Close()
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk := img[bi.Offset : bi.Offset+bi.Size]
	binary.LittleEndian.PutUint64(blk[16:], 0) // offsets [0 1 0 ...]: decreasing
	if bt.Name != "batch table" {
		t.Fatalf("region %+v", bt)
	}
	// Fix the block CRC in entry 1, then the batch table CRC in header and footer.
	e := img[bt.Offset+uint64(40):]
	binary.LittleEndian.PutUint32(e[8:], shardfmt.CRC32C(blk))
	tcrc := shardfmt.CRC32C(img[bt.Offset : bt.Offset+bt.Size])
	binary.LittleEndian.PutUint32(img[152:], tcrc)
	binary.LittleEndian.PutUint32(img[252:], shardfmt.CRC32C(img[:252]))
	foot := img[len(img)-64:]
	binary.LittleEndian.PutUint32(foot[40:], tcrc)
	binary.LittleEndian.PutUint32(foot[48:], binary.LittleEndian.Uint32(img[252:]))
	binary.LittleEndian.PutUint32(foot[60:], shardfmt.CRC32C(foot[:60]))
	if err := os.WriteFile(path, img, 0o644); err != nil {
		t.Fatal(err)
	}
}

// assertBadOffsetsAtStep1 takes step 0 from l, then checks that Next fails
// at step 1 with ErrCorrupt about hist's offsets (corruptJaggedOffsets).
func assertBadOffsetsAtStep1(t *testing.T, l *Loader) {
	t.Helper()
	mustNext(t, l).Release()
	_, err := l.Next()
	var le *Error
	if !errors.Is(err, ErrCorrupt) || !errors.Is(err, shardfmt.ErrCorrupt) || !errors.As(err, &le) || le.Step != 1 ||
		!strings.Contains(err.Error(), `"hist": offsets[2] = 0 decreases from 1`) {
		t.Fatalf("Next at step 1: %v, want ErrCorrupt about hist's offsets at step 1", err)
	}
}

// TestJaggedBadOffsetsFailTheirStep damages step 1's offsets (CRC fixed, so
// only the offsets check can see it): Next delivers step 0, then fails at
// step 1 with ErrCorrupt naming the tensor.
func TestJaggedBadOffsetsFailTheirStep(t *testing.T) {
	path := writeJaggedShard(t)
	corruptJaggedOffsets(t, path)
	assertBadOffsetsAtStep1(t, openJagged(t, path, Options{VerifyChecksums: true}))
}
