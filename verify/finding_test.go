package verify

import (
	"context"
	"strings"
	"testing"

	"github.com/prepml/prep/plan"
)

// TestNameSources: in a plan with a mixture, a finding's sample is named
// by its source (ids 0..9 are a.parquet of source "a", 10..14 b.parquet of
// "b"); without a mixture nothing is added.
func TestNameSources(t *testing.T) {
	src := plan.Source{Files: []plan.SourceFile{
		{Path: "a.parquet", Size: 100, FooterSHA256: strings.Repeat("1", 64), RowGroups: []int64{10}},
		{Path: "b.parquet", Size: 100, FooterSHA256: strings.Repeat("2", 64), RowGroups: []int64{5}},
	}}
	cfg := plan.Config{Epochs: 1, GlobalBatch: 3, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderDrop}
	mix := &plan.Mixture{Sources: []plan.MixSource{{Name: "a", Files: []string{"a.parquet"}}, {Name: "b", Weight: "1", Files: []string{"b.parquet"}}}}
	p, err := plan.NewMixtureContext(context.Background(), src, cfg, mix, nil)
	if err != nil {
		t.Fatal(err)
	}
	fs := []Finding{{Kind: KindValueMismatch, SampleID: u64p(9)}, {Kind: KindValueMismatch, SampleID: u64p(10)}, {Kind: KindBatchChecksum}}
	nameSources(p, fs)
	if fs[0].Source != "a" || fs[1].Source != "b" || fs[2].Source != "" {
		t.Errorf("sources %q %q %q", fs[0].Source, fs[1].Source, fs[2].Source)
	}
	if s := fs[1].String(); !strings.Contains(s, "sample 10 (source b)") {
		t.Errorf("String() = %q", s)
	}
	one, err := plan.New(src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	fs[0].Source = ""
	nameSources(one, fs[:1])
	if fs[0].Source != "" {
		t.Errorf("plan without a mixture named source %q", fs[0].Source)
	}
}
