package verify_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/verify"
	"github.com/prepml/prep/verify/verifytest"
)

// rewriteShard rewrites manifest shard i of f with edit applied to each
// batch's sample ids and pad count (blocks unchanged), as a well-formed
// shard with valid checksums, and records its new digest in the manifest,
// so that only plan conformance can tell.
func rewriteShard(t *testing.T, f *verifytest.Fixture, i int, edit func(k int, ids []uint64, pads int) ([]uint64, int)) {
	t.Helper()
	f.RewriteShard(t, i, func(k int, block []byte, ids []uint64, pads int) ([]byte, []uint64, int) {
		ids, pads = edit(k, ids, pads)
		return block, ids, pads
	})
}

// findingsJSON runs verify over dir with the epoch digest path on or off.
func findingsJSON(t *testing.T, dir string, digestPath bool) string {
	t.Helper()
	defer verify.SetPlanDigestPath(digestPath)()
	rep, err := verify.Run(context.Background(), verify.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rep.Findings)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fixturePlan is the plan of the fixture the current case edits.
var fixturePlan *plan.Plan

// TestPlanDigestPathSameFindings pins that checking plan conformance by
// epoch digest reports exactly what the batch-by-batch comparison reports,
// for shards that differ from the plan in ways only the plan can tell.
func TestPlanDigestPathSameFindings(t *testing.T) {
	swap := func(ids []uint64, i, j int) []uint64 { ids[i], ids[j] = ids[j], ids[i]; return ids }
	cases := []struct {
		name     string
		shard    int
		edit     func(k int, ids []uint64, pads int) ([]uint64, int)
		accepted map[int]bool // epochs the digest path takes
		findings int
	}{
		{name: "clean", accepted: map[int]bool{0: true, 1: true}},
		{name: "two ids swapped in a batch", shard: 1, edit: func(k int, ids []uint64, pads int) ([]uint64, int) {
			if k == 1 {
				return swap(ids, 0, 1), pads
			}
			return ids, pads
		}, accepted: map[int]bool{1: true}, findings: 1},
		// Shard 2 is epoch 1 rank 0: its batches 0 and 1 (both full)
		// exchange their ids, each batch still well-formed.
		{name: "two batches swapped", shard: 2, edit: func(k int, ids []uint64, pads int) ([]uint64, int) {
			if k < 2 {
				other, _, _ := fixturePlan.RankBatch(1, 0, 1-k, nil)
				return other, pads
			}
			return ids, pads
		}, accepted: map[int]bool{0: true}, findings: 2},
		{name: "one id replaced", shard: 3, edit: func(k int, ids []uint64, pads int) ([]uint64, int) {
			if k == 2 {
				ids[1] = 12345
			}
			return ids, pads
		}, accepted: map[int]bool{0: true}, findings: 1},
		// The last step of the fixture ends the epoch with pads: drop a pad
		// flag (the id stays), which only the pad count tells.
		{name: "pad flag dropped", shard: 0, edit: func(k int, ids []uint64, pads int) ([]uint64, int) {
			if pads > 0 {
				return ids, pads - 1
			}
			return ids, pads
		}, accepted: map[int]bool{1: true}, findings: 1},
		// The pad flags moved into the ids: the pad count says none, and
		// the ids of the plan's pads carry bit 63, the digest's pad bit.
		// The slot stream is the plan's, yet count and ids are not.
		{name: "pad flag in id bit 63", shard: 0, edit: func(k int, ids []uint64, pads int) ([]uint64, int) {
			for i := len(ids) - pads; i < len(ids); i++ {
				ids[i] |= 1 << 63
			}
			return ids, 0
		}, accepted: map[int]bool{1: true}, findings: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := verifytest.Build(t)
			fixturePlan = f.Plan
			if c.edit != nil {
				rewriteShard(t, f, c.shard, c.edit)
			}
			got := verify.ConformingEpochs(verify.Options{Dir: f.Dir})
			for e := range 2 {
				if got[e] != c.accepted[e] {
					t.Errorf("digest path accepts epoch %d: %v, want %v", e, got[e], c.accepted[e])
				}
			}
			fast, slow := findingsJSON(t, f.Dir, true), findingsJSON(t, f.Dir, false)
			if fast != slow {
				t.Errorf("findings differ:\ndigest path %s\nbatch path  %s", fast, slow)
			}
			var fs []verify.Finding
			json.Unmarshal([]byte(fast), &fs)
			if len(fs) != c.findings {
				t.Errorf("%d findings, want %d: %s", len(fs), c.findings, fast)
			}
			for _, x := range fs {
				if x.Kind != verify.KindPlanMismatch {
					t.Errorf("finding %+v, want plan_mismatch", x)
				}
			}
		})
	}
}

// TestRecomputePlanSkipsDigestPath pins that --recompute-plan and --deep
// never trust the epoch digests recorded in the plan file: on a clean set
// the digest path would accept both epochs, and with either option it
// accepts none, so every batch is compared with plan.RankBatch.
func TestRecomputePlanSkipsDigestPath(t *testing.T) {
	f := verifytest.Build(t)
	if got := verify.ConformingEpochs(verify.Options{Dir: f.Dir}); !got[0] || !got[1] {
		t.Fatalf("digest path accepts %v on a clean set, want epochs 0 and 1", got)
	}
	for _, o := range []verify.Options{{Dir: f.Dir, RecomputePlan: true}, {Dir: f.Dir, Deep: true}} {
		if got := verify.ConformingEpochs(o); len(got) != 0 {
			t.Errorf("RecomputePlan=%v Deep=%v: digest path accepts %v, want none", o.RecomputePlan, o.Deep, got)
		}
	}
}
