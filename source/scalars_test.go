package source

import (
	"testing"

	"github.com/prepml/prep/pqread"
)

// TestBoundStatsDistrustsAllFFMaximum checks that a STRING maximum of only
// 0xFF bytes (what a writer stores when it truncates a longer value whose
// prefix it cannot round up) is not taken as a bound, while other string
// and integer statistics are.
func TestBoundStatsDistrustsAllFFMaximum(t *testing.T) {
	str := pqread.ColumnInfo{Name: "s", Kind: pqread.KindBytes, Logical: "STRING"}
	cases := []struct {
		name     string
		min, max string
		want     bool
	}{
		{"plain bounds", "apple", "pear", true},
		{"maximum of 0xFF bytes, maybe truncated", "apple", "\xff\xff\xff\xff", false},
		{"one 0xFF byte", "", "\xff", false},
		{"0xFF after other bytes is a bound", "apple", "z\xff", true},
		{"empty maximum (every value empty)", "", "", true},
	}
	for _, c := range cases {
		st := boundStats(str, pqread.ChunkStats{Min: []byte(c.min), Max: []byte(c.max)})
		if st.MinMax != c.want {
			t.Errorf("%s: MinMax = %v, want %v", c.name, st.MinMax, c.want)
		}
		if c.want && (string(st.MinStr) != c.min || string(st.MaxStr) != c.max) {
			t.Errorf("%s: bounds [%q, %q], want [%q, %q]", c.name, st.MinStr, st.MaxStr, c.min, c.max)
		}
	}
}
