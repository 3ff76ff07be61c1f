package pqread

import (
	"bytes"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// nestedListsHeader returns a page header struct whose first field is an
// unknown field (id 100) holding depth lists nested one in another, the
// innermost holding one byte, then a stop byte: the hostile case of a 4 MB
// file whose first page header overflowed parquet-go's recursive skip.
func nestedListsHeader(depth int) []byte {
	b := []byte{0x09, 0xc8, 0x01} // long-form field header: type list, id zigzag(100)
	b = append(b, 0x19)           // the outermost list: one element, a list
	b = append(b, bytes.Repeat([]byte{0x19}, depth-2)...)
	b = append(b, 0x13, 0x07, 0x00) // the innermost: one byte; then the struct's stop
	return b
}

// goodPageHeader returns the thrift bytes of a small data page header.
func goodPageHeader(t testing.TB) []byte {
	h := format.PageHeader{Type: format.DataPage, UncompressedPageSize: 8, CompressedPageSize: 8}
	h.DataPageHeader.Set(format.DataPageHeader{NumValues: 1, Encoding: format.Plain})
	b, err := thrift.Marshal(new(thrift.CompactProtocol), &h)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPageHeaderNestingBounded pins the stack overflow of a page header
// holding 4M nested lists in an unknown field: the header is refused as
// nested too deep, without recursion, and a header at the depth limit
// still decodes.
func TestPageHeaderNestingBounded(t *testing.T) {
	var h format.PageHeader
	_, err := decodePageHeader(nestedListsHeader(4<<20), &h)
	if err == nil || !strings.Contains(err.Error(), "nesting deeper than 64") {
		t.Fatalf("4M nested lists: %v, want nesting deeper than 64", err)
	}
	// 63 lists inside the header struct: 64 levels, the most allowed.
	if _, err := thriftStructLen(nestedListsHeader(63)); err != nil {
		t.Errorf("64 levels: %v", err)
	}
	if _, err := thriftStructLen(nestedListsHeader(64)); err == nil {
		t.Errorf("65 levels: no error")
	}
	good := goodPageHeader(t)
	n, err := decodePageHeader(append(append([]byte(nil), good...), 0xff, 0xff), &h)
	if err != nil || n != len(good) || h.Type != format.DataPage || h.CompressedPageSize != 8 {
		t.Fatalf("good header: n %d (want %d), %v, %+v", n, len(good), err, h)
	}
}

// TestFooterNestingBounded: the footer walker refuses nesting beyond 64
// levels with the same iterative walk.
func TestFooterNestingBounded(t *testing.T) {
	if _, err := checkThrift(nestedListsHeader(4 << 20)); err == nil || !strings.Contains(err.Error(), "nesting deeper than 64") {
		t.Fatalf("4M nested lists: %v", err)
	}
}

// FuzzPageHeader feeds arbitrary bytes to the page header decoder, seeded
// with the hostile nesting case, a good header and its truncations. It
// must never panic; when it accepts a header, the walk and parquet-go's
// decoder agree on its length, which is inside the input.
func FuzzPageHeader(f *testing.F) {
	good := goodPageHeader(f)
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add(nestedListsHeader(200))
	f.Add(nestedListsHeader(64))
	f.Add([]byte{0x09, 0xc8, 0x01, 0xf9, 0xff, 0xff, 0xff, 0xff, 0x07})
	f.Fuzz(func(t *testing.T, b []byte) {
		var h format.PageHeader
		n, err := decodePageHeader(b, &h)
		if err != nil {
			return
		}
		if n <= 0 || n > len(b) {
			t.Fatalf("header length %d of %d bytes", n, len(b))
		}
		m, err := thriftStructLen(b[:n])
		if err != nil || m != n {
			t.Fatalf("walk of the accepted header: %d, %v; decoded %d", m, err, n)
		}
	})
}
