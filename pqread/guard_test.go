package pqread

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// TestPageSizeLimitBeforeAllocation pins the memory-bomb guard: the 4 KB
// large_string_map.brotli.parquet declares a 1 GiB page. Its column is a
// map (unsupported), so the guard is exercised on the leaf directly; the
// page must be refused from its header, before anything of that size is
// allocated.
func TestPageSizeLimitBeforeAllocation(t *testing.T) {
	f := mustOpen(t, filepath.Join(testdata, "parquet-testing", "data", "large_string_map.brotli.parquet"))
	l := f.leaves[0]
	saved := l.unsupported
	l.unsupported = nil
	defer func() { l.unsupported = saved }()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := f.ReadColumn(0, f.Columns()[0])
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	wantErr(t, err, ErrLimit, "large_string_map.brotli.parquet", "row group 0", "page 0", "exceeds the limit of 268435456")
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Fatalf("allocated %d bytes before refusing the page", grew)
	}
}

func TestLimits(t *testing.T) {
	path := casePath("B19-corrupt-files", "good.parquet")
	for _, tc := range []struct {
		name  string
		lim   Limits
		parts []string
	}{
		{"page", Limits{MaxPageBytes: 16}, []string{"page 0", "exceeds the limit of 16"}},
		{"chunk", Limits{MaxChunkBytes: 8}, []string{"column chunk of", "exceeds the limit of 8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Open(path, tc.lim)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			ci, _ := f.Lookup("x")
			_, err = f.ReadColumn(2, ci)
			wantErr(t, err, ErrLimit, append([]string{"good.parquet", `column "x"`, "row group 2"}, tc.parts...)...)
		})
	}
	_, err := Open(path, Limits{MaxFooterBytes: 10})
	wantErr(t, err, ErrLimit, "good.parquet", "footer")
}

// TestCorruptedFiles damages a good file one way each and states whether
// the error must come from Open or from ReadColumn; every ReadColumn of a
// damaged file either fails cleanly or (for damage the format cannot detect)
// returns well-formed columns.
func TestCorruptedFiles(t *testing.T) {
	good, err := os.ReadFile(casePath("B19-corrupt-files", "good.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	footerLen := int(binary.LittleEndian.Uint32(good[len(good)-8:]))
	footerStart := len(good) - 8 - footerLen
	for _, tc := range []struct {
		name   string
		damage func([]byte) []byte
		atOpen bool
		text   string
	}{
		{"zero head magic", func(b []byte) []byte { copy(b, "\x00\x00\x00\x00"); return b }, true, "missing PAR1 magic at start"},
		{"encrypted magic", func(b []byte) []byte { copy(b[len(b)-4:], "PARE"); return b }, true, "encrypted footer"},
		{"footer length too large", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[len(b)-8:], uint32(len(b)))
			return b
		}, true, "beyond file size"},
		{"footer length zero", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[len(b)-8:], 0); return b }, true, "footer length 0"},
		{"footer garbage", func(b []byte) []byte {
			for i := footerStart; i < footerStart+16; i++ {
				b[i] = 0xff
			}
			return b
		}, true, "decoding footer"},
		{"truncated footer", func(b []byte) []byte {
			out := append([]byte{}, b[:footerStart+footerLen/2]...)
			out = binary.LittleEndian.AppendUint32(out, uint32(footerLen/2))
			return append(out, "PAR1"...)
		}, true, "decoding footer"},
		{"first page header", func(b []byte) []byte { b[4] ^= 0xff; b[5] ^= 0xff; return b }, false, "page"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.damage(append([]byte{}, good...))
			path := filepath.Join(t.TempDir(), "damaged.parquet")
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := Open(path, Limits{})
			if tc.atOpen {
				if err == nil {
					t.Fatal("Open succeeded")
				}
				if !strings.Contains(err.Error(), tc.text) || !strings.Contains(err.Error(), "damaged.parquet") {
					t.Fatalf("Open error %q, want %q", err, tc.text)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer f.Close()
			var firstErr error
			for rg := range f.RowGroups() {
				for _, ci := range f.Columns() {
					if _, err := f.ReadColumn(rg, ci); err != nil && firstErr == nil {
						firstErr = err
					}
				}
			}
			wantErr(t, firstErr, ErrCorrupt, "damaged.parquet", `column "id"`, "row group 0", tc.text)
		})
	}
}

// TestEveryByteFlipIsSafe flips each byte of a small good file in turn:
// Open and ReadColumn must never panic, and what they return must be a
// clean *Error or well-formed columns.
func TestEveryByteFlipIsSafe(t *testing.T) {
	good, err := os.ReadFile(casePath("B04-list-layouts", "emb_list_duckdb.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for i := range good {
		b := append([]byte{}, good...)
		b[i] ^= 0x5a
		checkNoPanic(t, dir, b)
	}
}

func checkNoPanic(t *testing.T, dir string, b []byte) {
	t.Helper()
	path := filepath.Join(dir, "flip.parquet")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path, Limits{MaxPageBytes: 1 << 16, MaxChunkBytes: 1 << 20, MaxChunkValues: 1 << 17})
	if err != nil {
		var pe *Error
		if !errors.As(err, &pe) {
			t.Fatalf("Open error %v is not an *Error", err)
		}
		return
	}
	defer f.Close()
	for rg, rows := range f.RowGroups() {
		for _, ci := range f.Columns() {
			c, err := f.ReadColumn(rg, ci)
			checkRanges(t, f, rg, int(rows), ci, c, err)
			if err != nil {
				var pe *Error
				if !errors.As(err, &pe) {
					t.Fatalf("ReadColumn error %v is not an *Error", err)
				}
				if strings.Contains(err.Error(), "panic") {
					t.Fatalf("decoder panicked: %v", err)
				}
				if _, derr := f.ReadColumnDict(rg, ci); derr == nil {
					t.Fatalf("ReadColumn fails (%v) but ReadColumnDict does not", err)
				}
				continue
			}
			checkInvariants(t, c)
			checkDictForm(t, f, rg, ci, c)
		}
	}
}

// checkRanges reads row ranges of column ci of row group rg (of rows rows)
// with ColumnReader: never a panic, errors are *Error; the whole range
// with Rest fails exactly as ReadColumn did (werr) or returns its column
// (whole); a part of the rows equals whole's slice when ReadColumn
// succeeded.
func checkRanges(t *testing.T, f *File, rg, rows int, ci ColumnInfo, whole *Column, werr error) {
	t.Helper()
	if rows <= 0 || rows > 1<<20 {
		return
	}
	for _, r := range []RowRange{{Lo: 0, Hi: rows, Rest: true}, {Lo: rows / 2, Hi: rows}, {Lo: rows / 3, Hi: rows/3 + 1}} {
		got, err := readRows(f, rg, ci, r)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || strings.Contains(err.Error(), "panic") {
				t.Fatalf("ColumnReader(%v): %v", r, err)
			}
		}
		switch {
		case r.Rest && (err == nil) != (werr == nil):
			t.Fatalf("ColumnReader(%v): %v; ReadColumn: %v", r, err, werr)
		case r.Rest && err != nil && err.Error() != werr.Error():
			t.Fatalf("ColumnReader(%v): %v; ReadColumn: %v", r, err, werr)
		case werr == nil && err != nil:
			t.Fatalf("ColumnReader(%v): %v; ReadColumn succeeds", r, err)
		case werr == nil:
			sameRows(t, fmt.Sprint(r), got, whole.Slice(r.Lo, r.Hi))
		}
	}
}

// checkDictForm reads column ci of row group rg with ReadColumnDict and
// checks it holds want's values (from ReadColumn), slot by slot.
func checkDictForm(t *testing.T, f *File, rg int, ci ColumnInfo, want *Column) {
	t.Helper()
	got, err := f.ReadColumnDict(rg, ci)
	if err != nil {
		t.Fatalf("ReadColumn succeeds but ReadColumnDict fails: %v", err)
	}
	if got.DictIndex == nil || want.Kind != KindBytes {
		return
	}
	if got.Rows != want.Rows || len(got.DictIndex) != want.Slots() || (got.RowValid == nil) != (want.RowValid == nil) {
		t.Fatalf("dictionary form: %d rows, %d indices; ReadColumn has %d rows, %d slots", got.Rows, len(got.DictIndex), want.Rows, want.Slots())
	}
	for k := range want.Slots() {
		g, gok := dictValue(got, k)
		w, wok := dictValue(want, k)
		if gok != wok || !bytes.Equal(g, w) {
			t.Fatalf("slot %d: dictionary form %q (%v), ReadColumn %q (%v)", k, g, gok, w, wok)
		}
	}
}

// FuzzReadFile feeds arbitrary bytes (seeded from the field cases) to Open
// and ReadColumn: no panic, errors are *Error, columns are well formed.
func FuzzReadFile(f *testing.F) {
	for _, c := range []string{"B01-zero-vs-null/zeros_and_nulls.parquet", "B04-list-layouts/emb_list_duckdb.parquet",
		"B07-dict-fallback/dict_then_plain.parquet", "B09-delta-int-extremes/delta_extremes.parquet",
		"B10-delta-byte-array/strings_delta_byte_array.parquet", "B11-byte-stream-split-nulls/bss_nullable.parquet"} {
		b, err := os.ReadFile(filepath.Join(testdata, "cases", c))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// A string column read in dictionary form by ReadColumnDict, falling
	// back to PLAIN pages part way.
	type row struct {
		S *string `parquet:"s,optional,dict"`
	}
	rows := make([]row, 300)
	for i := range rows {
		if i%5 != 0 {
			v := fmt.Sprintf("v%d", i%3)
			if i >= 150 {
				v = fmt.Sprintf("u%d", i)
			}
			rows[i].S = &v
		}
	}
	b, err := os.ReadFile(writeParquet(f, rows, parquet.PageBufferSize(256), parquet.DictionaryMaxBytes(300)))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		checkNoPanic(t, dir, b)
	})
}

// TestDescriptors: Open holds no descriptor, ReadColumn holds at most one per
// File (shared by concurrent calls), Close releases it (B26: thousands of
// files under a low open-file limit).
func TestDescriptors(t *testing.T) {
	path := casePath("B19-corrupt-files", "good.parquet")
	files := make([]*File, 300)
	for i := range files {
		f, err := Open(path, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if f.local.fd != nil {
			t.Fatal("Open kept a descriptor")
		}
		files[i] = f
	}
	f := files[0]
	done := make(chan error)
	reads := 0
	for rg := range f.RowGroups() {
		for _, ci := range f.Columns() {
			reads++
			go func() {
				_, err := f.ReadColumn(rg, ci)
				done <- err
			}()
		}
	}
	if reads != 6 {
		t.Fatalf("%d column chunks, want 3 row groups of 2 columns", reads)
	}
	for range reads {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if f.local.fd == nil {
		t.Fatal("no descriptor after ReadColumn")
	}
	for _, f := range files {
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if f.local.fd != nil {
			t.Fatal("Close kept the descriptor")
		}
	}
	// Close does not end the File: reading again reopens, Close releases.
	if _, err := f.ReadColumn(0, f.Columns()[0]); err != nil || f.local.fd == nil {
		t.Fatalf("ReadColumn after Close: %v", err)
	}
	if err := f.Close(); err != nil || f.local.fd != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("third Close: %v", err)
	}
}

// TestFooterListCountChecked: a footer whose first field is a list claiming
// 2^31-1 structs in a few bytes is refused before parquet-go's decoder would
// allocate them.
func TestFooterListCountChecked(t *testing.T) {
	// Field 2 (schema), type list (9): header 0x29; list of structs (12)
	// with a long-form size: 0xfc, then varint 2^31-1.
	b := []byte{0x29, 0xfc, 0xff, 0xff, 0xff, 0xff, 0x07, 0x00}
	_, err := checkThrift(b)
	if err == nil || !strings.Contains(err.Error(), "exceeds the 1 bytes left") {
		t.Fatalf("err = %v", err)
	}
}

// TestTruncatedWhileReading: a file cut short after its first column chunk
// was read (the descriptor open) must fail the later reads with ErrChanged
// ("file changed while reading") naming the file, never crash with SIGBUS
// nor report a recovered panic, and the File must still close. Cut to
// nothing and to the middle of its data, for ReadColumn and ColumnReader.
func TestTruncatedWhileReading(t *testing.T) {
	b, err := os.ReadFile(casePath("B19-corrupt-files", "good.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	for _, inside := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "shrinks.parquet")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		f := mustOpen(t, path)
		cols := f.Columns()
		cut := int64(0)
		if inside { // one byte into the last column chunk
			rg := f.meta.RowGroups[len(f.meta.RowGroups)-1]
			cut, _ = chunkRange(&rg.Columns[len(cols)-1].MetaData)
			cut++
		}
		if _, err := f.ReadColumn(0, cols[0]); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, cut); err != nil {
			t.Fatal(err)
		}
		last := len(f.RowGroups()) - 1
		_, err = f.ReadColumn(last, cols[len(cols)-1])
		wantErr(t, err, ErrChanged, "shrinks.parquet", "file changed while reading")
		if strings.Contains(err.Error(), "panic") {
			t.Errorf("cut at %d: %v", cut, err)
		}
		r, err := f.ColumnReader(last, cols[len(cols)-1])
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.Next(1)
		wantErr(t, err, ErrChanged, "shrinks.parquet", "file changed while reading")
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		// A File opened afterwards reads the new size: refused at open.
		if _, err := Open(path, Limits{}); err == nil {
			t.Errorf("cut at %d: Open of the truncated file succeeds", cut)
		}
	}
}
