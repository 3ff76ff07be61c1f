package selection

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestEvalVecEqualsRowRandom: over random columns (nulls, NaN, -0, equal
// and unequal strings of every length up to 3), every comparison operator
// of a column with a literal, and AND, OR and NOT of them, the vectorised
// evaluation gives evalRow's value (SQL three-valued logic, DuckDB's float
// order) at every row; so does the evaluation of the same strings in
// dictionary form, row by row and vectorised, and one Evaluator reused
// over windows of several sizes.
func TestEvalVecEqualsRowRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 26))
	const rows = 500
	floats := []float64{math.NaN(), 0, math.Copysign(0, -1), 0.5, -1, 1e300, math.Inf(1), math.Inf(-1)}
	words := []string{"", "a", "b", "ab", "ba", "abc", "en", "fr", "e"}
	var lang, quality, n Vector
	lang.Offsets = []int64{0}
	for i := 0; i < rows; i++ {
		lang.Data = append(lang.Data, words[rng.IntN(len(words))]...)
		lang.Offsets = append(lang.Offsets, int64(len(lang.Data)))
		quality.Floats = append(quality.Floats, floats[rng.IntN(len(floats))])
		n.Ints = append(n.Ints, int64(rng.IntN(7)-3))
	}
	for _, v := range []*Vector{&lang, &quality} {
		for i := 0; i < rows; i++ {
			v.Valid = append(v.Valid, rng.IntN(5) != 0)
		}
	}
	// The same strings in dictionary form: entries in an order of their
	// own, one unused, null rows at index 0.
	dict := Vector{Valid: lang.Valid, DictOffsets: []int64{0}}
	entry := map[string]uint32{}
	for _, w := range append([]string{"zz"}, words[3:]...) {
		entry[w] = uint32(len(dict.DictOffsets) - 1)
		dict.DictData = append(dict.DictData, w...)
		dict.DictOffsets = append(dict.DictOffsets, int64(len(dict.DictData)))
	}
	for _, w := range words[:3] {
		entry[w] = uint32(len(dict.DictOffsets) - 1)
		dict.DictData = append(dict.DictData, w...)
		dict.DictOffsets = append(dict.DictOffsets, int64(len(dict.DictData)))
	}
	for i := 0; i < rows; i++ {
		e := entry[string(lang.Data[lang.Offsets[i]:lang.Offsets[i+1]])]
		if !lang.Valid[i] {
			e = 0
		}
		dict.DictIndex = append(dict.DictIndex, e)
	}
	byName := map[string]Vector{"lang": lang, "quality": quality, "n": n}
	cs := []Column{{Name: "lang", Type: String}, {Name: "quality", Type: Float}, {Name: "n", Type: Int}}
	var preds []string
	for _, op := range []string{"=", "!=", "<>", "<", "<=", ">", ">="} {
		preds = append(preds, fmt.Sprintf("lang %s 'ab'", op), fmt.Sprintf("lang %s ''", op), fmt.Sprintf("lang %s 'en'", op),
			fmt.Sprintf("quality %s 0", op), fmt.Sprintf("quality %s 0.5", op), fmt.Sprintf("quality %s -1", op),
			fmt.Sprintf("n %s 0", op), fmt.Sprintf("n %s -3", op), fmt.Sprintf("quality %s 1", op))
	}
	for _, p := range preds[:20] {
		preds = append(preds, "NOT "+p, p+" AND quality >= 0.5", p+" OR lang = 'en'", "NOT ("+p+" OR n > 1) AND lang <= 'b'")
	}
	for _, s := range preds {
		f, err := Compile(s, cs)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		var cols []Vector
		for _, c := range f.Columns {
			cols = append(cols, byName[c.Name])
		}
		vec := f.Eval(cols, rows, []uint8{9})
		if len(vec) != rows+1 || vec[0] != 9 {
			t.Fatalf("%s: Eval returned %d values, first %d: want the 9 given and %d more", s, len(vec), vec[0], rows)
		}
		var dcols []Vector
		for _, c := range f.Columns {
			if c.Name == "lang" {
				dcols = append(dcols, dict)
			} else {
				dcols = append(dcols, byName[c.Name])
			}
		}
		dvec := f.Eval(dcols, rows, nil)
		// One Evaluator over windows of several sizes (its AND and OR
		// vectors reused, shorter and longer than before): the same
		// values as Eval's.
		e := f.Evaluator()
		for _, n := range []int{rows, 100, 7, rows, 0, rows} {
			if got := e.Eval(cols, n, nil); !slices.Equal(got, vec[1:1+n]) {
				t.Fatalf("%s: Evaluator over %d rows differs from Eval", s, n)
			}
		}
		for i := range rows {
			r := evalRow(f.Root, cols, i)
			if r != vec[i+1] {
				t.Fatalf("%s row %d: vector %d, row %d", s, i, vec[i+1], r)
			}
			if d := evalRow(f.Root, dcols, i); d != r || dvec[i] != r {
				t.Fatalf("%s row %d, dictionary form: vector %d, row %d; plain row %d", s, i, dvec[i], d, r)
			}
		}
	}
}

// BenchmarkEvalFloatCompare: `quality >= 0.5` over 2^20 rows of random
// quality values (half above, so a branch per row would mispredict half
// the time), the typed loop of cmpColLit.
func BenchmarkEvalFloatCompare(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 1 << 20
	v := Vector{Floats: make([]float64, n)}
	for i := range v.Floats {
		v.Floats[i] = float64(rng.IntN(1000)) / 1000
	}
	f, err := Compile("quality >= 0.5", []Column{{Name: "quality", Type: Float}})
	if err != nil {
		b.Fatal(err)
	}
	out := make([]uint8, 0, n)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out = f.Eval([]Vector{v}, n, out[:0])
	}
	b.ReportMetric(float64(b.N)*float64(n)/b.Elapsed().Seconds()/1e6, "Mrows/s")
}
