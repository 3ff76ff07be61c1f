package main

import "testing"

// TestCount pins count's plurals: "ch" takes "es" except where it sounds
// like k, the nouns prep prints among them ("2 epoches" was printed).
func TestCount(t *testing.T) {
	for _, c := range []struct {
		n    int
		noun string
		want string
	}{
		{1, "epoch", "1 epoch"},
		{2, "epoch", "2 epochs"},
		{0, "epoch", "0 epochs"},
		{2, "batch", "2 batches"},
		{3, "match", "3 matches"},
		{2, "stomach", "2 stomachs"},
		{2, "monarch", "2 monarchs"},
		{2, "row group", "2 row groups"},
		{2, "non-empty row group", "2 non-empty row groups"},
		{1, "row group", "1 row group"},
		{2, "shard", "2 shards"},
		{2, "index", "2 indexes"},
		{2, "bus", "2 buses"},
		{2, "mesh", "2 meshes"},
		{2, "byte", "2 bytes"},
		{2, "output window", "2 output windows"},
	} {
		if got := count(c.n, c.noun); got != c.want {
			t.Errorf("count(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
	if got := count(uint32(2), "step"); got != "2 steps" {
		t.Errorf("count(uint32(2), step) = %q", got)
	}
}
