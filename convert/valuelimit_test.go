package convert

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/pqread"
)

// TestMaxValueBytesEnforcedByReader: a spec's max_value_bytes reaches
// pqread's Limits, so a long BYTE_ARRAY value fails inside the reader
// (before it is copied out of its page) naming file, column, row group, row
// and length; tensors without a limit that read BYTE_ARRAY columns keep the
// reader unlimited, and a tensor's own smaller limit still holds.
func TestMaxValueBytesEnforcedByReader(t *testing.T) {
	type row struct {
		ID   int64  `parquet:"id"`
		Text string `parquet:"text"`
		Tag  string `parquet:"tag"`
	}
	rows := make([]row, 300)
	for i := range rows {
		rows[i] = row{ID: int64(i), Text: "short", Tag: fmt.Sprintf("t%03d", i)}
	}
	rows[250].Text = strings.Repeat("x", 5000) // row group 2 (100 rows each), row 50
	src := t.TempDir()
	if err := parquet.WriteFile(filepath.Join(src, "s.parquet"), rows, parquet.MaxRowsPerRowGroup(100)); err != nil {
		t.Fatal(err)
	}
	p := makePlan(t, src, plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 1, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderPartial})

	for _, c := range []struct {
		name, spec string
		reader     bool   // refused by pqread (ErrLimit) rather than by the transform (ErrValue)
		msg        string // "" = success
	}{
		{"limit on the only byte column", "tensors: [{name: h, column: text, dtype: I64, max_value_bytes: 1000, bytes: {mode: hash, buckets: 10}}]",
			true, `column "text", row group 2, page 0, row 50`},
		{"limit above the value", "tensors: [{name: h, column: text, dtype: I64, max_value_bytes: 5000, bytes: {mode: hash, buckets: 10}}]",
			false, ""},
		{"other byte column unlimited", "tensors: [{name: h, column: text, dtype: I64, max_value_bytes: 1000, bytes: {mode: hash, buckets: 10}}, {name: g, column: tag, dtype: I64, bytes: {mode: hash, buckets: 10}}]",
			false, `column "text", row group 2, row 50: value is 5000 bytes long, more than max_value_bytes 1000`},
		{"smaller limit of another tensor", "tensors: [{name: h, column: text, dtype: I64, max_value_bytes: 1000, bytes: {mode: hash, buckets: 10}}, {name: g, column: tag, dtype: I64, max_value_bytes: 8000, bytes: {mode: hash, buckets: 10}}]",
			false, `column "text", row group 2, row 50: value is 5000 bytes long, more than max_value_bytes 1000`},
		{"non-byte tensor without a limit", "tensors: [{name: id, column: id, dtype: I64}, {name: h, column: text, dtype: I64, max_value_bytes: 4999, bytes: {mode: hash, buckets: 10}}]",
			true, `column "text", row group 2, page 0, row 50`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := materializeAll(t, p, c.spec)
			if c.msg == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			mustContainAll(t, err, "s.parquet", c.msg)
			if c.reader {
				mustContainAll(t, err, "value length 5000 exceeds the limit of")
			}
			if got := errors.Is(err, pqread.ErrLimit); got != c.reader {
				t.Errorf("errors.Is(err, pqread.ErrLimit) = %v, want %v: %v", got, c.reader, err)
			}
			if !c.reader && !errors.Is(err, ErrValue) {
				t.Errorf("error %v does not wrap ErrValue", err)
			}
		})
	}
}

func TestValueLimit(t *testing.T) {
	bytesCol := []pqread.ColumnInfo{{Kind: pqread.KindBytes}}
	intCol := []pqread.ColumnInfo{{Kind: pqread.KindInt64}}
	tp := func(limit int64, cols []pqread.ColumnInfo) *tensorPlan {
		return &tensorPlan{maxValue: limit, cols: [][]pqread.ColumnInfo{cols}}
	}
	for _, c := range []struct {
		global int64
		plans  []*tensorPlan
		want   int64
	}{
		{0, nil, 0},
		{0, []*tensorPlan{tp(0, intCol)}, 0},
		{0, []*tensorPlan{tp(100, bytesCol)}, 100},
		{0, []*tensorPlan{tp(100, bytesCol), tp(300, bytesCol), tp(0, intCol)}, 300},
		{0, []*tensorPlan{tp(100, bytesCol), tp(0, bytesCol)}, 0},
		{50, []*tensorPlan{tp(100, bytesCol)}, 50},
		{500, []*tensorPlan{tp(100, bytesCol)}, 100},
		{500, []*tensorPlan{tp(0, bytesCol)}, 500},
	} {
		if got := valueLimit(c.global, c.plans); got != c.want {
			t.Errorf("valueLimit(%d, ...) = %d, want %d", c.global, got, c.want)
		}
	}
}
