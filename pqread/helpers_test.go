package pqread

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// testdata is the repository's testdata folder, seen from this package.
const testdata = "../testdata"

func casePath(c, file string) string { return filepath.Join(testdata, "cases", c, file) }

func mustOpen(t testing.TB, path string) *File {
	t.Helper()
	f, err := Open(path, Limits{})
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// mustRead reads column name of row group rg.
func mustRead(t testing.TB, f *File, name string, rg int) *Column {
	t.Helper()
	ci, err := f.Lookup(name)
	if err != nil {
		t.Fatalf("Lookup(%q): %v", name, err)
	}
	c, err := f.ReadColumn(rg, ci)
	if err != nil {
		t.Fatalf("ReadColumn(%d, %q): %v", rg, name, err)
	}
	checkInvariants(t, c)
	return c
}

// checkInvariants asserts the Column contract: slice lengths agree with Rows
// and Offsets.
func checkInvariants(t testing.TB, c *Column) {
	t.Helper()
	if c.RowValid != nil && len(c.RowValid) != c.Rows {
		t.Fatalf("len(RowValid) = %d, Rows = %d", len(c.RowValid), c.Rows)
	}
	slots := c.Rows
	if c.Info.List {
		if len(c.Offsets) != c.Rows+1 || c.Offsets[0] != 0 {
			t.Fatalf("Offsets len %d for %d rows, first %v", len(c.Offsets), c.Rows, c.Offsets[:min(1, len(c.Offsets))])
		}
		for i := 1; i < len(c.Offsets); i++ {
			if c.Offsets[i] < c.Offsets[i-1] {
				t.Fatalf("Offsets decrease at %d", i)
			}
		}
		slots = int(c.Offsets[c.Rows])
		if c.Info.Depth == 2 {
			lists := slots
			if len(c.InnerOffsets) != lists+1 || c.InnerOffsets[0] != 0 {
				t.Fatalf("InnerOffsets len %d for %d inner lists", len(c.InnerOffsets), lists)
			}
			for i := 1; i < len(c.InnerOffsets); i++ {
				if c.InnerOffsets[i] < c.InnerOffsets[i-1] {
					t.Fatalf("InnerOffsets decrease at %d", i)
				}
			}
			if c.ListValid != nil && len(c.ListValid) != lists {
				t.Fatalf("len(ListValid) = %d, inner lists = %d", len(c.ListValid), lists)
			}
			slots = int(c.InnerOffsets[lists])
		} else if c.InnerOffsets != nil || c.ListValid != nil {
			t.Fatalf("depth %d column with InnerOffsets or ListValid", c.Info.Depth)
		}
		if c.ElemValid != nil && len(c.ElemValid) != slots {
			t.Fatalf("len(ElemValid) = %d, slots = %d", len(c.ElemValid), slots)
		}
	} else if c.Offsets != nil || c.ElemValid != nil || c.InnerOffsets != nil || c.ListValid != nil {
		t.Fatalf("scalar column with Offsets, ElemValid, InnerOffsets or ListValid")
	}
	if c.Slots() != slots {
		t.Fatalf("Slots() = %d, want %d", c.Slots(), slots)
	}
	var n int
	switch c.Kind {
	case KindBool:
		n = len(c.Bool)
	case KindInt32:
		n = len(c.Int32)
	case KindInt64:
		n = len(c.Int64)
	case KindFloat32:
		n = len(c.Float32)
	case KindFloat64:
		n = len(c.Float64)
	case KindBytes:
		n = len(c.ByteOffsets) - 1
		if c.ByteOffsets[n] != int64(len(c.Data)) {
			t.Fatalf("last byte offset %d, len(Data) %d", c.ByteOffsets[n], len(c.Data))
		}
	case KindFixed, KindInt96:
		n = len(c.FixedData) / c.Width
	}
	if n != slots {
		t.Fatalf("%s column has %d values for %d slots", c.Kind, n, slots)
	}
}

func bytesAt(c *Column, i int) []byte { return c.Data[c.ByteOffsets[i]:c.ByteOffsets[i+1]] }

func sha256LE[T int64 | float32 | float64 | int32](vals []T) string {
	h := sha256.New()
	var b [8]byte
	for _, v := range vals {
		switch x := any(v).(type) {
		case int64:
			binary.LittleEndian.PutUint64(b[:], uint64(x))
			h.Write(b[:8])
		case int32:
			binary.LittleEndian.PutUint32(b[:], uint32(x))
			h.Write(b[:4])
		case float32:
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
			h.Write(b[:4])
		case float64:
			binary.LittleEndian.PutUint64(b[:], math.Float64bits(x))
			h.Write(b[:8])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// wantErr asserts err wraps sentinel and its message contains every part.
func wantErr(t testing.TB, err error, sentinel error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v naming %q", sentinel, parts)
	}
	if sentinel != nil && !errors.Is(err, sentinel) {
		t.Fatalf("error %q does not wrap %v", err, sentinel)
	}
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %q is not a *pqread.Error", err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}
