package pqread

// DecodedSize under a raised Limits.MaxChunkValues.

import (
	"math"
	"testing"

	"github.com/parquet-go/parquet-go/format"
)

// TestDecodedSizeHostileCountsHighLimit pins a fault: DecodedSize claims
// its counts saturate at Limits.MaxChunkValues "so the sums below cannot
// overflow", but that holds only for the default limit (2^28). A caller
// may raise the limit (convert.Options.Limits is passed to Open as is);
// with MaxChunkValues = MaxInt64, a footer claiming 2^60 values for an
// optional INT64 chunk (10 bytes a value) wraps the estimate negative
// (about -6.9e18), below the estimate for 10 values: the estimate falls
// as the count grows instead of saturating.
func TestDecodedSizeHostileCountsHighLimit(t *testing.T) {
	dict := []int64{1, 2}
	e, _, _, _ := makeEntries(shapeOptional, 10, dict)
	spec := fileSpec{shape: shapeOptional, rows: 10, pages: []pageSpec{{kind: pageKind{false, format.Plain}, entries: e}}}
	prev := int64(0)
	for _, n := range []int64{10, 1 << 40, 1 << 59, 1 << 60, 1 << 61, math.MaxInt64 / 2, math.MaxInt64} {
		f, err := Open(withNumValues(t, spec, n).Path(), Limits{MaxChunkValues: math.MaxInt64})
		if err != nil {
			t.Fatal(err)
		}
		ci, _ := f.Lookup("x")
		got := f.DecodedSize(0, ci)
		f.Close()
		if got < prev {
			t.Errorf("MaxChunkValues MaxInt64, NumValues %d: DecodedSize %d, below %d for fewer values (overflow)", n, got, prev)
		}
		prev = max(prev, got)
	}
}
