package describe_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/prepml/prep/describe"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/verify/verifytest"
)

// cell returns the shard set table cell of manifest shard i.
func cell(t *testing.T, f *verifytest.Fixture, v *describe.SetView, i int) describe.SetCell {
	t.Helper()
	s := f.Man.Shards[i]
	for ei, e := range v.Epochs {
		for ri, r := range v.Ranks {
			if e == s.Epoch && r == s.Rank {
				return v.Cells[ei][ri]
			}
		}
	}
	t.Fatalf("no cell for epoch %d rank %d", s.Epoch, s.Rank)
	return describe.SetCell{}
}

// TestInspectSetFlagsSwappedShards pins the fault where prep inspect showed
// "ok" for two shard files swapped between ranks (each opens cleanly but
// holds the other rank's samples).
func TestInspectSetFlagsSwappedShards(t *testing.T) {
	f := verifytest.Build(t)
	a, b := f.ShardPath(0), f.ShardPath(1)
	tmp := a + ".swap"
	for _, mv := range [][2]string{{a, tmp}, {b, a}, {tmp, b}} {
		if err := os.Rename(mv[0], mv[1]); err != nil {
			t.Fatal(err)
		}
	}
	in, err := describe.Inspect(f.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"shard holds epoch 0 rank 1 (renamed or swapped file)", "shard holds epoch 0 rank 0 (renamed or swapped file)"} {
		if c := cell(t, f, in.Set, i); c.Status != "invalid" || c.Detail != want {
			t.Errorf("shard %d: status %q detail %q; want invalid, %q", i, c.Status, c.Detail, want)
		}
	}
	if c := cell(t, f, in.Set, 2); c.Status != "ok" {
		t.Errorf("untouched shard 2: status %q (%s)", c.Status, c.Detail)
	}
}

// TestInspectSetFlagsDirectoryInPlaceOfShard pins the fault where a
// directory in place of a shard was reported as "size_mismatch ... actual
// size 4096" (the directory's size).
func TestInspectSetFlagsDirectoryInPlaceOfShard(t *testing.T) {
	f := verifytest.Build(t)
	p := f.ShardPath(0)
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := describe.Inspect(f.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if c := cell(t, f, in.Set, 0); c.Status != "invalid" || c.Detail != "not a regular file (d---------)" {
		t.Errorf("status %q detail %q; want invalid, not a regular file", c.Status, c.Detail)
	}
}

// TestInspectSetRefusesManifestPathOutsideSet: an entry edited to point
// outside the set is reported as an invalid manifest, not as "not a shard
// set", and nothing outside the set is opened.
func TestInspectSetRefusesManifestPathOutsideSet(t *testing.T) {
	f := verifytest.Build(t)
	m := *f.Man
	m.Shards = append([]shardfmt.ShardEntry(nil), f.Man.Shards...)
	m.Shards[0].Path = "../outside.shard"
	if err := shardfmt.WriteManifest(f.Dir, &m); err != nil {
		t.Fatal(err)
	}
	_, err := describe.Inspect(f.Dir)
	if !errors.Is(err, shardfmt.ErrManifest) || errors.Is(err, describe.ErrUnknownKind) || !strings.Contains(err.Error(), `"../outside.shard"`) {
		t.Errorf("Inspect = %v; want shardfmt.ErrManifest naming the entry", err)
	}
	if _, err := describe.Inspect(filepath.Join(f.Dir, shardfmt.ManifestName)); !errors.Is(err, shardfmt.ErrManifest) {
		t.Errorf("Inspect(manifest.json) = %v; want shardfmt.ErrManifest", err)
	}
}

// TestInspectParquetListsColumns: prep inspect FILE.parquet gives the names
// a feature spec's column keys take, with physical and logical types and
// nullability, from the bundled venomx file (pyarrow 15).
func TestInspectParquetListsColumns(t *testing.T) {
	in, err := describe.Inspect(filepath.Join("..", "testdata", "ml", "venomx", "embeddings.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if in.Kind != describe.InspectParquet || in.Parquet.Rows != 100 || in.Parquet.RowGroups != 1 || in.Parquet.Size != 33154 {
		t.Fatalf("kind %q view %+v", in.Kind, in.Parquet)
	}
	want := []describe.ParquetColumn{
		{Name: "id", Physical: "INT32", Nullable: true},
		{Name: "name", Physical: "BYTE_ARRAY", Logical: "STRING", Nullable: true},
		{Name: "embedding", Physical: "FLOAT", Nullable: true, List: true, ElemNullable: true, Depth: 1},
		{Name: "metadata.key", Physical: "BYTE_ARRAY", Logical: "STRING", Nullable: true, List: true, Depth: 1, Group: "metadata", MapRole: "key"},
		{Name: "metadata.value", Physical: "BYTE_ARRAY", Logical: "STRING", Nullable: true, List: true, ElemNullable: true, Depth: 1, Group: "metadata", MapRole: "value"},
	}
	if !reflect.DeepEqual(in.Parquet.Columns, want) {
		t.Errorf("columns\n%+v\nwant\n%+v", in.Parquet.Columns, want)
	}
}
