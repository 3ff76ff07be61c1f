package shardset

import "testing"

func TestParseShardPath(t *testing.T) {
	for _, tc := range []struct {
		in          string
		epoch, rank int
		ok          bool
	}{
		{"epoch-00003/rank-00012.shard", 3, 12, true},
		{"epoch-00003/rank-00012.shard.tmp-123", 3, 12, true},
		{"epoch-00003/.rank-00012.shard.tmp", 3, 12, true},
		{"epoch-00003/rank-00012.shard.partial", 3, 12, true},
		{"epoch-123456/rank-00000.shard", 123456, 0, true},
		{"epoch-3/rank-12.shard", 0, 0, false},
		{"epoch-00003/rank-00012.bin", 0, 0, false},
		{"manifest.json", 0, 0, false},
	} {
		e, r, ok := ParseShardPath(tc.in)
		if e != tc.epoch || r != tc.rank || ok != tc.ok {
			t.Errorf("ParseShardPath(%q) = %d, %d, %v; want %d, %d, %v", tc.in, e, r, ok, tc.epoch, tc.rank, tc.ok)
		}
	}
	if got := ShardPath(3, 12); got != "epoch-00003/rank-00012.shard" {
		t.Errorf("ShardPath = %q", got)
	}
}

func TestParseEpochDir(t *testing.T) {
	for in, want := range map[string]int{"epoch-00000": 0, "epoch-00042": 42, "epoch-123456": 123456, "epoch-42": -1, "epoch--0001": -1, "epochs": -1, "epoch-00001/": -1} {
		e, ok := ParseEpochDir(in)
		if ok != (want >= 0) || ok && e != want {
			t.Errorf("ParseEpochDir(%q) = %d, %v; want %d", in, e, ok, want)
		}
	}
	if got := EpochDir(7); got != "epoch-00007" {
		t.Errorf("EpochDir(7) = %q", got)
	}
}
