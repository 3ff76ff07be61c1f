package shardfmt

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestTablesSurviveTruncationAfterOpen pins that the batch table and the
// metadata, read and checked at Open, are the Reader's own copies: a reader
// that gets a short read on a block (the shard was cut short while in use)
// and then looks up that batch's entry to report it must get the entry, not
// a SIGBUS from the mapping. prep load died this way before.
func TestTablesSurviveTruncationAfterOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.shard")
	writeShard(t, path, testOpts(5, 8), nil, nil, 2)
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.Mapped() {
		t.Skip("not mapped on this platform")
	}
	want := make([]BatchInfo, r.NumBatches())
	for k := range want {
		if want[k], err = r.Batch(k); err != nil {
			t.Fatal(err)
		}
	}
	meta := bytes.Clone(r.Metadata())
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, r.Geometry().BlockSize)
	for k := range want {
		if err := r.ReadBlock(k, buf); !errors.Is(err, ErrSize) {
			t.Errorf("ReadBlock(%d) after truncation = %v, want ErrSize", k, err)
		}
		got, err := r.Batch(k)
		if err != nil || got != want[k] {
			t.Errorf("Batch(%d) after truncation = %+v, %v; want %+v", k, got, err, want[k])
		}
	}
	if !bytes.Equal(r.Metadata(), meta) {
		t.Errorf("metadata changed after truncation")
	}
}
