package gen

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"
)

func readAll[T any](t *testing.T, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := parquet.NewGenericReader[T](f)
	defer r.Close()
	out := make([]T, r.NumRows())
	n, err := r.Read(out)
	if err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return out[:n]
}

// TestWriteRequiredValues reads a generated Required file back and checks
// every value against the generator's functions.
func TestWriteRequiredValues(t *testing.T) {
	p := filepath.Join(t.TempDir(), "r.parquet")
	const first, n = 1000, 3000
	if err := Write(p, Variant{Name: "r", Codec: "snappy"}, first, n); err != nil {
		t.Fatal(err)
	}
	rows := readAll[ReqRow](t, p)
	if len(rows) != n {
		t.Fatalf("read %d rows, want %d", len(rows), n)
	}
	for r, row := range rows {
		i := uint64(first + r)
		if row.ID != int64(i) || row.Label != Label(i) || len(row.Emb) != EmbLen {
			t.Fatalf("row %d: id %d label %q emb len %d", r, row.ID, row.Label, len(row.Emb))
		}
		fs := []float32{row.F0, row.F1, row.F2, row.F3, row.F4, row.F5, row.F6, row.F7}
		for j, v := range fs {
			if v != Feature(i, j) {
				t.Fatalf("row %d f%d = %v, want %v", r, j, v, Feature(i, j))
			}
		}
		for k, v := range row.Emb {
			if v != Emb(i, k) {
				t.Fatalf("row %d emb[%d] = %v, want %v", r, k, v, Emb(i, k))
			}
		}
	}
}

// TestWriteOptionalNulls checks the Optional layout's null pattern and values.
func TestWriteOptionalNulls(t *testing.T) {
	p := filepath.Join(t.TempDir(), "o.parquet")
	const n = 5000
	if err := Write(p, Variant{Name: "o", Optional: true, Codec: "zstd"}, 0, n); err != nil {
		t.Fatal(err)
	}
	rows := readAll[OptRow](t, p)
	if len(rows) != n {
		t.Fatalf("read %d rows, want %d", len(rows), n)
	}
	nulls := 0
	for r, row := range rows {
		i := uint64(r)
		if row.ID == nil || *row.ID != int64(i) || row.Label == nil || *row.Label != Label(i) {
			t.Fatalf("row %d: bad id or label", r)
		}
		fs := []*float32{row.F0, row.F1, row.F2, row.F3, row.F4, row.F5, row.F6, row.F7}
		for j, v := range fs {
			if FeatureNull(i, j) {
				nulls++
				if v != nil {
					t.Fatalf("row %d f%d = %v, want null", r, j, *v)
				}
				continue
			}
			if v == nil || *v != Feature(i, j) {
				t.Fatalf("row %d f%d: got %v, want %v", r, j, v, Feature(i, j))
			}
		}
	}
	// 1 % of 40,000 feature values, within a loose band.
	if nulls < 250 || nulls > 550 {
		t.Fatalf("%d nulls among %d feature values, want about 1 %%", nulls, n*8)
	}
}

// TestWriteDeterministic pins that the same rows give the same bytes.
func TestWriteDeterministic(t *testing.T) {
	dir := t.TempDir()
	v := Variant{Name: "d", Optional: true, Codec: "snappy"}
	a, b := filepath.Join(dir, "a.parquet"), filepath.Join(dir, "b.parquet")
	for _, p := range []string{a, b} {
		if err := Write(p, v, 0, 2000); err != nil {
			t.Fatal(err)
		}
	}
	x, _ := os.ReadFile(a)
	y, _ := os.ReadFile(b)
	if len(x) == 0 || !bytes.Equal(x, y) {
		t.Fatalf("two writes differ (%d vs %d bytes)", len(x), len(y))
	}
}

// TestValueRanges checks the documented ranges of generated values.
func TestValueRanges(t *testing.T) {
	for i := range uint64(10000) {
		for j := range 8 {
			if f := Feature(i, j); f < -64 || f >= 64 || f*64 != float32(int32(f*64)) {
				t.Fatalf("Feature(%d,%d) = %v outside [-64,64) or not a multiple of 1/64", i, j, f)
			}
		}
		for k := range EmbLen {
			if e := Emb(i, k); e < -1 || e >= 1 {
				t.Fatalf("Emb(%d,%d) = %v outside [-1,1)", i, k, e)
			}
		}
	}
	if Label(0) == "" || len(Label(12345)) != len("class-0000") {
		t.Fatalf("bad label %q", Label(12345))
	}
}
