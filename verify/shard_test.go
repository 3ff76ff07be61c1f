package verify_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"strings"
	"testing"

	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/verify"
	"github.com/prepml/prep/verify/verifytest"
)

// TestDamagedIDsInsideReadAhead: the sample ids of one batch in the middle
// of the id slots a check reads ahead with one read are damaged. The
// read-ahead fails for every batch it covers, so each is checked with its
// own read as before: the damaged batch alone is a batch_checksum finding,
// whose message names its ids' offset, their CRC-32C and the stored one
// (computed here from the file), next to the shard's digest_mismatch; the
// other batches of the read-ahead are clean.
func TestDamagedIDsInsideReadAhead(t *testing.T) {
	f := verifytest.Build(t)
	const shard, batch = 1, 2
	path := f.ShardPath(shard)
	r, err := shardfmt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.NumBatches() < 4 {
		t.Fatalf("fixture shard has %d batches, want at least 4", r.NumBatches())
	}
	bs := r.Geometry().BatchSize
	ids, err := r.SampleIDs(batch)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	// Batch 2's BatchSize slots as stored: its ids, then UnusedSampleID.
	slots := make([]byte, 8*bs)
	for j := range bs {
		id := uint64(shardfmt.UnusedSampleID)
		if j < len(ids) {
			id = ids[j]
		}
		binary.LittleEndian.PutUint64(slots[8*j:], id)
	}
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := bytes.Index(img, slots)
	if off < 0 || bytes.Index(img[off+1:], slots) >= 0 {
		t.Fatalf("batch %d's id slots not found once in the shard", batch)
	}
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	stored := crc32.Checksum(slots, castagnoli)
	slots[9] ^= 0x40 // the second id
	damaged := crc32.Checksum(slots, castagnoli)
	verifytest.FlipByte(t, path, int64(off+9))

	// Mapped, the ids are checked batch by batch in place: the same
	// findings.
	for _, mode := range readModes {
		rep := verifytest.Run(t, verify.Options{Dir: f.Dir, Jobs: 2, ReadMode: mode})
		p := f.Man.Shards[shard].Path
		want := []string{fmt.Sprintf("batch_checksum %s b%d", p, batch), "digest_mismatch " + p}
		if got := verifytest.Keys(rep.Findings); strings.Join(got, "; ") != strings.Join(want, "; ") {
			t.Fatalf("%s: findings %q, want %q\n%s", mode, got, want, verifytest.Lines(rep))
		}
		for _, x := range rep.Findings {
			if x.Kind != verify.KindBatchChecksum {
				continue
			}
			msg := fmt.Sprintf("batch fails verification: sample ids at offset %d: checksum mismatch: CRC-32C %08x, stored %08x", off, damaged, stored)
			if x.Message != msg {
				t.Errorf("%s: message %q, want %q", mode, x.Message, msg)
			}
		}
		if want := 16; rep.Batches != want {
			t.Errorf("%s: %d batches checked, want %d", mode, rep.Batches, want)
		}
	}
}

// readModes are the ways verify reads the shards, each test of damage
// run with both.
var readModes = []verify.ReadMode{verify.ReadPread, verify.ReadMmap}

// TestFlippedBlockByteEachReadMode: one byte of batch 2's block in shard
// 1 is flipped. Read with pread or checked in place through the mapping,
// the one finding is that batch's batch_checksum, the stored CRC-32C
// expected and the damaged block's (computed here from the file) actual.
func TestFlippedBlockByteEachReadMode(t *testing.T) {
	f := verifytest.Build(t)
	const shard, batch = 1, 2
	path := f.ShardPath(shard)
	off := verifytest.BlockOffset(t, path, batch)
	verifytest.FlipByte(t, path, off+5)
	r, err := shardfmt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	bi, _ := r.Batch(batch)
	block := make([]byte, bi.Size)
	if err := r.ReadBlock(batch, block); err != nil {
		t.Fatal(err)
	}
	r.Close()
	damaged := crc32.Checksum(block, crc32.MakeTable(crc32.Castagnoli))
	want := verify.Finding{Kind: verify.KindBatchChecksum, Shard: f.Man.Shards[shard].Path,
		Epoch: intp(f.Man.Shards[shard].Epoch), Rank: intp(f.Man.Shards[shard].Rank), Batch: intp(batch),
		What: "crc32c", Expected: fmt.Sprintf("%08x", bi.CRC), Actual: fmt.Sprintf("%08x", damaged),
		Message: "batch block does not match its checksum"}
	for _, mode := range readModes {
		rep := verifytest.Run(t, verify.Options{Dir: f.Dir, Jobs: 2, ReadMode: mode})
		if len(rep.Findings) != 1 || rep.Findings[0].String() != want.String() {
			t.Errorf("%s: findings\n%s\nwant one: %s", mode, verifytest.Lines(rep), want)
		}
		if n := 4 * f.Plan.Steps(); rep.Batches != n {
			t.Errorf("%s: %d batches checked, want %d", mode, rep.Batches, n)
		}
	}
}

func intp(i int) *int { return &i }

// TestUnknownReadMode: Run refuses a read mode it does not know before
// reading anything.
func TestUnknownReadMode(t *testing.T) {
	f := verifytest.Build(t)
	rep, err := verify.Run(context.Background(), verify.Options{Dir: f.Dir, ReadMode: "direct"})
	if rep != nil || !errors.Is(err, verify.ErrReadMode) || err.Error() != `unknown read mode "direct" (want pread or mmap)` {
		t.Errorf("Run = %v, %v; want nil and ErrReadMode", rep, err)
	}
}

// TestShardCutShortOnceMapped: with ReadMmap, shard 0 is cut where batch
// 1's block starts once it is mapped, before any of it is checked. Every
// fault is a finding, none a crash: the digest's (the batch table it
// hashes lies past the cut), batch 0's (its block is whole, its ids lie
// past the cut) and each later batch's (its block's first page).
func TestShardCutShortOnceMapped(t *testing.T) {
	f := verifytest.Build(t)
	path := f.ShardPath(0)
	r, err := shardfmt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	n := r.NumBatches()
	blocks := make([]shardfmt.BatchInfo, n)
	for k := range blocks {
		blocks[k], _ = r.Batch(k)
	}
	r.Close()
	page := uint64(os.Getpagesize())
	cut := blocks[1].Offset
	if cut%page != 0 {
		t.Skipf("block 1 at %d is not at a page boundary (%d-byte pages)", cut, page)
	}
	name := f.Man.Shards[0].Path
	defer verify.SetMappedShardHook(func(p string) {
		if p == name {
			if err := os.Truncate(path, int64(cut)); err != nil {
				t.Error(err)
			}
		}
	})()
	rep := verifytest.Run(t, verify.Options{Dir: f.Dir, Jobs: 1, ReadMode: verify.ReadMmap})
	const fault = "wrong file size: memory fault reading the mapping (file cut short after open?)"
	last := blocks[n-1]
	btOff := last.Offset + last.Size // format 1: the batch table follows the blocks, the ids the table
	ids0 := btOff + uint64(n)*shardfmt.BatchEntryLen
	want := []string{"shard changed while being read: computing digest: batch table at offset " + fmt.Sprint(btOff/page*page) + ": " + fault,
		"shard changed while being read: sample ids at offset " + fmt.Sprint(ids0/page*page) + ": " + fault}
	for k := 1; k < n; k++ {
		want = append(want, fmt.Sprintf("shard changed while being read: block at offset %d: %s", blocks[k].Offset, fault))
	}
	var got []string
	for _, x := range rep.Findings {
		if x.Kind != verify.KindSizeMismatch || x.Shard != name {
			t.Errorf("finding %s, want only size_mismatch on %s", x, name)
			continue
		}
		got = append(got, x.Message)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("messages\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
