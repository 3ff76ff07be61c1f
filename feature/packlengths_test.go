package feature

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/internal/duckdbtest"
	"github.com/prepml/prep/source"
)

// TestTokenLengthsMatchDuckDB: the lengths read from levels alone equal
// DuckDB's len(tokens) (0 for null) for every row, in sample id order
// (files by path, rows in order).
func TestTokenLengthsMatchDuckDB(t *testing.T) {
	dir := featuretest.TokenFiles(t, 1200)
	src, err := source.Discover(context.Background(), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	got, err := TokenLengths(context.Background(), nil, src, "tokens", 2)
	if err != nil {
		t.Fatal(err)
	}
	res := duckdbtest.Query(t, fmt.Sprintf(`SELECT coalesce(len(tokens), 0) AS n FROM read_parquet(%s, filename = true, file_row_number = true) ORDER BY filename, file_row_number`,
		duckdbtest.Quote(filepath.Join(dir, "*.parquet"))))
	var want []uint32
	for _, r := range res.Rows {
		want = append(want, uint32(duckdbtest.Int64(t, r[0])))
	}
	if len(want) != 1200 || !slices.Equal(got, want) {
		t.Fatalf("lengths differ from DuckDB's (%d and %d rows)", len(got), len(want))
	}
}

func TestTokenLengthsErrors(t *testing.T) {
	dir := featuretest.TokenFiles(t, 90)
	src, err := source.Discover(context.Background(), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, col := range []string{"id", "missing"} {
		_, err := TokenLengths(context.Background(), nil, src, col, 1)
		var ce *Error
		if !errors.As(err, &ce) || !errors.Is(err, ErrSchema) || ce.Column != col || ce.File != "a.parquet" {
			t.Errorf("column %s: %v", col, err)
		}
	}
	// A file changed after discovery is refused as changed.
	if err := os.Truncate(filepath.Join(dir, "b.parquet"), 100); err != nil {
		t.Fatal(err)
	}
	var ch *source.ChangedError
	if _, err := TokenLengths(context.Background(), nil, src, "tokens", 1); !errors.As(err, &ch) {
		t.Errorf("changed file: %v", err)
	}
}
