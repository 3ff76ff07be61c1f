package verify_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/prepml/prep/verify"
	"github.com/prepml/prep/verify/verifytest"
)

// TestBatchesSplitAcrossJobsSameReport damages many batches of one shard of
// a set with more jobs than shards, so each shard's batches are checked by
// several goroutines, and asserts the report equals the one-job report:
// same findings in the same order, the per-shard cap applied at the same
// batch, same counts.
func TestBatchesSplitAcrossJobsSameReport(t *testing.T) {
	// 4 shards of 500 batches (b = 2); 8 jobs give each shard 2 goroutines.
	f := verifytest.BuildSize(t, verifytest.Size{Rows: 1999, Dim: 3, GlobalBatch: 4})
	for k := 3; k < 500; k += 13 { // 39 damaged batches, over the cap of 20
		verifytest.FlipByte(t, f.ShardPath(1), verifytest.BlockOffset(t, f.ShardPath(1), k)+1)
	}
	verifytest.FlipByte(t, f.ShardPath(2), verifytest.BlockOffset(t, f.ShardPath(2), 499)+1)
	// A plan edited in one rank batch's worth of ids makes the plan
	// comparison run per batch as well: swap two ids of shard 3.
	fixturePlan = f.Plan
	rewriteShard(t, f, 3, func(k int, ids []uint64, pads int) ([]uint64, int) {
		if k == 250 || k == 251 {
			ids[0], ids[1] = ids[1], ids[0]
		}
		return ids, pads
	})
	run := func(jobs int) (*verify.Report, string) {
		var progress int64
		rep, err := verify.Run(context.Background(), verify.Options{Dir: f.Dir, Jobs: jobs, Progress: func(n int64) { progress += n }})
		if err != nil {
			t.Fatal(err)
		}
		if progress != rep.Bytes {
			t.Errorf("jobs %d: progress reported %d bytes, report says %d", jobs, progress, rep.Bytes)
		}
		b, _ := json.Marshal(rep.Findings)
		return rep, string(b)
	}
	one, oneJSON := run(1)
	many, manyJSON := run(8)
	if oneJSON != manyJSON {
		t.Errorf("findings differ:\n--jobs 1 %s\n--jobs 8 %s", oneJSON, manyJSON)
	}
	if one.Batches != 2000 || many.Batches != 2000 || one.Bytes != many.Bytes {
		t.Errorf("batches %d / %d, bytes %d / %d; want 2000 batches each and equal bytes", one.Batches, many.Batches, one.Bytes, many.Bytes)
	}
	// 20 listed + 1 summary for shard 1, 1 for shard 2, 2 plan mismatches
	// in shard 3.
	counts := map[verify.Kind]int{}
	for _, x := range one.Findings {
		counts[x.Kind]++
	}
	if counts[verify.KindBatchChecksum] != 22 || counts[verify.KindPlanMismatch] != 2 || len(one.Findings) != 24 {
		t.Errorf("findings by kind %v (%d in all), want 22 batch_checksum and 2 plan_mismatch", counts, len(one.Findings))
	}
}
