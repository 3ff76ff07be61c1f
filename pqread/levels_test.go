package pqread

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/snappy"

	"github.com/prepml/prep/internal/duckdbtest"
)

// Vectors from parquet-format Encodings.md: the values 0..7 with bit width 3.
func TestLevelEncodingsSpecVectors(t *testing.T) {
	want := []uint8{0, 1, 2, 3, 4, 5, 6, 7}
	got := make([]uint8, 8)
	n, err := decodeBitPackedLevels(got, []byte{0b00000101, 0b00111001, 0b01110111}, 3)
	if err != nil || n != 3 || !slices.Equal(got, want) {
		t.Fatalf("BIT_PACKED: %v %d %v", got, n, err)
	}
	got32 := make([]uint32, 8)
	n, err = decodeHybrid(got32, []byte{0x03, 0b10001000, 0b11000110, 0b11111010}, 3)
	if err != nil || n != 4 || !slices.Equal(got32, []uint32{0, 1, 2, 3, 4, 5, 6, 7}) {
		t.Fatalf("RLE bit-packed run: %v %d %v", got32, n, err)
	}
	// A repeated run of 300 fives (header 600 as ULEB128), then a bit-packed
	// group cut short after the 2 values needed.
	lv := make([]uint8, 302)
	n, err = decodeHybrid(lv, []byte{0xd8, 0x04, 0x05, 0x03, 0b10001000}, 3)
	if err != nil || n != 5 || lv[0] != 5 || lv[299] != 5 || lv[300] != 0 || lv[301] != 1 {
		t.Fatalf("runs: %v... %d %v", lv[295:], n, err)
	}
	for _, bad := range []struct {
		src  []byte
		want string
	}{
		{[]byte{}, "run header at byte 0: 0 of 2 values decoded"},
		{[]byte{0x06}, "repeated run needs 1 bytes, 0 left"},
		{[]byte{0x03}, "bit-packed run needs 1 bytes, 0 left"},
		{[]byte{0x02, 0x08}, "repeated value 8 wider than 3 bits"},
	} {
		if _, err := decodeHybrid(make([]uint8, 2), bad.src, 3); err == nil || err.Error() != bad.want {
			t.Fatalf("decodeHybrid(%x) error %v, want %q", bad.src, err, bad.want)
		}
	}
}

// DELTA_BINARY_PACKED vectors built by hand (Encodings.md layout): block
// 128 values in 4 miniblocks of 32.
func TestDeltaDecodeHandVectors(t *testing.T) {
	// Values 7, 5, 3, 1, 2, 3, 4, 5: deltas -2 -2 -2 1 1 1 1, min -2,
	// adjusted 0 0 0 3 3 3 3 (width 2).
	src := []byte{0x80, 0x01, 0x04, 0x08, 0x0e, 0x03, 2, 0, 0, 0, 0b11000000, 0b00111111}
	src = append(src, make([]byte, 6)...) // the rest of the 32-value miniblock
	got, n, err := deltaDecode(nil, src, 8, 64)
	if err != nil || n != len(src) || !slices.Equal(got, []int64{7, 5, 3, 1, 2, 3, 4, 5}) {
		t.Fatalf("got %v n %d err %v", got, n, err)
	}
	// Header value count must match the page's; widths above 64 fail.
	if _, _, err := deltaDecode(nil, src, 9, 64); err == nil || err.Error() != "delta header holds 8 values, the page needs 9" {
		t.Fatalf("count mismatch: error %v", err)
	}
	wide := append([]byte{}, src...)
	wide[6] = 65
	if _, _, err := deltaDecode(nil, wide, 8, 64); err == nil || err.Error() != "delta miniblock bit width 65 exceeds 64" {
		t.Fatalf("width 65: error %v", err)
	}
	// INT32 wraps: 2^31-1 then -2^31 is a delta of 1 modulo 2^32.
	w32 := []byte{0x80, 0x01, 0x04, 0x02, 0xfe, 0xff, 0xff, 0xff, 0x0f, 0x02, 0, 0, 0, 0}
	got, _, err = deltaDecode(nil, w32, 2, 32)
	if err != nil || !slices.Equal(got, []int64{2147483647, -2147483648}) {
		t.Fatalf("wrap: %v %v", got, err)
	}
}

type denseListRow struct {
	V []int32 `parquet:"v,list"`
}

// A list chunk without nulls or empty lists takes the dense assembly path:
// row starts found eight repetition levels at a time must match row
// lengths of 1 to 19 exactly, including rows starting in every byte of a
// word and a chunk whose length is not a multiple of eight.
func TestDenseListAssembly(t *testing.T) {
	var rows []denseListRow
	var want []int32
	var lens []int
	x := int32(0)
	for i := 0; i < 1001; i++ {
		n := 1 + (i*7)%19
		v := make([]int32, n)
		for k := range v {
			v[k] = x
			x++
		}
		want = append(want, v...)
		lens = append(lens, n)
		rows = append(rows, denseListRow{V: v})
	}
	f := mustOpen(t, writeParquet(t, rows))
	c, err := f.ReadColumn(0, f.Columns()[0])
	if err != nil {
		t.Fatal(err)
	}
	if c.Rows != len(rows) || c.RowValid != nil || c.ElemValid != nil || len(c.Int32) != len(want) {
		t.Fatalf("rows %d, values %d, validity %v %v", c.Rows, len(c.Int32), c.RowValid != nil, c.ElemValid != nil)
	}
	for i, n := range lens {
		if got := c.Offsets[i+1] - c.Offsets[i]; got != int64(n) {
			t.Fatalf("row %d has %d elements, want %d", i, got, n)
		}
	}
	for k, v := range want {
		if c.Int32[k] != v {
			t.Fatalf("value %d = %d, want %d", k, c.Int32[k], v)
		}
	}
}

type directRow struct {
	X *float64  `parquet:"x,optional"`
	L []float32 `parquet:"l,list"`
}

// Compressed V2 PLAIN pages of columns with levels decompress their values
// straight into the column when the page size matches its non-null values:
// optional values with and without nulls per page, and lists, across many
// pages, read back exactly.
func TestDirectPlainWithLevels(t *testing.T) {
	var rows []directRow
	for i := 0; i < 5000; i++ {
		var x *float64
		if i < 2000 || i%7 != 0 { // the first pages have no nulls
			v := float64(i) * 1.5
			x = &v
		}
		l := make([]float32, 1+i%5)
		for k := range l {
			l[k] = float32(i*10 + k)
		}
		rows = append(rows, directRow{X: x, L: l})
	}
	path := writeParquet(t, rows, parquet.Compression(&snappy.Codec{}), parquet.PageBufferSize(4096), parquet.DataPageVersion(2))
	f := mustOpen(t, path)
	x, err := f.ReadColumn(0, f.Columns()[0])
	if err != nil {
		t.Fatal(err)
	}
	l, err := f.ReadColumn(0, f.Columns()[1])
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		if (r.X != nil) != x.RowValid[i] || (r.X != nil && x.Float64[i] != *r.X) {
			t.Fatalf("x row %d: valid %v value %v, want %v", i, x.RowValid[i], x.Float64[i], r.X)
		}
		got := l.Float32[l.Offsets[i]:l.Offsets[i+1]]
		if !slices.Equal(got, r.L) {
			t.Fatalf("l row %d = %v, want %v", i, got, r.L)
		}
	}
}

// TestUnpackLSBOneBit checks the eight-at-a-time path for 1-bit levels
// against bit-by-bit extraction, for lengths around multiples of eight.
func TestUnpackLSBOneBit(t *testing.T) {
	src := []byte{0xA5, 0x01, 0xFF, 0x00, 0x3C, 0x80, 0x7E, 0x99, 0x42}
	for n := 0; n <= 8*len(src); n++ {
		out := make([]uint8, n)
		unpackLSB(out, src, 1)
		wide := make([]uint32, n)
		unpackLSB(wide, src, 1)
		for j := range n {
			want := src[j/8] >> (j % 8) & 1
			if out[j] != want || wide[j] != uint32(want) {
				t.Fatalf("n=%d: level %d is %d (uint32 path %d), want %d", n, j, out[j], wide[j], want)
			}
		}
	}
}

// TestUnpackLSBWidths checks unpackLSB (word-load fast path and byte-wise
// tail) against bit-by-bit extraction for every width 1..32 and lengths
// whose packed bytes end just inside, at and past an 8-byte window.
func TestUnpackLSBWidths(t *testing.T) {
	src := make([]byte, 300)
	for i := range src {
		src[i] = byte(i*131 + i>>3 + 7)
	}
	ref := func(j int, bw uint) uint32 {
		var v uint32
		for b := uint(0); b < bw; b++ {
			p := uint(j)*bw + b
			v |= uint32(src[p>>3]>>(p&7)&1) << b
		}
		return v
	}
	for bw := uint(1); bw <= 32; bw++ {
		for n := 0; n <= 60; n++ {
			need := (n*int(bw) + 7) / 8
			wide := make([]uint32, n)
			unpackLSB(wide, src[:need], bw)
			for j := range n {
				if w := ref(j, bw); wide[j] != w {
					t.Fatalf("bw %d n %d: value %d is %d, want %d", bw, n, j, wide[j], w)
				}
			}
			if bw <= 8 {
				narrow := make([]uint8, n)
				unpackLSB(narrow, src[:need], bw)
				for j := range n {
					if w := ref(j, bw); uint32(narrow[j]) != w {
						t.Fatalf("bw %d n %d: uint8 value %d is %d, want %d", bw, n, j, narrow[j], w)
					}
				}
			}
		}
	}
}

// countLevel counts eight levels at a time; every length, position and byte
// value must give the plain count.
func TestCountLevel(t *testing.T) {
	if got := countLevel([]uint8{1, 0, 1, 1, 2, 1, 1, 1, 1, 0, 1}, 1); got != 8 {
		t.Fatalf("countLevel = %d, want 8", got)
	}
	for n := 0; n <= 24; n++ {
		for _, x := range []uint8{0, 1, 2, 0x7f, 0x80, 0xff} {
			for _, other := range []uint8{0, 1, 0x80, 0xfe, 0xff} {
				if other == x {
					continue
				}
				for miss := -1; miss < n; miss++ {
					v := make([]uint8, n)
					for i := range v {
						v[i] = x
					}
					want := n
					if miss >= 0 {
						v[miss] = other
						want--
					}
					if got := countLevel(v, x); got != want {
						t.Fatalf("countLevel(%v, %d) = %d, want %d", v, x, got, want)
					}
				}
			}
		}
	}
}

// refHybrid is an independent reading of the RLE / bit-packing hybrid
// (parquet-format Encodings.md) for bit widths 1..8: runs are decoded one
// at a time, bit by bit, until n values are out. It returns nil for a
// stream that ends or runs short before n values.
func refHybrid(src []byte, bw uint, n int) []uint8 {
	out := make([]uint8, 0, n)
	for len(out) < n {
		var h uint64
		var shift uint
		for {
			if len(src) == 0 {
				return nil
			}
			b := src[0]
			src = src[1:]
			h |= uint64(b&0x7f) << shift
			shift += 7
			if b < 0x80 {
				break
			}
		}
		if h&1 == 0 {
			if len(src) == 0 {
				return nil
			}
			for k := uint64(0); k < h>>1 && len(out) < n; k++ {
				out = append(out, src[0])
			}
			src = src[1:]
			continue
		}
		vals := int(h>>1) * 8
		for k := 0; k < vals && len(out) < n; k++ {
			var v uint8
			for bit := uint(0); bit < bw; bit++ {
				pos := uint(k)*bw + bit
				if int(pos/8) >= len(src) {
					return nil
				}
				v |= (src[pos/8] >> (pos % 8) & 1) << bit
			}
			out = append(out, v)
		}
		src = src[min(len(src), int(h>>1)*int(bw)):]
	}
	return out
}

// TestLevelsHybridFullPages pins the definition-level fast path: a page
// whose levels are repeated runs of the maximum (or, at bit width 1,
// bit-packed all-ones runs) is filled without level-by-level decoding and
// reported full; any other page, including one with nulls after a run of
// the maximum, is decoded level by level and reported not full. Every
// case's levels are checked against the hand-computed ones.
func TestLevelsHybridFullPages(t *testing.T) {
	rep := func(v uint8, k int) []uint8 { return slices.Repeat([]uint8{v}, k) }
	cases := []struct {
		name string
		src  []byte
		max  int
		n    int
		want []uint8 // nil: an error
		full bool
	}{
		{"one repeated run of max", []byte{0xd0, 0x0f, 0x01}, 1, 1000, rep(1, 1000), true},
		{"run longer than the page", []byte{0xd0, 0x0f, 0x01}, 1, 999, rep(1, 999), true},
		{"two runs of max", []byte{0x0a, 0x01, 0x06, 0x01}, 1, 8, rep(1, 8), true},
		{"run of max at width 2", []byte{0x14, 0x03}, 3, 10, rep(3, 10), true},
		{"bit-packed all ones", []byte{0x05, 0xff, 0xff}, 1, 16, rep(1, 16), true},
		{"bit-packed ones, zero bits past the page", []byte{0x05, 0xff, 0x0f}, 1, 12, rep(1, 12), true},
		{"nulls after a run of max", []byte{0x08, 0x01, 0x03, 0b11011110}, 1, 12,
			append(rep(1, 4), 0, 1, 1, 1, 1, 0, 1, 1), false},
		{"null in a bit-packed run", []byte{0x05, 0xff, 0xfe}, 1, 16, append(rep(1, 8), 0, 1, 1, 1, 1, 1, 1, 1), false},
		{"run of a lower level", []byte{0x08, 0x01, 0x04, 0x02}, 2, 6, []uint8{1, 1, 1, 1, 2, 2}, false},
		{"run of max then nothing", []byte{0x08, 0x01}, 1, 6, nil, false},
		{"level above max", []byte{0x08, 0x02}, 2, 4, []uint8{2, 2, 2, 2}, true},
		{"level above max, width 2", []byte{0x08, 0x03}, 2, 4, nil, false},
	}
	for _, c := range cases {
		var dst []uint8
		full, err := levelsHybrid(&dst, c.src, c.max, c.n, "definition")
		if c.want == nil {
			if err == nil {
				t.Errorf("%s: levels %v, want an error", c.name, dst)
			}
			continue
		}
		if err != nil || full != c.full || !slices.Equal(dst, c.want) {
			t.Errorf("%s: levels %v full %v err %v, want %v full %v", c.name, dst, full, err, c.want, c.full)
		}
	}
}

// TestLevelsHybridMatchesReference decodes random hybrid streams (repeated
// and bit-packed runs, levels up to max, at widths 1..3, some cut short)
// with levelsHybrid and refHybrid: the same levels, or both fail; full
// only when every level is max, and at bit width 1 (where both kinds of
// run are recognised) exactly then.
func TestLevelsHybridMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 29))
	for iter := 0; iter < 20000; iter++ {
		max := 1 + rng.IntN(7)
		bw := bitWidth(max)
		var src []byte
		n := 0
		for runs := 1 + rng.IntN(4); runs > 0; runs-- {
			if rng.IntN(2) == 0 {
				k := rng.IntN(200)
				v := max
				if rng.IntN(4) == 0 {
					v = rng.IntN(max + 1)
				}
				src = binary.AppendUvarint(src, uint64(k)<<1)
				src = append(src, byte(v))
				n += k
				continue
			}
			groups := rng.IntN(5)
			src = binary.AppendUvarint(src, uint64(groups)<<1|1)
			bitsOut := make([]byte, groups*int(bw))
			for k := 0; k < groups*8; k++ {
				v := uint(max)
				if rng.IntN(8) == 0 {
					v = uint(rng.IntN(max + 1))
				}
				for bit := uint(0); bit < bw; bit++ {
					pos := uint(k)*bw + bit
					bitsOut[pos/8] |= byte(v>>bit&1) << (pos % 8)
				}
			}
			src = append(src, bitsOut...)
			n += groups * 8
		}
		if rng.IntN(5) == 0 && len(src) > 0 {
			src = src[:rng.IntN(len(src))]
		}
		if n > 0 && rng.IntN(3) == 0 {
			n = rng.IntN(n)
		}
		want := refHybrid(src, bw, n)
		if want != nil && slices.ContainsFunc(want, func(v uint8) bool { return int(v) > max }) {
			want = nil
		}
		var got []uint8
		full, err := levelsHybrid(&got, src, max, n, "definition")
		if (want == nil) != (err != nil) || (want != nil && !slices.Equal(got, want)) {
			t.Fatalf("max %d n %d src %x: got %v err %v, want %v", max, n, src, got, err, want)
		}
		if all := allLevels(want, uint8(max)); err == nil && (full && !all || bw == 1 && full != all) {
			t.Fatalf("max %d n %d src %x: full %v for levels %v", max, n, src, full, want)
		}
	}
}

// TestOptionalPagesAgainstDuckDB reads DuckDB-written OPTIONAL columns (a
// flat INTEGER, a dictionary VARCHAR and a LIST<INTEGER>, data pages V1
// with RLE definition levels) whose first pages hold no null, so their
// definition levels are one repeated run of the maximum, and whose later
// pages have nulls after such a run; every row must equal DuckDB's reading
// of the same file, and both kinds of page must occur in each column.
func TestOptionalPagesAgainstDuckDB(t *testing.T) {
	duckdbtest.Require(t)
	path := filepath.Join(t.TempDir(), "opt.parquet")
	const rows = 300000
	duckdbtest.Query(t, fmt.Sprintf(`COPY (SELECT
		CASE WHEN i >= 250000 AND i %% 7 = 3 THEN NULL ELSE CAST(i * 3 AS INTEGER) END AS a,
		CASE WHEN i >= 250000 AND i %% 11 = 5 THEN NULL ELSE 's' || (i %% 50) END AS s,
		CASE WHEN i >= 250000 AND i %% 13 = 1 THEN NULL
		     WHEN i >= 250000 AND i %% 13 = 2 THEN [i::INTEGER, NULL]
		     ELSE [i::INTEGER, (i + 1)::INTEGER] END AS l
		FROM range(%d) t(i)) TO %s (FORMAT parquet, COMPRESSION snappy, ROW_GROUP_SIZE 100000)`,
		rows, duckdbtest.Quote(path)))
	want := duckdbtest.Query(t, fmt.Sprintf(`SELECT a, s, l FROM read_parquet(%s) ORDER BY file_row_number`, duckdbtest.Quote(path)))
	if len(want.Rows) != rows {
		t.Fatalf("DuckDB returned %d rows", len(want.Rows))
	}
	f, err := Open(path, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for k, name := range []string{"a", "s", "l"} {
		col, err := f.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		// Both kinds of page occur: all levels at the maximum (the row
		// groups before row 250000), and not (a run of the maximum, then
		// nulls).
		full, other := 0, 0
		var c Column
		for rg := range f.RowGroups() {
			r, err := f.ColumnReader(rg, col)
			if err != nil {
				t.Fatal(err)
			}
			r.alloc(rows)
			for !r.ended {
				if err := r.stepPage(); err != nil {
					t.Fatal(err)
				}
				if r.entries > 0 && r.defsFull {
					full++
				} else if r.entries > 0 {
					other++
				}
			}
			r.Close()
			part, err := f.ReadColumn(rg, col)
			if err != nil {
				t.Fatal(err)
			}
			c = appendColumn(c, part)
		}
		if full == 0 || other == 0 {
			t.Fatalf("%s: %d pages with every level at the maximum, %d with nulls: want both", name, full, other)
		}
		for i, row := range want.Rows {
			v := row[k]
			switch k {
			case 0:
				if null := c.RowValid != nil && !c.RowValid[i]; null != (v == nil) || v != nil && int64(c.Int32[i]) != duckdbtest.Int64(t, v) {
					t.Fatalf("a row %d: %v (null %v), DuckDB %v", i, c.Int32[i], null, v)
				}
			case 1:
				got := string(c.Data[c.ByteOffsets[i]:c.ByteOffsets[i+1]])
				if null := c.RowValid != nil && !c.RowValid[i]; null != (v == nil) || v != nil && got != v.(string) {
					t.Fatalf("s row %d: %q (null %v), DuckDB %v", i, got, null, v)
				}
			case 2:
				null := c.RowValid != nil && !c.RowValid[i]
				if null != (v == nil) {
					t.Fatalf("l row %d: null %v, DuckDB %v", i, null, v)
				}
				if v == nil {
					continue
				}
				elems := duckdbtest.List(t, v)
				lo, hi := c.Offsets[i], c.Offsets[i+1]
				if int(hi-lo) != len(elems) {
					t.Fatalf("l row %d: %d elements, DuckDB %v", i, hi-lo, elems)
				}
				for j, e := range elems {
					s := lo + int64(j)
					if enull := c.ElemValid != nil && !c.ElemValid[s]; enull != (e == nil) || e != nil && int64(c.Int32[s]) != duckdbtest.Int64(t, e) {
						t.Fatalf("l row %d element %d: %v (null %v), DuckDB %v", i, j, c.Int32[s], enull, e)
					}
				}
			}
		}
	}
}

// appendColumn returns a with b's rows after its own (the fields the DuckDB
// comparison reads: Int32, Data, RowValid, Offsets, ElemValid).
func appendColumn(a Column, b *Column) Column {
	valid := func(v []bool, n int) []bool {
		if v == nil {
			return slices.Repeat([]bool{true}, n)
		}
		return v
	}
	slots := len(b.Int32)
	if b.ByteOffsets != nil {
		slots = len(b.ByteOffsets) - 1
	}
	if b.Offsets != nil {
		base := int64(len(a.Int32))
		if a.Offsets == nil {
			a.Offsets = []int64{0}
		}
		for _, o := range b.Offsets[1:] {
			a.Offsets = append(a.Offsets, base+o)
		}
		a.ElemValid = append(valid(a.ElemValid, len(a.Int32)), valid(b.ElemValid, slots)...)
	}
	if b.ByteOffsets != nil {
		base := int64(len(a.Data))
		if a.ByteOffsets == nil {
			a.ByteOffsets = []int64{0}
		}
		for _, o := range b.ByteOffsets[1:] {
			a.ByteOffsets = append(a.ByteOffsets, base+o)
		}
		a.Data = append(a.Data, b.Data...)
	}
	a.RowValid = append(valid(a.RowValid, a.Rows), valid(b.RowValid, b.Rows)...)
	a.Int32 = append(a.Int32, b.Int32...)
	a.Rows += b.Rows
	return a
}
