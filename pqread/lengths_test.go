package pqread

import (
	"errors"
	"testing"
)

// TestListLengthsEqualOffsets: the lengths decoded from levels alone
// equal the row lengths of ReadColumn's fully decoded Offsets, on a list
// column of skewed rows over many small pages.
func TestListLengthsEqualOffsets(t *testing.T) {
	f, ci, _ := skewedList(t, 700, true)
	c, err := f.ReadColumn(0, ci)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.ListLengths(0, ci, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != c.Rows {
		t.Fatalf("%d lengths for %d rows", len(got), c.Rows)
	}
	for i := range got {
		if want := c.Offsets[i+1] - c.Offsets[i]; int64(got[i]) != want {
			t.Fatalf("row %d: length %d, want %d", i, got[i], want)
		}
	}
	id, err := f.Lookup("id")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ListLengths(0, id, nil); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("scalar column: %v", err)
	}
}
