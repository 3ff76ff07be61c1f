package verify_test

import (
	"bytes"
	"encoding/binary"
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

	rep := verifytest.Run(t, verify.Options{Dir: f.Dir, Jobs: 2})
	p := f.Man.Shards[shard].Path
	want := []string{fmt.Sprintf("batch_checksum %s b%d", p, batch), "digest_mismatch " + p}
	if got := verifytest.Keys(rep.Findings); strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("findings %q, want %q\n%s", got, want, verifytest.Lines(rep))
	}
	for _, x := range rep.Findings {
		if x.Kind != verify.KindBatchChecksum {
			continue
		}
		msg := fmt.Sprintf("batch fails verification: sample ids at offset %d: checksum mismatch: CRC-32C %08x, stored %08x", off, damaged, stored)
		if x.Message != msg {
			t.Errorf("message %q, want %q", x.Message, msg)
		}
	}
	if want := 16; rep.Batches != want {
		t.Errorf("%d batches checked, want %d", rep.Batches, want)
	}
}
