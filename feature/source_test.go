package feature

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/pqread"
	"github.com/prepml/prep/source"
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
	pqfixture.Of(rows...).RowGroupRows(100).WriteFile(t, filepath.Join(src, "s.parquet"))
	p := featuretest.MakePlan(t, src, plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 1, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderPartial})

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
			featuretest.MustContainAll(t, err, "s.parquet", c.msg)
			if c.reader {
				featuretest.MustContainAll(t, err, "value length 5000 exceeds the limit of")
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

// copiesPlan plans n copies of testdata's good.parquet (30 rows of a FLOAT
// x in 3 row groups each) as one source.
func copiesPlan(t *testing.T, n int) *plan.Plan {
	t.Helper()
	root := t.TempDir()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "cases", "B19-corrupt-files", "good.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("part-%d.parquet", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src, err := source.Discover(context.Background(), []string{root})
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.New(src, plan.Config{Epochs: 1, GlobalBatch: 10, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderDrop})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFootersHeldOnlyWhileRead pins the fault where convert kept every
// file's decoded footer for the whole run (16 files of 5,000 columns: 250
// MiB of heap under --memory-limit 32MiB): after the spec is compiled no
// footer is held beyond a budget, during decoding only those of the files being read (here
// one row group fits the limit at a time, so at most two: the one finishing
// and the next), and none after the run.
func TestFootersHeldOnlyWhileRead(t *testing.T) {
	const files = 8
	p := copiesPlan(t, files)
	spec := &Spec{Tensors: []TensorSpec{{Name: "x", Column: "x", DType: "F32"}}}
	base := footersHeld.Load()
	fs, _, err := openForSpec(context.Background(), p, nil, spec, pqread.Limits{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := footersHeld.Load() - base; n != 0 || len(fs) != files {
		t.Fatalf("%d footers held after compiling the spec over %d files", n, len(fs))
	}
	closeSources(fs)
	// Within a budget the first footers stay held for the decoder.
	fs, _, err = openForSpec(context.Background(), p, nil, spec, pqread.Limits{}, 3*fs[0].footerCost)
	if err != nil {
		t.Fatal(err)
	}
	if n := footersHeld.Load() - base; n != 3 || fs[2].held == nil || fs[3].held != nil {
		t.Fatalf("%d footers held within a budget of three", n)
	}
	closeSources(fs)

	var most atomic.Int64
	old := BeforeDecode
	defer func() { BeforeDecode = old }()
	BeforeDecode = func(int, context.Context) {
		if n := footersHeld.Load() - base; n > most.Load() {
			most.Store(n)
		}
	}
	// 30 rows per file in 3 row groups; a limit of one byte admits one row
	// group at a time.
	prog, err := Compile(context.Background(), p, nil, spec, Budget{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	set := NewIDSet(p.NumSamples())
	set.Fill()
	set.Seal()
	recs := NewRecords(prog.Tensors(), make([]byte, int(set.Len())*RecordSize(prog.Tensors())))
	_, err = prog.Decode(context.Background(), set, Target{Records: recs, Sink: func() RecordSink { return NewMemSink(recs) }}, 2, 1, nil)
	prog.Close()
	if err != nil {
		t.Fatal(err)
	}
	if m := most.Load(); m < 1 || m > 2 {
		t.Errorf("up to %d footers held while decoding %d files one row group at a time", m, files)
	}
	if n := footersHeld.Load() - base; n != 0 {
		t.Errorf("%d footers held after decoding", n)
	}
}
