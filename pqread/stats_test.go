package pqread

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// TestStatsNeedColumnOrder: a file whose footer gives no column_orders
// (the same bytes, the footer re-encoded without them) has no usable
// bounds, neither in its chunk statistics nor in its page index, since
// the format leaves min_value and max_value undefined then; with them,
// the writer's bounds are read.
func TestStatsNeedColumnOrder(t *testing.T) {
	path := writePaged(t)
	f := mustOpen(t, path)
	ci, err := f.Lookup("id")
	if err != nil {
		t.Fatal(err)
	}
	if st := f.Stats(0, ci); len(st.Min) != 8 || binary.LittleEndian.Uint64(st.Min) != 0 || binary.LittleEndian.Uint64(st.Max) != 699 {
		t.Fatalf("id statistics %x..%x, want 0..699", st.Min, st.Max)
	}
	ix, err := f.PageIndex(0, ci)
	if err != nil || ix.Min[0] == nil {
		t.Fatalf("id page index %v, %v: want bounds", ix, err)
	}

	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint32(raw[len(raw)-8:])
	body := raw[:len(raw)-8-int(n)]
	var md format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), raw[len(body):len(raw)-8], &md); err != nil {
		t.Fatal(err)
	}
	if len(md.ColumnOrders) == 0 {
		t.Fatal("the writer gave no column orders: the test needs them")
	}
	md.ColumnOrders = nil
	meta, err := thrift.Marshal(new(thrift.CompactProtocol), &md)
	if err != nil {
		t.Fatal(err)
	}
	out := append(append([]byte{}, body...), meta...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(meta)))
	out = append(out, "PAR1"...)
	noOrders := filepath.Join(t.TempDir(), "noorders.parquet")
	if err := os.WriteFile(noOrders, out, 0o644); err != nil {
		t.Fatal(err)
	}
	g := mustOpen(t, noOrders)
	if st := g.Stats(0, ci); st.Min != nil || st.Max != nil {
		t.Errorf("without column orders: statistics %x..%x, want none", st.Min, st.Max)
	}
	gix, err := g.PageIndex(0, ci)
	if err != nil {
		t.Fatal(err)
	}
	for k := range gix.Pages() {
		if gix.Min[k] != nil || gix.Max[k] != nil {
			t.Fatalf("without column orders: page %d bounds %x..%x, want none", k, gix.Min[k], gix.Max[k])
		}
	}
	if got, want := render(mustRead(t, g, "id", 0), 0, 700), render(mustRead(t, f, "id", 0), 0, 700); got != want {
		t.Error("values differ from the original file's")
	}
}
