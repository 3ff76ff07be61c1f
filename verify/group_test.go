package verify

import (
	"slices"
	"testing"
)

// TestGroupSourceFindings: the per-batch findings a changed source file
// causes are one finding per file with their count (folded into the file's
// source_changed finding, or standing alone when there is none); other
// per-batch findings stay one per batch.
func TestGroupSourceFindings(t *testing.T) {
	changedA := "a.parquet: source changed since the plan was made: footer sha256 22, plan has 11"
	changedB := "sub/b.parquet: source changed since the plan was made: size 9, plan has 10"
	other := "c.parquet: column \"x\", row group 0: corrupt page"
	batch := func(shard string, k int, msg string) Finding {
		return Finding{Kind: KindSourceUnreadable, Shard: shard, Batch: intp(k), Message: msg}
	}
	in := []Finding{
		{Kind: KindSourceChanged, Shard: "/data/a.parquet", What: "footer sha256", Expected: "11", Actual: "22", Message: "source file changed since the plan was made"},
		batch("epoch-00000/rank-00000.shard", 0, changedA),
		batch("epoch-00000/rank-00000.shard", 1, changedA),
		batch("epoch-00000/rank-00001.shard", 0, changedA),
		batch("epoch-00000/rank-00000.shard", 2, changedB),
		batch("epoch-00000/rank-00001.shard", 1, changedB),
		batch("epoch-00000/rank-00001.shard", 2, other),
		batch("epoch-00000/rank-00001.shard", 3, other),
	}
	got := groupSourceFindings(in)
	var lines []string
	for _, f := range got {
		lines = append(lines, f.String())
	}
	want := []string{
		"/data/a.parquet: source_changed: source file changed since the plan was made; 3 batches in 2 shards read from it were not compared (expected footer sha256 11, actual footer sha256 22)",
		"source_unreadable: 2 batches in 2 shards not compared with the source: " + changedB,
		"epoch-00000/rank-00001.shard: source_unreadable: batch 2: " + other,
		"epoch-00000/rank-00001.shard: source_unreadable: batch 3: " + other,
	}
	if !slices.Equal(lines, want) {
		t.Errorf("got\n%q\nwant\n%q", lines, want)
	}
}
