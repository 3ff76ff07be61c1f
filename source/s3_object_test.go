package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"

	"github.com/prepml/prep/plan"
)

func TestOpenReadsFooterInOneRequest(t *testing.T) {
	e := newS3Env(t, S3Options{FooterGuess: 4096})
	data := fakeParquet(1<<20, 1000, 10)
	e.put(t, "f.parquet", data)
	obj, err := e.store(t).Open(context.Background(), "f.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	ft, err := obj.(*s3Object).footer(0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ft.Meta, data[len(data)-1008:len(data)-8]) || ft.Size != 1<<20 || ft.Offset != 1<<20-1008 {
		t.Fatalf("footer: size %d offset %d", ft.Size, ft.Offset)
	}
	if c := e.srv.Counts(); c.Gets != 1 || c.GetBytes != 4096 {
		t.Fatalf("counts %+v, want 1 GET of 4096 bytes", c)
	}
	if obj.Size() != 1<<20 || obj.Identity() != `"`+md5hex(data)+`"` || obj.Name() != "f.parquet" {
		t.Fatalf("size %d identity %s name %s", obj.Size(), obj.Identity(), obj.Name())
	}
}

func TestOpenLongFooterTakesTwoRequests(t *testing.T) {
	e := newS3Env(t, S3Options{FooterGuess: 4096})
	data := fakeParquet(1<<20, 10_000, 11)
	e.put(t, "f.parquet", data)
	obj, err := e.store(t).Open(context.Background(), "f.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	ft, err := obj.(*s3Object).footer(0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ft.Meta, data[len(data)-10_008:len(data)-8]) {
		t.Fatal("footer bytes differ")
	}
	if c := e.srv.Counts(); c.Gets != 2 || c.GetBytes != 10_008 {
		t.Fatalf("counts %+v, want 2 GETs of 10008 bytes", c)
	}
}

func TestOpenSmallObjectWhole(t *testing.T) {
	e := newS3Env(t, S3Options{FooterGuess: 4096})
	data := fakeParquet(1000, 100, 12)
	e.put(t, "s.parquet", data)
	obj, err := e.store(t).Open(context.Background(), "s.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	p := make([]byte, 1000)
	if n, err := obj.ReadAt(p, 0); n != 1000 || err != nil || !bytes.Equal(p, data) {
		t.Fatalf("ReadAt = %d, %v", n, err)
	}
	// Past the end: io.ReaderAt's contract.
	q := make([]byte, 10)
	if n, err := obj.ReadAt(q, 995); n != 5 || err != io.EOF || !bytes.Equal(q[:5], data[995:]) {
		t.Fatalf("ReadAt past end = %d, %v", n, err)
	}
	if n, err := obj.ReadAt(q, 1000); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt at end = %d, %v", n, err)
	}
	if c := e.srv.Counts(); c.Gets != 1 {
		t.Fatalf("%d GETs, want 1 (the whole object came with the first)", c.Gets)
	}
}

func TestReadAtSplitsIntoParallelParts(t *testing.T) {
	e := newS3Env(t, S3Options{FooterGuess: 1024, PartBytes: 64 << 10})
	data := fakeParquet(1<<20, 100, 13)
	e.put(t, "p.parquet", data)
	obj, err := e.store(t).Open(context.Background(), "p.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	p := make([]byte, 300<<10)
	if _, err := obj.ReadAt(p, 100); err != nil || !bytes.Equal(p, data[100:100+300<<10]) {
		t.Fatalf("ReadAt: %v", err)
	}
	if c := e.srv.Counts(); c.Gets != 1+5 || c.GetBytes != 1024+300<<10 {
		t.Fatalf("counts %+v, want 1+5 GETs", c)
	}
}

func TestPrefetchCoalescesAndServes(t *testing.T) {
	e := newS3Env(t, S3Options{FooterGuess: 1024, CoalesceGap: 100, PartBytes: 1 << 20})
	data := fakeParquet(1<<20, 100, 14)
	e.put(t, "c.parquet", data)
	obj, err := e.store(t).Open(context.Background(), "c.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	// Three chunks 50 bytes apart (one span), one far away (another).
	rs := []Range{{1000, 5000}, {6050, 3000}, {9100, 2000}, {500_000, 7000}}
	obj.(Prefetcher).Prefetch(rs)
	for _, r := range []Range{rs[2], rs[0], rs[3], rs[1]} {
		p := make([]byte, r.Len)
		if _, err := obj.ReadAt(p, r.Off); err != nil || !bytes.Equal(p, data[r.Off:r.Off+r.Len]) {
			t.Fatalf("range %+v: %v", r, err)
		}
	}
	c := e.srv.Counts()
	if c.Gets != 1+2 || c.GetBytes != 1024+(11_100-1000)+7000 {
		t.Fatalf("counts %+v, want 3 GETs of %d bytes", c, 1024+(11_100-1000)+7000)
	}
	b := e.c.budget
	if b.held != 0 || b.peak != 10_100+7000 {
		t.Fatalf("budget held %d peak %d, want 0 and %d", b.held, b.peak, 17_100)
	}
	if st := e.c.Stats(); st.BytesNeeded != 17_000+8 && st.BytesNeeded != 17_000 {
		t.Fatalf("bytes needed %d", st.BytesNeeded)
	}
}

// TestPrefetchBudgetBoundsReadAhead: a second call waits for the first's
// bytes to be read before it is fetched.
func TestPrefetchBudgetBoundsReadAhead(t *testing.T) {
	e := newS3Env(t, S3Options{FooterGuess: 1024, ReadAheadBytes: 10_000})
	data := fakeParquet(1<<20, 100, 15)
	e.put(t, "b.parquet", data)
	obj, err := e.store(t).Open(context.Background(), "b.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	pf := obj.(Prefetcher)
	for i := int64(0); i < 5; i++ {
		pf.Prefetch([]Range{{Off: 10 + i*100_000, Len: 8000}})
	}
	for i := int64(0); i < 5; i++ {
		p := make([]byte, 8000)
		off := 10 + i*100_000
		if _, err := obj.ReadAt(p, off); err != nil || !bytes.Equal(p, data[off:off+8000]) {
			t.Fatalf("read %d: %v", i, err)
		}
	}
	if b := e.c.budget; b.peak != 8000 || b.held != 0 {
		t.Fatalf("peak %d held %d, want 8000 and 0", b.peak, b.held)
	}
	if c := e.srv.Counts(); c.Gets != 6 {
		t.Fatalf("%d GETs, want 6", c.Gets)
	}
}

// TestCloseReleasesPrefetch: spans never read are released by Close.
func TestCloseReleasesPrefetch(t *testing.T) {
	e := newS3Env(t, S3Options{FooterGuess: 1024})
	e.put(t, "x.parquet", fakeParquet(1<<20, 100, 16))
	obj, err := e.store(t).Open(context.Background(), "x.parquet")
	if err != nil {
		t.Fatal(err)
	}
	obj.(Prefetcher).Prefetch([]Range{{0, 1000}, {200_000, 1000}})
	p := make([]byte, 1000)
	if _, err := obj.ReadAt(p, 0); err != nil { // waits for the fetch
		t.Fatal(err)
	}
	obj.Close()
	obj.Close()
	if b := e.c.budget; b.held != 0 {
		t.Fatalf("held %d after Close", b.held)
	}
}

func TestCoalesce(t *testing.T) {
	rs := []Range{{100, 10}, {0, 50}, {60, 30}, {115, 5}, {1000, 10}, {1005, 2}}
	got := Coalesce(rs, 10, 0)
	want := []Group{
		{Off: 0, Len: 120, Ranges: []Range{{0, 50}, {60, 30}, {100, 10}, {115, 5}}},
		{Off: 1000, Len: 10, Ranges: []Range{{1000, 10}, {1005, 2}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("gap 10:\n%+v\nwant\n%+v", got, want)
	}
	got = Coalesce(rs, 10, 100) // the cap splits the first span
	want = []Group{
		{Off: 0, Len: 90, Ranges: []Range{{0, 50}, {60, 30}}},
		{Off: 100, Len: 20, Ranges: []Range{{100, 10}, {115, 5}}},
		{Off: 1000, Len: 10, Ranges: []Range{{1000, 10}, {1005, 2}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("cap 100:\n%+v\nwant\n%+v", got, want)
	}
	if got := Coalesce(rs, -1, 0); len(got) != 5 {
		t.Fatalf("gap -1: %d groups, want 5 (only the overlap merged)", len(got))
	}
}

// TestPreopenHandsOverOpenedObjects: Preopen fetches each footer and
// leading magic ahead; the Opens that follow and pqread's reads of those
// bytes cost no request, and Close closes what no Open took.
func TestPreopenHandsOverOpenedObjects(t *testing.T) {
	e := newS3Env(t, S3Options{FooterGuess: 4096})
	var files []plan.SourceFile
	var names []string
	pins := map[string]string{}
	for i := range 5 {
		name := fmt.Sprintf("f%d.parquet", i)
		etag := e.put(t, name, fakeParquet(100_000, 500, uint64(30+i)))
		if i%2 == 0 {
			pins[name] = etag // head and tail fetched side by side
		}
		files = append(files, plan.SourceFile{Path: name, Size: 100_000})
		names = append(names, name)
	}
	st := e.store(t)
	st.Pin(pins)
	ctx := context.Background()
	st.Preopen(ctx, files)
	for _, n := range names[:4] {
		obj, err := st.Open(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		var head [4]byte
		if _, err := obj.ReadAt(head[:], 0); err != nil || string(head[:]) != "PAR1" {
			t.Fatalf("%s: head %q, %v", n, head, err)
		}
		if _, err := obj.(*s3Object).footer(0); err != nil {
			t.Fatal(err)
		}
		if got := len(obj.(*s3Object).tail); got != 508 {
			t.Errorf("%s: tail of %d bytes kept, want the 508 of the footer", n, got)
		}
		obj.Close()
	}
	st.Close() // waits for the fifth, never opened
	if c := e.srv.Counts(); c.Gets != 10 {
		t.Fatalf("%d GETs, want 10 (tail and head of each of 5)", c.Gets)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.opened != nil {
		t.Fatal("Close kept preopened objects")
	}
}

// TestReopenFromFooterCache: a second Open of an object reads nothing
// (its footer is cached), and its reads stay pinned to the cached ETag.
func TestReopenFromFooterCache(t *testing.T) {
	e := newS3Env(t, S3Options{FooterGuess: 4096})
	data := fakeParquet(100_000, 500, 40)
	e.put(t, "c.parquet", data)
	st := e.store(t)
	ctx := context.Background()
	for range 3 {
		obj, err := st.Open(ctx, "c.parquet")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := obj.(*s3Object).footer(0); err != nil {
			t.Fatal(err)
		}
		obj.Close()
	}
	if c := e.srv.Counts(); c.Gets != 1 {
		t.Fatalf("%d GETs for three opens, want 1", c.Gets)
	}
	data[50_000] ^= 1
	e.put(t, "c.parquet", data)
	obj, err := st.Open(ctx, "c.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	var ce *ChangedError
	if _, err := obj.ReadAt(make([]byte, 100), 50_000); !errors.As(err, &ce) {
		t.Fatalf("read of a replaced object through a cached footer: %v, want *ChangedError", err)
	}
}
