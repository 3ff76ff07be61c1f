package feature

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/internal/duckdbtest"
	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/source"
)

// partLayout is a hive-partitioned tree: per file its levels and rows.
var partLayout = []struct {
	dir  string
	rows int
}{
	{"date=2026-11-01/region=eu/shard=1", 23},
	{"date=2026-11-01/region=us/shard=-2", 5},
	{"date=1969-12-30/region=__HIVE_DEFAULT_PARTITION__/shard=7", 11},
	{"date=2026-11-02/region=eu/shard=2147483647", 17},
}

// partTree writes partLayout under a new directory (ids continue across
// files, row groups of 4 rows) and returns it with a plan of one source
// over it, its keys typed date, string and int.
func partTree(t *testing.T) (string, *plan.Plan) {
	t.Helper()
	dir := t.TempDir()
	type row struct {
		ID int64 `parquet:"id"`
	}
	id := int64(0)
	for _, l := range partLayout {
		p := filepath.Join(dir, filepath.FromSlash(l.dir), "part-0.parquet")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		rs := make([]row, l.rows)
		for i := range rs {
			rs[i] = row{ID: id}
			id++
		}
		pqfixture.Of(rs...).RowGroupRows(4).WriteFile(t, p)
	}
	src, err := source.Discover(context.Background(), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range src.Files {
		files = append(files, f.Path)
	}
	mix := &plan.Mixture{Sources: []plan.MixSource{{Name: "ev", Files: files,
		Partitions: []plan.PartitionKey{{Key: "date", Type: "date"}, {Key: "region", Type: "string"}, {Key: "shard", Type: "int"}}}}}
	cfg := plan.Config{Seed: 5, Epochs: 1, GlobalBatch: 8, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPartial}
	p, err := plan.NewMixtureContext(context.Background(), src, cfg, mix, nil)
	if err != nil {
		t.Fatal(err)
	}
	return dir, p
}

const partSpec = `tensors:
  - name: id
    column: id
    dtype: I64
  - name: day
    partition: date
    dtype: I32
  - name: region
    partition: region
    dtype: I64
    bytes: {mode: hash, buckets: 1000}
    nulls: {fill: -1, mask: true}
  - name: shard
    partition: shard
    dtype: I64
  - name: shard32
    partition: shard
    dtype: I32
`

// TestPartitionTensorsMatchDuckDB: every row's partition tensors equal
// DuckDB's hive_partitioning read of the same tree (date as days since
// 1970-01-01, the int key as I64 and I32, the string key hashed by FNV-1a
// (Go's hash/fnv) modulo the buckets, the NULL partition as the fill with
// mask 0), reading whole row groups and in small windows.
func TestPartitionTensorsMatchDuckDB(t *testing.T) {
	duckdbtest.Require(t)
	dir, p := partTree(t)
	spec, err := ParseSpec([]byte(partSpec), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	q := duckdbtest.Query(t, fmt.Sprintf(`SELECT id, date - DATE '1970-01-01', region, shard FROM read_parquet(%s, hive_partitioning = true, hive_types = {'date': DATE, 'region': VARCHAR, 'shard': BIGINT}) ORDER BY id`,
		duckdbtest.Quote(filepath.Join(dir, "**", "*.parquet"))))
	n := uint64(len(q.Rows))
	if n != p.Source.NumSamples() {
		t.Fatalf("DuckDB reads %d rows, the plan %d", n, p.Source.NumSamples())
	}
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = uint64(i)
	}
	for _, memory := range []int64{0, 64} {
		s, err := Materialize(context.Background(), nil, p, spec, ids, Bounds{Memory: memory})
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]int{}
		for i, ti := range s.Tensors {
			names[ti.Name] = i
		}
		i64 := func(name string, i int) int64 { return int64(binary.LittleEndian.Uint64(s.Sample(names[name], i))) }
		i32 := func(name string, i int) int64 {
			return int64(int32(binary.LittleEndian.Uint32(s.Sample(names[name], i))))
		}
		for i := range ids {
			// Sample ids follow the plan's file order (by path); DuckDB's
			// rows are ordered by the id column.
			id := i64("id", i)
			row := q.Rows[id]
			wantRegion, wantMask := int64(-1), byte(0)
			if row[2] != nil {
				h := fnv.New64a()
				h.Write([]byte(row[2].(string)))
				wantRegion, wantMask = int64(h.Sum64()%1000), 1
			}
			shard := duckdbtest.Int64(t, row[3])
			got := []int64{i64("id", i), i32("day", i), i64("region", i), int64(s.Sample(names["region_mask"], i)[0]), i64("shard", i), i32("shard32", i)}
			want := []int64{duckdbtest.Int64(t, row[0]), duckdbtest.Int64(t, row[1]), wantRegion, int64(wantMask), shard, shard}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("memory %d, row %d: got %v, want (DuckDB) %v", memory, i, got, want)
			}
		}
	}
}

// TestPartitionTensorsRefused: a spec naming a key the source lacks, a
// string key without hash mode or an int key with it, a NULL partition
// without a fill, a value beyond I32, and a spec of partition tensors
// only are refused before anything is read, naming the file, key and value.
func TestPartitionTensorsRefused(t *testing.T) {
	_, p := partTree(t)
	for _, c := range []struct{ tensor, want string }{
		{"partition: lang\n    dtype: I64", "partition lang is not a partition key of this file's source (its keys: date, region, shard)"},
		{"partition: region\n    dtype: I64", "partition region is a string key of source ev: give bytes: {mode: hash, buckets: N} with dtype I64"},
		{"partition: shard\n    dtype: I64\n    bytes: {mode: hash, buckets: 10}", "partition shard is an int key of source ev: it is written as I64 or I32, without a bytes policy"},
		{"partition: region\n    dtype: I64\n    bytes: {mode: hash, buckets: 10}", "partition region=__HIVE_DEFAULT_PARTITION__ is NULL (Hive's default partition): set nulls.fill"},
		{"partition: shard\n    dtype: I32\n    nulls: {fill: 3000000000}", "nulls.fill 3000000000 does not fit I32"},
		{"partition: date\n    dtype: F32", "partition date: dtype F32: a partition value is written as I64 or I32"},
		{"partition: region\n    dtype: U8\n    bytes: {mode: pad, max_len: 4}", "dtype U8"},
		{"partition: region\n    dtype: I64\n    bytes: {mode: pad, max_len: 4}", "a string key is hashed: bytes: {mode: hash, buckets: N} with dtype I64 (modes pad and jagged do not apply)"},
		{"partition: date\n    column: id\n    dtype: I64", "set exactly one of column, columns, columns_regex and partition"},
	} {
		spec, err := ParseSpec([]byte("tensors:\n  - name: id\n    column: id\n    dtype: I64\n  - name: x\n    "+c.tensor+"\n"), "spec.yaml")
		if err == nil {
			_, err = Materialize(context.Background(), nil, p, spec, []uint64{0}, Bounds{})
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.tensor, err, c.want)
		}
	}
	spec, err := ParseSpec([]byte("tensors:\n  - name: x\n    partition: shard\n    dtype: I64\n"), "spec.yaml")
	if err == nil {
		_, err = Materialize(context.Background(), nil, p, spec, []uint64{0}, Bounds{})
	}
	if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "every tensor is a partition tensor") {
		t.Errorf("partition tensors only: %v", err)
	}
}

// TestPartitionTensorPlainPlan: a partition tensor over a plan that records
// no partition keys (made with --source, even of a key=value tree) is
// refused saying how to get them (a sources file), not that the files
// are not hive-partitioned.
func TestPartitionTensorPlainPlan(t *testing.T) {
	src := filepath.Join(t.TempDir(), "day=2026-11-01")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	pqfixture.Of(featuretest.ImageRow{ID: 0}, featuretest.ImageRow{ID: 1}).WriteFile(t, filepath.Join(src, "p.parquet"))
	p := featuretest.MakePlan(t, filepath.Dir(src), plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 2, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderPad})
	spec, err := ParseSpec([]byte("tensors:\n  - {name: id, column: id, dtype: I64}\n  - {name: d, partition: day, dtype: I32}\n"), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Materialize(context.Background(), nil, p, spec, []uint64{0}, Bounds{})
	want := "partition day is not a partition key of this file's source (its keys: none: the plan records partition keys only for a source of a sources file"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "prep plan --sources") {
		t.Errorf("error %v, want %q", err, want)
	}
}
