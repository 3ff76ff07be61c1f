package convert

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
)

// bjRow is a row of the jagged bytes test file: an optional string, a
// 4-byte FIXED_LEN_BYTE_ARRAY and a dictionary-encoded string.
type bjRow struct {
	ID int64   `parquet:"id"`
	S  *string `parquet:"s,optional"`
	F  [4]byte `parquet:"f"`
	D  string  `parquet:"d,dict"`
}

// bjString is row id's string: nil (null) every 5th row, "" every 7th,
// else id-dependent text of up to 3000 bytes, NUL and UTF-8 included.
func bjString(id int) *string {
	if id%5 == 2 {
		return nil
	}
	s := ""
	if id%7 != 3 {
		s = strings.Repeat(fmt.Sprintf("\x00é%d", id), id*41%700)
	}
	return &s
}

// bjFixture writes n rows (row groups of 16), the dictionary column d
// holding dval(id), and returns a plan over them.
func bjFixture(t *testing.T, n int, dval func(int) string) *plan.Plan {
	t.Helper()
	src := t.TempDir()
	var rows []bjRow
	for id := range n {
		rows = append(rows, bjRow{ID: int64(id), S: bjString(id), F: [4]byte{byte(id), 0, byte(id >> 8), 255}, D: dval(id)})
	}
	pqfixture.Of(rows...).RowGroupRows(16).WriteFile(t, filepath.Join(src, "bytes.parquet"))
	return featuretest.MakePlan(t, src, plan.Config{Seed: 9, Epochs: 1, GlobalBatch: 8, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad})
}

// TestBytesJaggedMatchesSource: a string column (nulls, empty and long
// values), a FIXED_LEN_BYTE_ARRAY and a dictionary column of short
// repeated values read as jagged U8 hold every value's bytes exactly,
// with the string's null mask; in memory and with the values arena on
// disk alike.
func TestBytesJaggedMatchesSource(t *testing.T) {
	const n = 100
	p := bjFixture(t, n, func(id int) string { return []string{"cat", "dog", "a much longer label"}[id%3] })
	spec, err := feature.ParseSpec([]byte(`
tensors:
  - {name: s, column: s, dtype: U8, bytes: {mode: jagged}, nulls: {mask: true}}
  - {name: f, column: f, dtype: U8, bytes: {mode: jagged}}
  - {name: d, column: d, dtype: U8, bytes: {mode: jagged}}
`), "bytes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	expect := func(id uint64) [][]byte {
		s, mask := bjString(int(id)), []byte{1}
		var sb []byte
		if s == nil {
			mask = []byte{0}
		} else {
			sb = []byte(*s)
		}
		return [][]byte{sb, mask, {byte(id), 0, byte(id >> 8), 255}, []byte([]string{"cat", "dog", "a much longer label"}[id%3])}
	}
	var snaps []string
	for _, limit := range []int64{0, 64 << 10} {
		out := filepath.Join(t.TempDir(), "out")
		sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: 2, MemoryLimit: limit})
		if err != nil {
			t.Fatal(err)
		}
		if limit > 0 && !sum.ValuesArenaFile {
			t.Errorf("limit %d: values arena in memory", limit)
		}
		if got := checkShards(t, out, "[s U8 [] jagged, s_mask U8 [], f U8 [] jagged, d U8 [] jagged]", "2.0", expect); got < n {
			t.Errorf("%d samples read", got)
		}
		snaps = append(snaps, snapshot(t, out))
	}
	if snaps[0] != snaps[1] {
		t.Error("shards differ between the in-memory and the on-disk values arena")
	}
	ids := []uint64{2, 3, 0, 99, 41}
	s, err := feature.Materialize(context.Background(), nil, p, spec, ids, feature.Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if got, want := s.Sample(0, i), expect(id)[0]; !bytes.Equal(got, want) {
			t.Errorf("Materialize: s of id %d = %q, want %q", id, got, want)
		}
	}
	if shardfmt.TensorList(s.Tensors) != "[s U8 [] jagged, s_mask U8 [], f U8 [] jagged, d U8 [] jagged]" {
		t.Errorf("Materialize tensors %s", shardfmt.TensorList(s.Tensors))
	}
}

// TestBytesJaggedDictionaryOverBound: a dictionary column repeating a
// 3000-byte value holds more bytes than its footer bounds; it is refused
// naming file, column, row group and row, and PLAIN encoding.
func TestBytesJaggedDictionaryOverBound(t *testing.T) {
	long := strings.Repeat("x", 3000)
	p := bjFixture(t, 64, func(int) string { return long })
	spec, err := feature.ParseSpec([]byte("tensors:\n  - {name: d, column: d, dtype: U8, bytes: {mode: jagged}}\n"), "bytes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "out")})
	if !errors.Is(err, feature.ErrValue) || !strings.Contains(err.Error(), `bytes.parquet: column "d", row group 0, row `) || !strings.Contains(err.Error(), "PLAIN encoding") {
		t.Errorf("error %v, want one naming bytes.parquet, column d, row group 0, a row and PLAIN encoding", err)
	}
}
