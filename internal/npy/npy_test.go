package npy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/prepml/prep/shardfmt"
)

// NumPy 1.x and 2.x both write this exact 128-byte header for
// np.save(f, np.zeros((3, 4), '<f4')); 0x76 = 118 is its HEADER_LEN.
const goldenF32x3x4 = "\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }" +
	"                                                          \n"

func TestWriteGoldenHeader(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, "<f4", []int{3, 4}, make([]byte, 48)); err != nil {
		t.Fatal(err)
	}
	if len(goldenF32x3x4) != 128 {
		t.Fatalf("golden is %d bytes", len(goldenF32x3x4))
	}
	if got := buf.String()[:128]; got != goldenF32x3x4 {
		t.Fatalf("header\n got %q\nwant %q", got, goldenF32x3x4)
	}
	if buf.Len() != 128+48 {
		t.Fatalf("file is %d bytes, want 176", buf.Len())
	}
}

func TestRoundTripShapes(t *testing.T) {
	for _, tc := range []struct {
		descr string
		shape []int
		dict  string
	}{
		{"<i8", []int{5}, "'shape': (5,)"},
		{"|u1", []int{2, 3, 4}, "'shape': (2, 3, 4)"},
		{"<f8", []int{}, "'shape': ()"},
		{"<u2", []int{0, 7}, "'shape': (0, 7)"},
		{"|b1", []int{1}, "'shape': (1,)"},
	} {
		n := itemSize(tc.descr)
		for _, d := range tc.shape {
			n *= d
		}
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(i*7 + 1)
		}
		var buf bytes.Buffer
		if err := Write(&buf, tc.descr, tc.shape, data); err != nil {
			t.Fatalf("%s %v: %v", tc.descr, tc.shape, err)
		}
		if !strings.Contains(buf.String(), tc.dict) {
			t.Errorf("%s %v: header lacks %q", tc.descr, tc.shape, tc.dict)
		}
		r := bytes.NewReader(buf.Bytes())
		h, err := ReadHeader(r)
		if err != nil {
			t.Fatalf("%s %v: %v", tc.descr, tc.shape, err)
		}
		if h.DataOffset%64 != 0 {
			t.Errorf("data offset %d not a multiple of 64", h.DataOffset)
		}
		if h.Descr != tc.descr || h.FortranOrder || !reflect.DeepEqual(h.Shape, tc.shape) {
			t.Errorf("read back %+v, want descr %s shape %v", h, tc.descr, tc.shape)
		}
		rest := buf.Bytes()[h.DataOffset:]
		if !bytes.Equal(rest, data) {
			t.Errorf("%s %v: data differs", tc.descr, tc.shape)
		}
	}
}

func TestWriteRejectsWrongLength(t *testing.T) {
	var buf bytes.Buffer
	err := Write(&buf, "<f4", []int{2, 2}, make([]byte, 15))
	if err == nil || !strings.Contains(err.Error(), "needs 16 bytes, have 15") {
		t.Fatalf("err = %v", err)
	}
	if buf.Len() != 0 {
		t.Fatalf("wrote %d bytes before failing", buf.Len())
	}
	if err := Write(&buf, "f4", []int{1}, make([]byte, 4)); err == nil || err.Error() != `npy: unsupported descr "f4"` {
		t.Fatalf("descr without byte order: err = %v, want unsupported descr", err)
	}
	if buf.Len() != 0 {
		t.Fatalf("wrote %d bytes before rejecting the descr", buf.Len())
	}
}

func TestReadHeaderRejects(t *testing.T) {
	good := []byte(goldenF32x3x4)
	for name, mut := range map[string]func(b []byte) []byte{
		"magic":   func(b []byte) []byte { b[1] = 'X'; return b },
		"version": func(b []byte) []byte { b[6] = 3; return b },
		"short":   func(b []byte) []byte { return b[:40] },
		"dict":    func(b []byte) []byte { b[10] = '['; return b },
		"key":     func(b []byte) []byte { copy(b[12:17], "desxr"); return b },
	} {
		b := mut(append([]byte(nil), good...))
		if _, err := ReadHeader(bytes.NewReader(b)); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: err = %v, want ErrFormat", name, err)
		}
	}
}

func TestDescrTable(t *testing.T) {
	want := map[shardfmt.DType]string{
		shardfmt.BOOL: "|b1", shardfmt.U8: "|u1", shardfmt.I8: "|i1",
		shardfmt.U16: "<u2", shardfmt.I16: "<i2", shardfmt.U32: "<u4", shardfmt.I32: "<i4",
		shardfmt.U64: "<u8", shardfmt.I64: "<i8", shardfmt.F16: "<f2", shardfmt.BF16: "<u2",
		shardfmt.F32: "<f4", shardfmt.F64: "<f8", shardfmt.F8_E4M3: "|u1", shardfmt.F8_E5M2: "|u1",
	}
	for d := shardfmt.BOOL; d.Valid(); d++ {
		got, err := Descr(d)
		if err != nil || got != want[d] {
			t.Errorf("Descr(%v) = %q, %v; want %q", d, got, err, want[d])
		}
		if itemSize(got) != d.Size() {
			t.Errorf("%v: descr %s item size %d, dtype size %d", d, got, itemSize(got), d.Size())
		}
	}
	if got, err := Descr(0); err == nil || got != "" || !strings.Contains(err.Error(), "npy: no descr for dtype") {
		t.Errorf("Descr(0) = %q, %v; want no descr", got, err)
	}
}

// TestNumPyReadsFiles checks with the real NumPy that the files load with the
// intended dtype, shape and values.
func TestNumPyReadsFiles(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import numpy").Run(); err != nil {
		t.Skip("skipping: /usr/bin/python3 with numpy not available (CI installs python3-numpy)")
	}
	dir := t.TempDir()
	f32 := make([]byte, 0, 24)
	for _, v := range []float32{1.5, -2, 0, float32(math.Inf(1)), 3.25, -0.5} {
		f32 = binary.LittleEndian.AppendUint32(f32, math.Float32bits(v))
	}
	i64 := make([]byte, 0, 24)
	for _, v := range []int64{-9223372036854775808, 0, 42} {
		i64 = binary.LittleEndian.AppendUint64(i64, uint64(v))
	}
	if err := WriteFile(filepath.Join(dir, "a.npy"), "<f4", []int{2, 3}, f32); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(dir, "b.npy"), "<i8", []int{3}, i64); err != nil {
		t.Fatal(err)
	}
	script := `import numpy as np, sys
a = np.load(sys.argv[1] + "/a.npy"); b = np.load(sys.argv[1] + "/b.npy")
print(a.dtype.str, a.shape, a.tolist(), b.dtype.str, b.shape, b.tolist())`
	out, err := exec.Command("/usr/bin/python3", "-c", script, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("numpy: %v\n%s", err, out)
	}
	want := "<f4 (2, 3) [[1.5, -2.0, 0.0], [inf, 3.25, -0.5]] <i8 (3,) [-9223372036854775808, 0, 42]\n"
	if string(out) != want {
		t.Fatalf("numpy read\n got %q\nwant %q", out, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.npy")); err != nil {
		t.Fatal(err)
	}
}
