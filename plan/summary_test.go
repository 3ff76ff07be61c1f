package plan

import (
	"reflect"
	"strings"
	"testing"
)

// TestSummarize checks the three things prep plan reports: why a plan has
// no steps, which paths are one file, and which (rank, worker) pairs idle.
func TestSummarize(t *testing.T) {
	cfg := Config{Epochs: 1, GlobalBatch: 4, WorldSize: 2, Workers: 3, Shuffle: ShuffleGlobal, Remainder: RemainderDrop}
	src := synthSource([]int64{5}, []int64{3}, []int64{2})
	// Files 0 and 2 look alike (size, footer) and are one file.
	src.Files[2].Size, src.Files[2].FooterSHA256 = src.Files[0].Size, src.Files[0].FooterSHA256
	p, err := New(src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var asked [][2]string
	s, err := Summarize(p, func(a, b string) bool { asked = append(asked, [2]string{a, b}); return true })
	if err != nil {
		t.Fatal(err)
	}
	if s.NoSteps != "" {
		t.Errorf("NoSteps %q", s.NoSteps)
	}
	if want := [][]string{{"part-000.parquet", "part-002.parquet"}}; !reflect.DeepEqual(s.SameFiles, want) {
		t.Errorf("SameFiles %v, want %v", s.SameFiles, want)
	}
	if want := [][2]string{{"part-000.parquet", "part-002.parquet"}}; !reflect.DeepEqual(asked, want) {
		t.Errorf("sameFile asked about %v, want only the look-alike pair", asked)
	}
	// 10 samples, G 4, drop: 2 steps, so worker 2 of each rank idles.
	if want := []RankWorker{{0, 2}, {1, 2}}; !reflect.DeepEqual(s.IdlePairs, want) {
		t.Errorf("IdlePairs %v, want %v", s.IdlePairs, want)
	}

	cfg.GlobalBatch = 16
	p, err = New(src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, _ = Summarize(p, nil)
	if want := "the plan has no steps: 10 samples with global batch 16, shuffle global and remainder drop"; !strings.HasPrefix(s.NoSteps, want) || len(s.IdlePairs) != 0 || len(s.SameFiles) != 0 {
		t.Errorf("no steps: %+v", s)
	}
	cfg.GlobalBatch, cfg.WorldSize, cfg.Shuffle = 4, 4, ShufflePartitioned
	p, err = New(src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, _ = Summarize(p, nil)
	if want := "the plan has no steps: partitioned mode gives rank 3 no row group (3 row groups for world size 4)"; !strings.HasPrefix(s.NoSteps, want) {
		t.Errorf("partitioned: %q", s.NoSteps)
	}
}
