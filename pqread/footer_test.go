package pqread

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// TestRowGroupRowsRejectsHostileCounts feeds footers whose list counts
// claim more elements than bytes are left, or that are cut short, nest too
// deep or lack row groups; they must fail with ErrCorrupt without a large
// allocation.
func TestRowGroupRowsRejectsHostileCounts(t *testing.T) {
	for name, b := range map[string][]byte{
		"row groups count 2^31": {0x36, 0x00, 0x19, 0xfc, 0xff, 0xff, 0xff, 0xff, 0x07},
		"empty":                 {},
		"truncated varint":      {0x36, 0x80},
		"binary past end":       {0x18, 0x10, 'a'},
		"deep nesting":          append(bytes.Repeat([]byte{0x1c}, 200), 0),
		"no row groups":         {0x36, 0x00, 0x00},
		"type 0 field":          {0x30, 0x00},
	} {
		if _, err := (&Footer{Meta: b}).RowGroupRows(); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	// num_rows 3 (zigzag 6), row_groups [ {num_rows 3} ].
	good := []byte{0x36, 0x06, 0x19, 0x1c, 0x36, 0x06, 0x00, 0x00}
	if rgs, err := (&Footer{Meta: good}).RowGroupRows(); err != nil || !slices.Equal(rgs, []int64{3}) {
		t.Errorf("minimal footer: %v %v", rgs, err)
	}
}

// TestRowGroupRowsMatchesOpen: on real files the walk gives the row counts
// the full footer decode gives, and File.FooterSHA256 is the hash of the
// file's last len+8 bytes.
func TestRowGroupRowsMatchesOpen(t *testing.T) {
	for _, name := range []string{"B19-corrupt-files/good.parquet", "B29-order-stability/part-0.parquet", "B17-empty-files/part-1.parquet"} {
		path := filepath.Join("..", "testdata", "cases", name)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		ft, err := ReadFooter(f, 0)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		rgs, err := ft.RowGroupRows()
		if err != nil {
			t.Fatal(err)
		}
		pf, err := Open(path, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if want := pf.RowGroups(); !slices.Equal(rgs, want) {
			t.Errorf("%s: walk %v, decoded footer %v", name, rgs, want)
		}
		// The footer hash of the opened file: the last len+8 bytes.
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		n := int(binary.LittleEndian.Uint32(b[len(b)-8:])) + 8
		if want := fmt.Sprintf("%x", sha256.Sum256(b[len(b)-n:])); pf.FooterSHA256() != want {
			t.Errorf("%s: FooterSHA256 %s, want %s", name, pf.FooterSHA256(), want)
		}
		pf.Close()
	}
}

func FuzzRowGroupRows(f *testing.F) {
	for _, name := range []string{"B19-corrupt-files/good.parquet", "B17-empty-files/part-1.parquet", "B29-order-stability/part-0.parquet"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "cases", name))
		if err != nil {
			f.Fatal(err)
		}
		n := binary.LittleEndian.Uint32(b[len(b)-8:])
		f.Add(b[len(b)-8-int(n) : len(b)-8])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rgs, err := (&Footer{Meta: b}).RowGroupRows()
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if len(rgs) > len(b) {
			t.Fatalf("%d row groups from %d bytes", len(rgs), len(b))
		}
		for _, r := range rgs {
			if r < 0 {
				t.Fatalf("negative row count %d", r)
			}
		}
	})
}

type sizeRow struct {
	ID  int64     `parquet:"id"`
	Opt *int32    `parquet:"opt,optional"`
	Emb []float32 `parquet:"emb,list"`
	S   string    `parquet:"s"`
}

// TestDecodedSize checks the footer estimate of decoded sizes against the
// counts of a file written for it: 1,000 rows of a required INT64, an
// optional INT32, a list of 3 floats per row and a string (whose
// uncompressed size is read from the footer with parquet-go).
func TestDecodedSize(t *testing.T) {
	const rows = 1000
	data := make([]sizeRow, rows)
	for i := range data {
		v := int32(i)
		data[i] = sizeRow{ID: int64(i), Opt: &v, Emb: []float32{1, 2, 3}, S: fmt.Sprint(i)}
	}
	path := writeParquet(t, data)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	sUncompressed := pf.Metadata().RowGroups[0].Columns[3].MetaData.TotalUncompressedSize
	f := mustOpen(t, path)
	for name, want := range map[string]int64{
		"id":  8 * rows,
		"opt": 4*rows + 2*rows,
		"emb": 4*3*rows + 2*3*rows + 3*rows + 8*rows,
		"s":   sUncompressed + 8*rows,
	} {
		ci, err := f.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.DecodedSize(0, ci); got != want {
			t.Errorf("%s: DecodedSize %d, want %d", name, got, want)
		}
	}
	if got := f.DecodedSize(1, f.Columns()[0]); got != 0 {
		t.Errorf("row group out of range: %d", got)
	}
}
