package pqread

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"testing"
)

type memInput []byte

func (m memInput) ReadAt(p []byte, off int64) (int, error) { return bytes.NewReader(m).ReadAt(p, off) }
func (m memInput) Size() int64                             { return int64(len(m)) }

// TestOpenInputReadsAsOpen: the same file through an Input gives the same
// footer, schema and column values as through its path.
func TestOpenInputReadsAsOpen(t *testing.T) {
	path := "../testdata/ml/venomx/embeddings.parquet"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Open(path, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := OpenInput("embeddings.parquet", memInput(data), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if a.FooterSHA256() != b.FooterSHA256() || a.Size() != b.Size() || !reflect.DeepEqual(a.Columns(), b.Columns()) || b.Path() != "embeddings.parquet" {
		t.Fatal("footers differ")
	}
	for _, ci := range a.Columns() {
		if ci.Unsupported != "" {
			continue
		}
		ca, erra := a.ReadColumn(0, ci)
		cb, errb := b.ReadColumn(0, ci)
		if (erra == nil) != (errb == nil) || !reflect.DeepEqual(ca, cb) {
			t.Errorf("%s: columns differ (%v, %v)", ci.Name, erra, errb)
		}
	}
	bad := append([]byte("XXXX"), data[4:]...)
	if _, err := OpenInput("x", memInput(bad), Limits{}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("bad leading magic: %v", err)
	}
}
