package source

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"sync"

	workers "github.com/prepml/prep/internal/pool" // pool is the descriptor pool (local.go)
)

// Range is a byte range [Off, Off+Len) of an object.
type Range struct {
	Off, Len int64
}

// Prefetcher is implemented by Objects that can fetch byte ranges ahead of
// the ReadAt calls that will ask for them (object stores). Prefetch returns
// at once; the ranges are coalesced (holes up to the store's coalesce gap
// merged, merged spans capped at its part size), queued for the read-ahead
// budget in call order, and fetched in the background. A ReadAt inside a
// prefetched span waits for it and is served from it; the span's memory is
// returned once every range in it has been read, or at Close. Call it with
// the ranges in the order they will be read, one call per unit of work
// (a row group), so one call's spans are granted together.
type Prefetcher interface {
	Prefetch(ranges []Range)
}

// s3Object is one object of an S3Store opened for ranged reads.
type s3Object struct {
	s    *S3Store
	name string
	key  string
	etag string // pinned version: sent as If-Match with every read
	size int64

	pinnedAtPlan bool // etag came from the plan (OpenVersion), not the first read

	tailOff int64
	tail    []byte // the object's last bytes (its footer), read at open
	head    []byte // its first bytes, when read ahead (Preopen)

	ctx    context.Context // reads of the object; cancelled by Close
	cancel context.CancelFunc

	bg     sync.WaitGroup // Prefetch goroutines
	mu     sync.Mutex
	spans  []*span // prefetched, by Off
	closed bool
}

// span is one coalesced prefetch: [off, off+len(buf)) holding the needed
// ranges in want.
type span struct {
	off, n int64
	want   []Range
	read   []bool // want[i] was read
	left   int
	share  *sharedRes // the Prefetch call's reservation, once fetched
	done   chan struct{}
	buf    []byte // nil until fetched, and again once released
	err    error
	gone   bool // released: reads fall back to a direct GET
}

func (o *s3Object) url() string { return "s3://" + o.s.bucket + "/" + o.key }

// Name returns the object's key relative to its store's root.
func (o *s3Object) Name() string { return o.name }

// Identity returns the ETag the object's reads are pinned to.
func (o *s3Object) Identity() string { return o.etag }

// Size returns the object's size in bytes (from the Content-Range of the
// first read).
func (o *s3Object) Size() int64 { return o.size }

// openTail reads the object's tail with one suffix-range GET (a second
// when the footer does not fit the first), learning size and ETag.
func (o *s3Object) openTail(ctx context.Context) error {
	c := o.s.c
	o.ctx, o.cancel = context.WithCancel(ctx)
	guess := c.o.FooterGuess
	var buf []byte
	res, err := c.get(o.ctx, o.s.bucket, o.key, "bytes=-"+strconv.FormatInt(guess, 10), o.etag, guess, -1,
		func(n int64) ([]byte, error) {
			if n > guess {
				return nil, fmt.Errorf("server sent %d bytes for a %d-byte suffix range", n, guess)
			}
			buf = make([]byte, n)
			return buf, nil
		})
	if errors.Is(err, errEmptyObject) {
		// Zero bytes: footer reports "file too small: 0 bytes" as for a
		// local empty file.
		o.size, o.tailOff, o.tail = 0, 0, nil
		if o.etag == "" {
			o.etag = res.etag
		}
		return nil
	}
	if err != nil {
		o.cancel()
		return o.openErr(err)
	}
	if res.start+int64(len(buf)) != res.total {
		o.cancel()
		return &RangeError{URL: o.url(), Off: guess, Len: -1, Attempts: 1, Err: fmt.Errorf("suffix range answered with bytes from %d of %d", res.start, res.total)}
	}
	o.size, o.tailOff, o.tail = res.total, res.start, buf
	if o.etag == "" {
		o.etag = res.etag
	}
	// The footer, its length and the magic: fetch what the guess missed.
	if len(buf) >= trailerBytes && o.tailOff > 0 && string(buf[len(buf)-4:]) == "PAR1" {
		need := int64(binary.LittleEndian.Uint32(buf[len(buf)-trailerBytes:])) + trailerBytes
		if need > int64(len(buf)) && need <= o.size {
			more := make([]byte, need-int64(len(buf)))
			if err := o.fetch(more, o.size-need); err != nil {
				o.cancel()
				return err
			}
			o.tail = append(more, buf...)
			o.tailOff = o.size - need
		} else if need < int64(len(buf)) {
			// Keep the footer only: a convert holds every file open at
			// once, and the bytes before the footer are data pages, read
			// (once) when needed.
			o.tail = append([]byte(nil), buf[int64(len(buf))-need:]...)
			o.tailOff = o.size - need
		}
	}
	return nil
}

// readHead fetches and keeps the object's first 4 bytes (the leading
// magic every Parquet reader checks), unless the tail holds them.
func (o *s3Object) readHead() error {
	if o.tailOff == 0 || o.head != nil {
		return nil
	}
	h := make([]byte, min(4, o.size))
	if err := o.fetchOne(h, 0); err != nil {
		return err
	}
	o.head = h
	o.s.rememberHead(o)
	return nil
}

// rememberHead adds o's leading bytes to its cached footer.
func (s *S3Store) rememberHead(o *s3Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.tails[o.name]; ok && c.etag == o.etag && c.head == nil {
		c.head = o.head
		s.tails[o.name] = c
		s.tailBytes += int64(len(o.head))
	}
}

// trailerBytes is the footer length and "PAR1" at the end of a Parquet file.
const trailerBytes = 8

// openErr turns a failed If-Match into a *ChangedError naming the object
// and fills in the URL of a *RangeError.
func (o *s3Object) openErr(err error) error {
	if errors.Is(err, errPrecondition) {
		if o.pinnedAtPlan {
			return &ChangedError{File: o.name, What: "etag", Expected: o.etag, Actual: "of another version (If-Match failed)"}
		}
		return &ChangedError{File: o.name, What: "identity", Expected: "ETag " + o.etag, Actual: "replaced by another version"}
	}
	var re *RangeError
	if errors.As(err, &re) {
		re.URL = o.url()
	}
	return err
}

// ReadAt reads len(p) bytes at off (io.ReaderAt's contract): from the tail
// read at open, from a prefetched span, or with ranged GETs of at most the
// part size, fetched in parallel within the client's concurrency limit.
// Errors: a *RangeError naming the object, range, attempts and last cause;
// a changed object (the ETag no longer matches) gives a *ChangedError.
func (o *s3Object) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%s: negative offset %d", o.url(), off)
	}
	if off >= o.size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	want := p
	if off+int64(len(p)) > o.size {
		want = p[:o.size-off]
	}
	o.s.c.n.needed.Add(int64(len(want)))
	if off >= o.tailOff && off+int64(len(want)) <= o.tailOff+int64(len(o.tail)) {
		copy(want, o.tail[off-o.tailOff:])
	} else if off+int64(len(want)) <= int64(len(o.head)) {
		copy(want, o.head[off:])
	} else if ok, err := o.fromSpan(want, off); err != nil {
		return 0, err
	} else if !ok {
		if err := o.fetch(want, off); err != nil {
			return 0, err
		}
	}
	if len(want) < len(p) {
		return len(want), io.EOF
	}
	return len(p), nil
}

// fetch reads dst at off with GETs of at most the part size, in parallel.
func (o *s3Object) fetch(dst []byte, off int64) error {
	part := o.s.c.o.PartBytes
	nparts := (int64(len(dst)) + part - 1) / part
	if nparts <= 1 {
		return o.fetchOne(dst, off)
	}
	// Every part at once (the pool's limit is nparts); the first error by
	// part is returned.
	return workers.ForEach(context.Background(), int(nparts), int(nparts), func(i int) error {
		lo, hi := int64(i)*part, min(int64(i+1)*part, int64(len(dst)))
		return o.fetchOne(dst[lo:hi], off+lo)
	})
}

// fetchOne reads dst at off with one ranged GET (retried).
func (o *s3Object) fetchOne(dst []byte, off int64) error {
	if len(dst) == 0 {
		return nil
	}
	n := int64(len(dst))
	rng := "bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(off+n-1, 10)
	res, err := o.s.c.get(o.ctx, o.s.bucket, o.key, rng, o.etag, off, n, func(length int64) ([]byte, error) {
		if length != n {
			return nil, fmt.Errorf("server sent %d bytes for a %d-byte range", length, n)
		}
		return dst, nil
	})
	if err != nil {
		return o.openErr(err)
	}
	if res.start != off || res.total != o.size {
		return &ChangedError{File: o.name, What: "size", Expected: strconv.FormatInt(o.size, 10), Actual: strconv.FormatInt(res.total, 10)}
	}
	return nil
}

// Prefetch coalesces ranges and fetches them in the background (see
// Prefetcher). Ranges outside the object, empty, or inside the tail read
// at open are ignored.
func (o *s3Object) Prefetch(ranges []Range) {
	var rs []Range
	for _, r := range ranges {
		if r.Len <= 0 || r.Off < 0 || r.Off+r.Len > o.size {
			continue
		}
		if r.Off >= o.tailOff && r.Off+r.Len <= o.tailOff+int64(len(o.tail)) {
			continue
		}
		rs = append(rs, r)
	}
	if len(rs) == 0 {
		return
	}
	c := o.s.c
	groups := Coalesce(rs, c.o.CoalesceGap, c.o.PartBytes)
	var total int64
	spans := make([]*span, 0, len(groups))
	for _, g := range groups {
		sp := &span{off: g.Off, n: g.Len, want: g.Ranges, read: make([]bool, len(g.Ranges)), left: len(g.Ranges), done: make(chan struct{})}
		spans = append(spans, sp)
		total += g.Len
	}
	res := c.budget.reserve(total)
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return
	}
	o.spans = append(o.spans, spans...)
	sort.Slice(o.spans, func(i, j int) bool { return o.spans[i].off < o.spans[j].off })
	o.bg.Add(1)
	o.mu.Unlock()
	go func() {
		defer o.bg.Done()
		if !res.wait(o.ctx) {
			for _, sp := range spans {
				sp.err = o.ctx.Err()
				close(sp.done)
			}
			return
		}
		// One reservation for the call; each span returns its share
		// when it is dropped (read through, failed, or closed).
		shares := &sharedRes{res: res, left: int64(len(spans))}
		o.mu.Lock()
		for _, sp := range spans {
			sp.share = shares
		}
		o.mu.Unlock()
		var wg sync.WaitGroup
		for _, sp := range spans {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, sp.n)
				err := o.fetch(buf, sp.off)
				o.mu.Lock()
				sp.buf, sp.err = buf, err
				if err != nil || o.closed {
					o.dropLocked(sp)
				}
				o.mu.Unlock()
				close(sp.done)
			}()
		}
		wg.Wait()
	}()
}

// sharedRes is one Prefetch call's reservation, released when its last
// span is.
type sharedRes struct {
	res  *reservation
	left int64
}

// fromSpan serves a read from a prefetched span holding all of it: false
// when none does.
func (o *s3Object) fromSpan(dst []byte, off int64) (bool, error) {
	end := off + int64(len(dst))
	o.mu.Lock()
	var sp *span
	i := sort.Search(len(o.spans), func(i int) bool { return o.spans[i].off+o.spans[i].n > off })
	for ; i < len(o.spans) && o.spans[i].off <= off; i++ {
		if s := o.spans[i]; !s.gone && end <= s.off+s.n {
			sp = s
			break
		}
	}
	o.mu.Unlock()
	if sp == nil {
		return false, nil
	}
	<-sp.done
	o.mu.Lock()
	defer o.mu.Unlock()
	if sp.err != nil {
		if o.closed {
			return false, fmt.Errorf("%s: read after close", o.url())
		}
		return false, sp.err
	}
	if sp.gone {
		return false, nil // released while we waited: read it directly
	}
	copy(dst, sp.buf[off-sp.off:])
	for k, r := range sp.want {
		if !sp.read[k] && r.Off >= off && r.Off+r.Len <= end {
			sp.read[k] = true
			sp.left--
		}
	}
	if sp.left == 0 {
		o.dropLocked(sp)
	}
	return true, nil
}

// dropLocked releases a span's memory and its share of the reservation,
// if it was granted (o.mu held).
func (o *s3Object) dropLocked(sp *span) {
	if sp.gone {
		return
	}
	sp.gone, sp.buf = true, nil
	if sp.share != nil {
		if sp.share.left--; sp.share.left == 0 {
			sp.share.res.release()
		}
	}
	for i, s := range o.spans {
		if s == sp {
			o.spans = append(o.spans[:i], o.spans[i+1:]...)
			break
		}
	}
}

// Close cancels reads in flight and releases prefetched memory, waiting
// for background fetches to end. It is safe to call twice.
func (o *s3Object) Close() error {
	o.cancel()
	o.mu.Lock()
	was := o.closed
	o.closed = true
	o.mu.Unlock()
	o.bg.Wait()
	if was {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, sp := range append([]*span(nil), o.spans...) {
		o.dropLocked(sp)
	}
	return nil
}

// Group is a span of coalesced ranges: [Off, Off+Len) covering Ranges.
type Group struct {
	Off, Len int64
	Ranges   []Range
}

// Coalesce merges byte ranges into spans to fetch: ranges are sorted by
// offset, and a range joins the span before it when the hole between them
// is at most gap bytes (gap < 0: only overlapping or touching ranges) and
// the merged span stays within maxLen bytes (<= 0: no cap); a single range
// longer than maxLen is a span of its own. Overlapping ranges share bytes
// and are fetched once. The bytes fetched beyond those needed are the holes
// merged: at most gap per merge.
func Coalesce(ranges []Range, gap, maxLen int64) []Group {
	rs := append([]Range(nil), ranges...)
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].Off != rs[j].Off {
			return rs[i].Off < rs[j].Off
		}
		return rs[i].Len < rs[j].Len
	})
	var out []Group
	for _, r := range rs {
		if r.Len <= 0 {
			continue
		}
		if n := len(out); n > 0 {
			g := &out[n-1]
			end := g.Off + g.Len
			newEnd := max(end, r.Off+r.Len)
			hole := r.Off - end
			if (hole <= 0 || gap >= 0 && hole <= gap) && (maxLen <= 0 || newEnd-g.Off <= maxLen || r.Off+r.Len <= end) {
				g.Len = newEnd - g.Off
				g.Ranges = append(g.Ranges, r)
				continue
			}
		}
		out = append(out, Group{Off: r.Off, Len: r.Len, Ranges: []Range{r}})
	}
	return out
}
