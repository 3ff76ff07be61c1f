package feature

import "testing"

// TestMemSinkAssemblesInPlace: a block's records are the staging records
// themselves, its runs' slots made absolute, and nothing is left to hand
// over.
func TestMemSinkAssemblesInPlace(t *testing.T) {
	recs := &Records{Data: make([]byte, 10*8), Rec: 8, Off: []int{0}, Size: []int{8}}
	var s RecordSink = memSink{recs}
	blk := []RowRun{{Lo: 0, Hi: 2, Dst: 0}, {Lo: 5, Hi: 6, Dst: 2}}
	got, scratch := s.Block(blk, 4, 3, nil)
	if !s.InPlace() || got != recs || scratch != nil {
		t.Fatalf("block = %p, scratch %d bytes; want the staging records %p and no scratch", got, len(scratch), recs)
	}
	if blk[0].Dst != 4 || blk[1].Dst != 6 {
		t.Fatalf("slots %d, %d; want 4, 6", blk[0].Dst, blk[1].Dst)
	}
	if err := s.Put(0, blk, got); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
}
