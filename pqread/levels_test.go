package pqread

import (
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/snappy"
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
