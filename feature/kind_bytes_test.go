package feature

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/pqread"
)

func TestBytesPolicies(t *testing.T) {
	ci := pqread.ColumnInfo{Name: "text", Physical: "BYTE_ARRAY", Logical: "STRING", Nullable: true}
	c := &pqread.Column{Info: ci, Kind: pqread.KindBytes, Rows: 3, RowValid: []bool{true, true, false},
		Data: []byte("afoobar"), ByteOffsets: []int64{0, 1, 7, 7}}
	sch := schemaOf("s.parquet", ci)

	_, _, err := convertRows(t, TensorSpec{Name: "text", Column: "text", DType: "I64"}, sch, c)
	if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "bytes.mode") {
		t.Errorf("no bytes policy: %v", err)
	}
	_, bufs, err := convertRows(t, TensorSpec{Name: "text", Column: "text", DType: "I64",
		Bytes: &BytesPolicy{Mode: "hash", Buckets: 1000}, Nulls: &NullPolicy{Fill: mustNum("-1")}}, sch, c)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint([]int64{int64(0xaf63dc4c8601ec8c % 1000), int64(0x85944171f73967e8 % 1000), -1})
	if got := fmt.Sprint(featuretest.I64s(bufs[0])); got != want {
		t.Errorf("hash = %s, want %s", got, want)
	}
	_, _, err = convertRows(t, TensorSpec{Name: "text", Column: "text", DType: "U8",
		Bytes: &BytesPolicy{Mode: "pad", MaxLen: 4}, Nulls: &NullPolicy{Fill: mustNum("0")}}, sch, c)
	if err == nil || err.Error() != `s.parquet: column "text", row group 0, row 1: value is 6 bytes long, more than max_len 4 (set bytes.truncate to keep the first 4, or raise bytes.max_len)` {
		t.Errorf("err = %v", err)
	}
	// Binary values (an image, an encoded blob: no STRING annotation) are
	// never advised to be truncated: a prefix of one is corrupt.
	bin := pqread.ColumnInfo{Name: "png", Physical: "BYTE_ARRAY", Nullable: true}
	cb := &pqread.Column{Info: bin, Kind: pqread.KindBytes, Rows: 3, RowValid: []bool{true, true, false},
		Data: []byte("a\x89PNG\r\n"), ByteOffsets: []int64{0, 1, 7, 7}}
	_, _, err = convertRows(t, TensorSpec{Name: "png", Column: "png", DType: "U8",
		Bytes: &BytesPolicy{Mode: "pad", MaxLen: 4}, Nulls: &NullPolicy{Fill: mustNum("0")}}, schemaOf("b.parquet", bin), cb)
	if err == nil || err.Error() != `b.parquet: column "png", row group 0, row 1: value is 6 bytes long, more than max_len 4 (raise bytes.max_len to at least 6, or use bytes.mode hash; truncating binary values such as images or encoded blobs would corrupt them)` {
		t.Errorf("binary value over max_len: %v", err)
	}
	outs, bufs, err := convertRows(t, TensorSpec{Name: "text", Column: "text", DType: "U8",
		Bytes: &BytesPolicy{Mode: "pad", MaxLen: 4, Truncate: true, Lengths: true}, Nulls: &NullPolicy{Fill: mustNum("0"), Mask: true}}, sch, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 3 || outs[2].Name != "text_lengths" {
		t.Fatalf("outs %+v", outs)
	}
	if got := fmt.Sprintf("%q %v %v", bufs[0], bufs[1], featuretest.I32s(bufs[2])); got != `"a\x00\x00\x00foob\x00\x00\x00\x00" [1 1 0] [1 6 0]` {
		t.Errorf("pad = %s", got)
	}
	// B21: a max value size names row and length.
	_, _, err = convertRows(t, TensorSpec{Name: "text", Column: "text", DType: "I64", MaxValueBytes: 5,
		Bytes: &BytesPolicy{Mode: "hash", Buckets: 7}, Nulls: &NullPolicy{Fill: mustNum("0")}}, sch, c)
	if want := `s.parquet: column "text", row group 0, row 1: value is 6 bytes long, more than max_value_bytes 5`; err == nil || err.Error() != want || !errors.Is(err, ErrValue) {
		t.Errorf("max value: %v\nwant %s", err, want)
	}
}

// A hash-mode column read in dictionary form (pqread.ReadColumnDict) gives
// the buckets, fill values, mask and errors of the same column with its
// values copied out (TestBytesPolicies).
func TestBytesHashDictForm(t *testing.T) {
	ci := pqread.ColumnInfo{Name: "text", Physical: "BYTE_ARRAY", Logical: "STRING", Nullable: true}
	c := &pqread.Column{Info: ci, Kind: pqread.KindBytes, Rows: 3, RowValid: []bool{true, true, false},
		DictIndex: []uint32{1, 0, 0}, DictData: []byte("foobara"), DictOffsets: []int64{0, 6, 7}}
	sch := schemaOf("s.parquet", ci)
	outs, bufs, err := convertRows(t, TensorSpec{Name: "text", Column: "text", DType: "I64",
		Bytes: &BytesPolicy{Mode: "hash", Buckets: 1000}, Nulls: &NullPolicy{Fill: mustNum("-1"), Mask: true}}, sch, c)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint([]int64{int64(0xaf63dc4c8601ec8c % 1000), int64(0x85944171f73967e8 % 1000), -1})
	if got := fmt.Sprint(featuretest.I64s(bufs[0])); got != want || len(outs) != 2 || fmt.Sprint(bufs[1]) != "[1 1 0]" {
		t.Errorf("hash = %s mask %v, want %s [1 1 0]", got, bufs[1:], want)
	}
	_, _, err = convertRows(t, TensorSpec{Name: "text", Column: "text", DType: "I64", MaxValueBytes: 5,
		Bytes: &BytesPolicy{Mode: "hash", Buckets: 7}, Nulls: &NullPolicy{Fill: mustNum("0")}}, sch, c)
	if want := `s.parquet: column "text", row group 0, row 1: value is 6 bytes long, more than max_value_bytes 5`; err == nil || err.Error() != want || !errors.Is(err, ErrValue) {
		t.Errorf("max value: %v\nwant %s", err, want)
	}
	_, _, err = convertRows(t, TensorSpec{Name: "text", Column: "text", DType: "I64",
		Bytes: &BytesPolicy{Mode: "hash", Buckets: 7}}, sch, c)
	if want := `s.parquet: column "text", row group 0, row 2: null value (1 nulls in this column chunk; set nulls.fill to replace them)`; err == nil || err.Error() != want || !errors.Is(err, ErrValue) {
		t.Errorf("null without fill: %v\nwant %s", err, want)
	}
}

// TestDictHashesKeptPerDictionary checks that a dictionary's entries are
// hashed once and kept while it is among the last four hashed, and that
// each dictionary gets its own entries' buckets and sizes, whichever was
// hashed before it.
func TestDictHashesKeptPerDictionary(t *testing.T) {
	const buckets = 1000
	dict := func(words ...string) *pqread.Column {
		c := &pqread.Column{Kind: pqread.KindBytes, DictOffsets: []int64{0}}
		for _, w := range words {
			c.DictData = append(c.DictData, w...)
			c.DictOffsets = append(c.DictOffsets, int64(len(c.DictData)))
		}
		return c
	}
	cols := []*pqread.Column{dict("a", "bb"), dict("ccc"), dict("a", "bb"), dict(), dict("dddd", "a"), dict("e")}
	var h dictHashes
	first := map[int][]uint64{}
	for round := range 2 {
		for i, c := range cols {
			hash, size := h.of(c, buckets)
			if len(hash) != len(c.DictOffsets)-1 || len(size) != len(hash) {
				t.Fatalf("round %d dictionary %d: %d buckets, %d sizes for %d entries", round, i, len(hash), len(size), len(c.DictOffsets)-1)
			}
			for e := range hash {
				v := c.DictData[c.DictOffsets[e]:c.DictOffsets[e+1]]
				if hash[e] != FNV1a64(v)%buckets || size[e] != int64(len(v)) {
					t.Errorf("round %d dictionary %d entry %d: bucket %d size %d, want %d %d", round, i, e, hash[e], size[e], FNV1a64(v)%buckets, len(v))
				}
			}
			if round == 0 {
				first[i] = hash
			}
			// Hashed again at once: the same entries, kept.
			if again, _ := h.of(c, buckets); len(hash) > 0 && &again[0] != &hash[0] {
				t.Errorf("round %d dictionary %d: hashed again right after", round, i)
			}
		}
	}
}

// TestDictHashesShared: decode workers share one dictHashes; each gets the
// right buckets while others replace its entries (run under -race, this
// also pins that a kept entry is read under the lock).
func TestDictHashesShared(t *testing.T) {
	const buckets = 97
	var cols []*pqread.Column
	for d := range 9 { // more dictionaries than entries kept: they are replaced all along
		c := &pqread.Column{Kind: pqread.KindBytes, DictOffsets: []int64{0}}
		for e := range d + 1 {
			c.DictData = append(c.DictData, fmt.Sprintf("d%d-e%d", d, e)...)
			c.DictOffsets = append(c.DictOffsets, int64(len(c.DictData)))
		}
		cols = append(cols, c)
	}
	var h dictHashes
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 2000 {
				c := cols[(w*5+k)%len(cols)]
				hash, _ := h.of(c, buckets)
				for e := range hash {
					if v := c.DictData[c.DictOffsets[e]:c.DictOffsets[e+1]]; hash[e] != FNV1a64(v)%buckets {
						errs <- fmt.Sprintf("worker %d: entry %d of %q: bucket %d, want %d", w, e, c.DictData, hash[e], FNV1a64(v)%buckets)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
