package shardfmt

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/prepml/prep/internal/atomicfile"
)

// TestWriterDigestMatchesFile checks that the digest the Writer computes at
// Commit, from the bytes it wrote, is the one FileDigest reads back from the
// file, and Size the file's length: with the sample ids kept in memory and
// with them written batch by batch and read back (idsBufferMax 0), for full,
// short and empty shards.
func TestWriterDigestMatchesFile(t *testing.T) {
	for _, buffered := range []bool{true, false} {
		for _, nb := range []int{0, 1, 5} {
			t.Run(fmt.Sprintf("buffered=%v/batches=%d", buffered, nb), func(t *testing.T) {
				if !buffered {
					old := idsBufferMax
					idsBufferMax = 0
					t.Cleanup(func() { idsBufferMax = old })
				}
				opts := testOpts(4, nb)
				path := filepath.Join(t.TempDir(), "s.shard")
				w, err := Create(path, opts)
				if err != nil {
					t.Fatal(err)
				}
				if nb > 0 && (w.allIDs != nil) != buffered {
					t.Fatalf("ids buffered %v, want %v", w.allIDs != nil, buffered)
				}
				rng := rand.New(rand.NewPCG(uint64(nb), 9))
				for k := range nb {
					count, pads := 4, 0
					if k == nb-1 {
						count, pads = 3, 1 // a short last batch with a pad
					}
					ids := make([]uint64, count)
					for j := range ids {
						ids[j] = rng.Uint64N(1 << 40)
					}
					if err := w.WriteBatch(fillBlock(w.Geometry(), count, rng), ids, pads); err != nil {
						t.Fatal(err)
					}
				}
				if w.Digest() != "" {
					t.Fatal("digest before Commit")
				}
				if err := w.Commit(); err != nil {
					t.Fatal(err)
				}
				want, err := FileDigest(path)
				if err != nil {
					t.Fatal(err)
				}
				if got := w.Digest(); got != want {
					t.Errorf("Writer.Digest %s, FileDigest %s", got, want)
				}
				st, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				if w.Size() != st.Size() {
					t.Errorf("Writer.Size %d, file has %d bytes", w.Size(), st.Size())
				}
			})
		}
	}
}

// TestWriterIDsMemoryBounded is the regression test for Writers holding
// whole sample id sections in memory: convert runs 2*Jobs Writers at once,
// and with sections of up to 64 MiB each kept until Commit, a run under
// --memory-limit 64MiB peaked at 245 MB of heap instead of 23 MB. A Writer
// for a shard of 4M sample slots (a 32 MiB ids section) must hold a small,
// fixed amount of memory whatever the shard's length.
func TestWriterIDsMemoryBounded(t *testing.T) {
	opts := WriterOptions{BatchSize: 64, NumBatches: 1 << 16, Tensors: []TensorInfo{{Name: "x", DType: U8}}}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w, err := Create(filepath.Join(t.TempDir(), "big.shard"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	runtime.GC()
	runtime.ReadMemStats(&after)
	// The batch table (16 B per batch, 1 MiB) and one batch's ids are held
	// in any case; the ids section is 32 MiB.
	if held := int64(after.HeapAlloc) - int64(before.HeapAlloc); held > 4<<20 {
		t.Errorf("Writer holds %d bytes of heap for a shard of %d sample slots, want at most %d", held, 64<<16, 4<<20)
	}
	if w.allIDs != nil && uint64(len(w.allIDs)) > idsBufferMax {
		t.Errorf("ids buffer of %d bytes above idsBufferMax %d", len(w.allIDs), idsBufferMax)
	}
}

// TestSameTensors: order, name bytes, dtype and shape all count; a nil and
// an empty shape (a scalar) are the same.
func TestSameTensors(t *testing.T) {
	a := []TensorInfo{{Name: "x", DType: F32, Shape: []uint64{4}}, {Name: "y", DType: I64}}
	cases := []struct {
		b    []TensorInfo
		want bool
	}{
		{[]TensorInfo{{Name: "x", DType: F32, Shape: []uint64{4}}, {Name: "y", DType: I64, Shape: []uint64{}}}, true},
		{[]TensorInfo{{Name: "y", DType: I64}, {Name: "x", DType: F32, Shape: []uint64{4}}}, false},
		{[]TensorInfo{{Name: "x", DType: F16, Shape: []uint64{4}}, {Name: "y", DType: I64}}, false},
		{[]TensorInfo{{Name: "x", DType: F32, Shape: []uint64{2, 2}}, {Name: "y", DType: I64}}, false},
		{[]TensorInfo{{Name: "x", DType: F32, Shape: []uint64{4}}}, false},
	}
	for i, c := range cases {
		if got := SameTensors(a, c.b); got != c.want {
			t.Errorf("case %d: SameTensors = %v, want %v", i, got, c.want)
		}
	}
}

// TestWritebackEveryBlock runs the Writer with writeback started after every
// block (writebackChunk 1), on the test's disk and on a tmpfs (/dev/shm,
// where sync_file_range does nothing) when there is one: the shard reads
// back exactly as written, writeback has been started up to the end of the
// last block, and a Writer aborted after starting writeback leaves no file.
func TestWritebackEveryBlock(t *testing.T) {
	old := writebackChunk
	writebackChunk = 1
	t.Cleanup(func() { writebackChunk = old })
	dirs := []string{t.TempDir()}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "shardfmt-test-")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			dirs = append(dirs, d)
		}
	}
	for _, dir := range dirs {
		opts := testOpts(4, 9)
		path := filepath.Join(dir, "s.shard")
		want := writeShard(t, path, opts, nil, nil, 3)
		checkShard(t, path, opts, want)

		w, err := Create(filepath.Join(dir, "a.shard"), opts)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		for k := range 5 {
			ids := []uint64{uint64(4 * k), uint64(4*k + 1), uint64(4*k + 2), uint64(4*k + 3)}
			if err := w.WriteBatch(fillBlock(w.Geometry(), 4, rng), ids, 0); err != nil {
				t.Fatal(err)
			}
		}
		if end := w.h.dataOff + 5*w.h.blockSize; w.kicked != end {
			t.Errorf("%s: writeback started up to %d, want %d (the end of the fifth block)", dir, w.kicked, end)
		}
		if err := w.Abort(); err != nil {
			t.Fatal(err)
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if len(names) != 1 || names[0] != "s.shard" {
			t.Errorf("%s: files after Abort %v, want only s.shard", dir, names)
		}
	}
}

// TestFileSizeIsCommittedSize: FileSize predicts the committed file's
// length exactly, for empty and non-empty shards, one or several tensors,
// and provenance metadata of different lengths; it refuses what Create
// refuses.
func TestFileSizeIsCommittedSize(t *testing.T) {
	for _, nb := range []int{0, 1, 7} {
		for _, bs := range []int{1, 4, 33} {
			opts := testOpts(bs, nb)
			opts.Provenance.Epoch, opts.Provenance.Rank = uint32(nb*1000), uint32(bs)
			path := filepath.Join(t.TempDir(), "s.shard")
			writeShard(t, path, opts, nil, nil, 1)
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			got, err := FileSize(opts)
			if err != nil || got != fi.Size() {
				t.Errorf("batch size %d, %d batches: FileSize = %d, %v; the file has %d bytes", bs, nb, got, err, fi.Size())
			}
		}
	}
	bad := testOpts(4, 2)
	bad.NumBatches = -1
	if _, err := FileSize(bad); !errors.Is(err, ErrInvalid) {
		t.Errorf("FileSize with -1 batches: %v, want ErrInvalid", err)
	}
	bad = testOpts(0, 2)
	if _, err := FileSize(bad); !errors.Is(err, ErrInvalid) {
		t.Errorf("FileSize with batch size 0: %v, want ErrInvalid", err)
	}
}

// TestCommitDirSyncFailureIsNotDurable: when the directory fsync after the
// rename fails, the shard is already at its final name; Commit says so
// (ErrNotDurable) so that a caller rolling back removes it.
func TestCommitDirSyncFailureIsNotDurable(t *testing.T) {
	atomicfile.SyncDirHook = func(string) error { return errors.New("injected EIO") }
	t.Cleanup(func() { atomicfile.SyncDirHook = nil })
	path := filepath.Join(t.TempDir(), "s.shard")
	w, err := Create(path, testOpts(4, 0))
	if err != nil {
		t.Fatal(err)
	}
	err = w.Commit()
	if !errors.Is(err, ErrNotDurable) {
		t.Fatalf("Commit = %v, want ErrNotDurable", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("renamed shard: %v", err)
	}
}

// TestCreateInNeverLeavesRoot: a shard written by name inside a root whose
// directory is a symbolic link to another place fails, and nothing is
// created there.
func TestCreateInNeverLeavesRoot(t *testing.T) {
	base := t.TempDir()
	set, outside := filepath.Join(base, "set"), filepath.Join(base, "outside")
	for _, d := range []string{set, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(set, "epoch-00000")); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(set)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if w, err := CreateIn(root, "epoch-00000/rank-00000.shard", testOpts(4, 0)); err == nil {
		w.Abort()
		t.Fatal("CreateIn through a symlinked directory succeeded")
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("files created outside the root: %v", ents)
	}
	w, err := CreateIn(root, "epoch-00001/rank-00000.shard", testOpts(4, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(filepath.Join(set, "epoch-00001", "rank-00000.shard")); err != nil {
		t.Fatalf("committed shard: %v", err)
	}
}
