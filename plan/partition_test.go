package plan

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestMixturePartitions: partition keys are read from each file's last
// directory levels, add their canonical lines (another fingerprint; none
// without keys), and bad keys or a file outside the levels are refused.
func TestMixturePartitions(t *testing.T) {
	src := synthSource(rowGroups(10, 5), rowGroups(20, 5), rowGroups(7, 7))
	src.Files[0].Path = "ev/date=2026-11-01/region=eu/a.parquet"
	src.Files[1].Path = "ev/date=2026-11-02/region=us/a.parquet"
	src.Files[2].Path = "other/b.parquet"
	cfg := Config{Seed: 1, Epochs: 1, GlobalBatch: 4, WorldSize: 1, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderPartial}
	mix := func(keys ...PartitionKey) *Mixture {
		return &Mixture{Sources: []MixSource{
			{Name: "ev", Files: []string{src.Files[0].Path, src.Files[1].Path}, Partitions: keys},
			{Name: "other", Files: []string{"other/b.parquet"}},
		}}
	}
	plain := mustMix(t, src, cfg, mix())
	typed := mustMix(t, src, cfg, mix(PartitionKey{"date", "date"}, PartitionKey{"region", "string"}))
	if plain.Fingerprint == typed.Fingerprint {
		t.Error("partition keys do not change the fingerprint")
	}
	want := "source\tev\trows\npartition\tdate\tdate\npartition\tregion\tstring\nfile\tev/date=2026-11-01/region=eu/a.parquet\n"
	if !strings.Contains(typed.Mixture.canonical(), want) || strings.Contains(plain.Mixture.canonical(), "partition") {
		t.Errorf("canonical text:\n%s", typed.Mixture.canonical())
	}
	vals, err := typed.Mixture.Sources[0].PartitionValues(src.Files[1].Path)
	if err != nil || fmt.Sprint(vals) != "[2026-11-02 us]" {
		t.Errorf("values %v %v", vals, err)
	}
	for _, c := range []struct {
		keys []PartitionKey
		want string
	}{
		{[]PartitionKey{{"region", "string"}, {"date", "date"}}, "source ev: file ev/date=2026-11-01/region=eu/a.parquet does not sit under the partition levels region=.../date=.../"},
		{[]PartitionKey{{"date", "datetime"}, {"region", "string"}}, `partition key date has type "datetime"`},
		{[]PartitionKey{{"region", "string"}, {"region", "string"}}, "partition key region is given twice"},
		{[]PartitionKey{{"a=b", "int"}}, `partition key "a=b" is not a key`},
		{[]PartitionKey{{"x", "int"}, {"date", "date"}, {"region", "string"}}, "does not sit under the partition levels x=.../date=.../region=.../"},
	} {
		_, err := NewMixtureContext(context.Background(), src, cfg, mix(c.keys...), nil)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.keys, err, c.want)
		}
	}
}

// TestPartitionValuesUnescaped: a file's partition values are unescaped
// like the plan's (source.HiveLayout): %XX is byte XX, a '%' without two
// hex digits after it stays.
func TestPartitionValuesUnescaped(t *testing.T) {
	ms := &MixSource{Name: "ev", Partitions: []PartitionKey{{"ts", "string"}, {"region", "string"}}}
	vals, err := ms.PartitionValues("ev/ts=2026-11-01 10%3A30%3A00/region=us%2fwest%/a.parquet")
	if err != nil || fmt.Sprintf("%q", vals) != `["2026-11-01 10:30:00" "us/west%"]` {
		t.Errorf("values %q %v", vals, err)
	}
}
