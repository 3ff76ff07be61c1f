package pqread

// DecodedSize under hostile value counts.

import (
	"math"
	"testing"

	"github.com/parquet-go/parquet-go/format"
)

// TestDecodedSizeHostileCounts pins a fault: DecodedSize multiplied the
// footer's value count without bounds, so a footer claiming 2^60 values
// for an optional INT64 chunk (10 bytes a value: value and definition
// level and validity) wrapped the estimate negative (about -6.9e18), one
// claiming MaxInt64 gave -10, estimates convert's admission against
// Options.MemoryLimit took as small costs; capping at MaxChunkValues alone
// held only for the default limit (convert passes Options.Limits to Open
// as is). The estimate is now exactly 10 bytes per entry up to the entries
// a chunk may hold: MaxChunkValues, and 2^40 whatever the limit.
func TestDecodedSizeHostileCounts(t *testing.T) {
	e, _, _, _ := makeEntries(shapeOptional, 10, []int64{1, 2})
	spec := fileSpec{shape: shapeOptional, rows: 10, pages: []pageSpec{{kind: pageKind{false, format.Plain}, entries: e}}}
	for _, lim := range []int64{0, math.MaxInt64} {
		most := min(int64(1)<<40, Limits{MaxChunkValues: lim}.withDefaults().MaxChunkValues)
		for _, n := range []int64{10, 1 << 40, 1 << 59, 1 << 60, 1 << 61, math.MaxInt64 / 2, math.MaxInt64} {
			f, err := Open(withNumValues(t, spec, n).Path(), Limits{MaxChunkValues: lim})
			if err != nil {
				t.Fatal(err)
			}
			ci, _ := f.Lookup("x")
			if got, want := f.DecodedSize(0, ci), 10*min(n, most); got != want {
				t.Errorf("MaxChunkValues %d, NumValues %d: DecodedSize %d, want %d", lim, n, got, want)
			}
			f.Close()
		}
	}
}
