package convert

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prepml/prep/shardfmt"
)

// TestNarrowFloatOverflowCounted: values beyond a narrow float's largest
// finite value are stored as ±Inf (±448 for F8_E4M3) and counted; values
// that round to the largest finite value, infinities into dtypes that have
// them, NaN and wider dtypes are not overflows.
func TestNarrowFloatOverflowCounted(t *testing.T) {
	for _, c := range []struct {
		dt       shardfmt.DType
		x        float64
		want     uint64 // stored bits
		overflow bool
	}{
		{shardfmt.F16, 65504, 0x7bff, false},
		{shardfmt.F16, 65519.99, 0x7bff, false}, // rounds down to 65504
		{shardfmt.F16, 65520, 0x7c00, true},
		{shardfmt.F16, -1e6, 0xfc00, true},
		{shardfmt.F16, math.Inf(1), 0x7c00, false}, // already infinite
		{shardfmt.F16, math.NaN(), 0x7e00, false},
		{shardfmt.BF16, 3.3895313892515355e38, 0x7f7f, false},
		{shardfmt.BF16, 1e300, 0x7f80, true},
		{shardfmt.F8_E4M3, 464, 0x7e, false}, // tie, to even 448
		{shardfmt.F8_E4M3, 465, 0x7e, true},  // saturates
		{shardfmt.F8_E4M3, -1000, 0xfe, true},
		{shardfmt.F8_E4M3, math.Inf(1), 0x7e, true}, // no infinity in E4M3FN
		{shardfmt.F8_E5M2, 57344, 0x7b, false},
		{shardfmt.F8_E5M2, 1e5, 0x7c, true},
		{shardfmt.F32, 1e300, 0x7f800000, false}, // IEEE float32 rounding, not counted
	} {
		var n atomic.Int64
		e := newEncoder(c.dt, "")
		e.overflows = &n
		dst := make([]byte, 8)
		if err := e.putFloat(dst, c.x); err != nil {
			t.Errorf("%s %v: %v", c.dt, c.x, err)
			continue
		}
		var got uint64
		switch c.dt.Size() {
		case 1:
			got = uint64(dst[0])
		case 2:
			got = uint64(binary.LittleEndian.Uint16(dst))
		case 4:
			got = uint64(binary.LittleEndian.Uint32(dst))
		}
		if got != c.want || (n.Load() == 1) != c.overflow || n.Load() > 1 {
			t.Errorf("%s %v: stored %#x, %d overflows; want %#x, overflow %v", c.dt, c.x, got, n.Load(), c.want, c.overflow)
		}
		// Integer sources go through the same rule.
		if c.x == math.Trunc(c.x) && math.Abs(c.x) < 1<<62 {
			n.Store(0)
			if err := e.putInt(dst, int64(c.x)); err != nil || (n.Load() == 1) != c.overflow {
				t.Errorf("%s int %v: %d overflows, err %v", c.dt, c.x, n.Load(), err)
			}
		}

		e.overflowErr = true
		err := e.putFloat(dst, c.x)
		if c.overflow != (err != nil) || (err != nil && !errors.Is(err, ErrValue)) {
			t.Errorf("%s %v under cast.overflow error: %v", c.dt, c.x, err)
		}
	}
	e := newEncoder(shardfmt.F16, "")
	e.overflowErr = true
	err := e.putFloat(make([]byte, 2), 70000)
	if err == nil || err.Error() != "value 70000 overflows F16 (largest finite 65504; cast.overflow is error)" {
		t.Errorf("message: %v", err)
	}
}

// TestRunCountsOverflows: ids 0..999 cast to F8_E4M3 overflow for 465..999
// (464 ties to 448); the run stores them saturated, reports 535 in the
// summary and warns once; cast.overflow error fails at the first one, id
// 465 = part-0.parquet row group 3 (rows of 128), row 81.
func TestRunCountsOverflows(t *testing.T) {
	p, _ := fixture(t, defaultCfg)
	spec, err := ParseSpec([]byte(`tensors:
  - {name: id, column: id, dtype: I64}
  - {name: id8, column: id, dtype: F8_E4M3}
  - {name: x, column: x, dtype: F16}
`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Overflows) != 1 || sum.Overflows["id8"] != 535 {
		t.Errorf("overflows %v, want map[id8:535]", sum.Overflows)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 || !strings.Contains(logs.String(), "tensor=id8 dtype=F8_E4M3 count=535") {
		t.Errorf("log:\n%s", logs.String())
	}
	s, err := Materialize(context.Background(), p, spec, []uint64{464, 465, 999})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Data[1]; !bytes.Equal(got, []byte{0x7e, 0x7e, 0x7e}) {
		t.Errorf("saturated values %x", got)
	}

	spec.Tensors[1].Cast = &CastPolicy{Overflow: "error"}
	_, err = Run(context.Background(), Options{Plan: p, Spec: spec, Output: t.TempDir()})
	mustContainAll(t, err, `part-0.parquet: column "id", row group 3, row 81: value 465 overflows F8_E4M3 (largest finite 448; cast.overflow is error)`)
	if !errors.Is(err, ErrValue) {
		t.Errorf("error %v does not wrap ErrValue", err)
	}
	spec.Tensors[1].Cast = &CastPolicy{Overflow: "clip"}
	if err := spec.Validate(); !errors.Is(err, ErrSpec) {
		t.Errorf("cast.overflow clip accepted: %v", err)
	}
}
