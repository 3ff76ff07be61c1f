package gen

import "testing"

// TestZipfLengths pins the Zipf list input: the total count of values (so a
// change of the law is seen) and every length inside 1..ZipfMaxLen.
func TestZipfLengths(t *testing.T) {
	if got := ZipfValues(); got != 5_107_750 {
		t.Errorf("ZipfValues() = %d, want 5107750 (mean 20.78 per row)", got)
	}
	for i := range uint64(ZipfRows) {
		if n := ZipfLen(i); n < 1 || n > ZipfMaxLen {
			t.Fatalf("ZipfLen(%d) = %d, outside 1..%d", i, n, ZipfMaxLen)
		}
	}
}
