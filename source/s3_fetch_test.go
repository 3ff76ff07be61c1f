package source

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/prepml/prep/internal/s3test"
)

// fakeParquet returns size bytes framed like a Parquet file: "PAR1", data,
// a footer of footerLen bytes, its length and "PAR1".
func fakeParquet(size, footerLen int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	copy(b, "PAR1")
	binary.LittleEndian.PutUint32(b[size-8:], uint32(footerLen))
	copy(b[size-4:], "PAR1")
	return b
}

// readBack opens key and reads [off, off+n).
func readBack(t *testing.T, e *s3env, key string, off, n int64) ([]byte, error) {
	t.Helper()
	obj, err := e.store(t).Open(context.Background(), key)
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	p := make([]byte, n)
	_, err = obj.ReadAt(p, off)
	return p, err
}

// TestFaultsRetried pins each retryable fault: the read succeeds with the
// right bytes after exactly the injected number of retries. Without the
// retry of that cause the read fails.
func TestFaultsRetried(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault s3test.Fault
		k     int64
		ours  int64 // retries prep makes
	}{
		{"slowdown_503", s3test.SlowDown, 2, 2},
		{"internal_500", s3test.Internal, 1, 1},
		// net/http itself resends an idempotent request once when a
		// reused connection dies before the response: the first reset
		// (on the connection the open used) is absorbed there, the
		// second (on a fresh connection) reaches prep's retry.
		{"connection_reset", s3test.Reset, 2, 1},
		{"truncated_body", s3test.Truncate, 1, 1},
		{"stalled_body", s3test.Stall, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stall := 30 * time.Second // the default: no healthy response is cut short on a loaded machine
			if tc.fault == s3test.Stall {
				stall = time.Second
			}
			e := newS3Env(t, S3Options{StallTimeout: stall, FooterGuess: 1024})
			data := fakeParquet(1<<20, 100, 1)
			e.put(t, "a.parquet", data)
			obj, err := e.store(t).Open(context.Background(), "a.parquet")
			if err != nil {
				t.Fatal(err)
			}
			defer obj.Close()
			// Faults hit the column-chunk read only, not the open.
			e.proxy.SetFault(s3test.Nth(tc.k, tc.fault, s3test.IsRangedGet))
			before := e.c.Stats()
			p := make([]byte, 200_000)
			if _, err := obj.ReadAt(p, 4096); err != nil {
				t.Fatalf("read failed: %v", err)
			}
			if !bytes.Equal(p, data[4096:4096+200_000]) {
				t.Fatal("bytes differ")
			}
			st := e.c.Stats()
			if got := st.Retries - before.Retries; got != tc.ours {
				t.Errorf("retries %d, want %d", got, tc.ours)
			}
			if got := st.Requests - before.Requests; got != tc.ours+1 {
				t.Errorf("requests %d, want %d", got, tc.ours+1)
			}
			if got := e.proxy.Injected(); got != tc.k {
				t.Errorf("faults injected %d, want %d", got, tc.k)
			}
			if st.BytesNeeded-before.BytesNeeded != 200_000 {
				t.Errorf("bytes needed %d, want 200000", st.BytesNeeded-before.BytesNeeded)
			}
		})
	}
}

// virtualClock is a client's clock in the retry tests: sleeps advance it
// at once, so an outage of seconds is ridden out in no wall time and the
// times in messages are exact.
type virtualClock struct {
	mu  sync.Mutex
	t   time.Time
	off time.Duration // time slept so far
}

func (v *virtualClock) now() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.t.Add(v.off)
}

func (v *virtualClock) sleep(ctx context.Context, d time.Duration) error {
	v.mu.Lock()
	v.off += d
	v.mu.Unlock()
	return ctx.Err()
}

func (v *virtualClock) elapsed() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.off
}

// useVirtualClock makes c sleep on a virtual clock and returns it.
func useVirtualClock(c *S3Client) *virtualClock {
	v := &virtualClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.now, c.sleep = v.now, v.sleep
	return v
}

// TestRetriesExhausted: with MaxAttempts set, that many attempts, then an
// error naming the object, the byte range, the attempts, the time they
// took and the last cause.
func TestRetriesExhausted(t *testing.T) {
	e := newS3Env(t, S3Options{MaxAttempts: 3, FooterGuess: 1024, BaseBackoff: 100 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	clock := useVirtualClock(e.c)
	data := fakeParquet(64<<10, 100, 2)
	e.put(t, "dir/b.parquet", data)
	obj, err := e.store(t).Open(context.Background(), "dir/b.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	e.proxy.SetFault(func(*http.Request, int64) s3test.Fault { return s3test.SlowDown })
	_, err = obj.ReadAt(make([]byte, 1000), 10)
	var re *RangeError
	if !errors.As(err, &re) || !errors.Is(err, ErrRetriesExhausted) {
		t.Fatalf("error %v, want a *RangeError wrapping ErrRetriesExhausted", err)
	}
	if re.Attempts != 3 || re.Off != 10 || re.Len != 1000 || re.URL != "s3://data/dir/b.parquet" || re.Elapsed != clock.elapsed() {
		t.Errorf("RangeError %+v (slept %v)", re, clock.elapsed())
	}
	// Two delays drawn from [50 ms, 100 ms]: 0.1 s to 0.2 s.
	if re.Elapsed < 100*time.Millisecond || re.Elapsed > 200*time.Millisecond {
		t.Errorf("elapsed %v, want two delays of 50-100 ms", re.Elapsed)
	}
	want := fmt.Sprintf("reading s3://data/dir/b.parquet bytes [10, 1010): 3 attempts in %.1fs, last: retries exhausted (retry budget 1m0s): HTTP 503 SlowDown: Please reduce your request rate.", re.Elapsed.Seconds())
	if err.Error() != want {
		t.Errorf("message\n%s\nwant\n%s", err, want)
	}
	if e.proxy.Injected() != 3 {
		t.Errorf("injected %d faults, want 3", e.proxy.Injected())
	}
}

// TestRetryBudgetRidesOutOutage: an endpoint down for 10 s (every request
// reset or answered 503) is ridden out by the default budget: the read
// returns the right bytes, after more retries than a fixed handful of
// attempts would allow, with delays growing to MaxBackoff.
func TestRetryBudgetRidesOutOutage(t *testing.T) {
	e := newS3Env(t, S3Options{FooterGuess: 1024, BaseBackoff: DefaultBaseBackoff, MaxBackoff: DefaultMaxBackoff})
	clock := useVirtualClock(e.c)
	data := fakeParquet(256<<10, 100, 8)
	e.put(t, "o.parquet", data)
	obj, err := e.store(t).Open(context.Background(), "o.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	const outage = 10 * time.Second
	var n atomic.Int64
	e.proxy.SetFault(func(*http.Request, int64) s3test.Fault {
		if clock.elapsed() >= outage {
			return s3test.Pass
		}
		if n.Add(1)%2 == 0 {
			return s3test.Reset
		}
		return s3test.SlowDown
	})
	p := make([]byte, 100_000)
	if _, err := obj.ReadAt(p, 5000); err != nil {
		t.Fatalf("read across a %v outage: %v", outage, err)
	}
	if !bytes.Equal(p, data[5000:105_000]) {
		t.Fatal("bytes differ")
	}
	// 50 ms doubling to 5 s, each in [d/2, d): reaching 10 s takes at
	// least 7 retries (upper bounds 0.05+0.1+0.2+0.4+0.8+1.6+3.2 < 10).
	if r := e.c.Stats().Retries; r < 7 {
		t.Errorf("%d retries across a 10 s outage, want at least 7", r)
	}
	if el := clock.elapsed(); el < outage || el > outage+DefaultMaxBackoff {
		t.Errorf("slept %v, want between %v and %v", el, outage, outage+DefaultMaxBackoff)
	}
}

// TestRetryBudgetSpent: past the budget the read fails cleanly, wrapping
// ErrRetriesExhausted, the last delay cut to what the budget had left so
// that the time reported is the budget exactly.
func TestRetryBudgetSpent(t *testing.T) {
	e := newS3Env(t, S3Options{FooterGuess: 1024, RetryBudget: 3 * time.Second, BaseBackoff: DefaultBaseBackoff, MaxBackoff: DefaultMaxBackoff})
	clock := useVirtualClock(e.c)
	e.put(t, "d.parquet", fakeParquet(64<<10, 100, 9))
	obj, err := e.store(t).Open(context.Background(), "d.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	e.proxy.SetFault(func(*http.Request, int64) s3test.Fault { return s3test.Internal })
	_, err = obj.ReadAt(make([]byte, 100), 200)
	var re *RangeError
	if !errors.As(err, &re) || !errors.Is(err, ErrRetriesExhausted) {
		t.Fatalf("error %v, want a *RangeError wrapping ErrRetriesExhausted", err)
	}
	if re.Elapsed != 3*time.Second || clock.elapsed() != 3*time.Second {
		t.Errorf("elapsed %v, slept %v, want 3s both", re.Elapsed, clock.elapsed())
	}
	want := fmt.Sprintf("reading s3://data/d.parquet bytes [200, 300): %d attempts in 3.0s, last: retries exhausted (retry budget 3s): HTTP 500 InternalError: We encountered an internal error. Please try again.", re.Attempts)
	if err.Error() != want {
		t.Errorf("message\n%s\nwant\n%s", err, want)
	}
	if int64(re.Attempts) != e.proxy.Injected() || re.Attempts < 5 {
		t.Errorf("%d attempts, %d faults injected", re.Attempts, e.proxy.Injected())
	}
}

// TestListRetryBudget: a listing rides out an outage the same way and,
// past the budget, names the attempts and the time spent.
func TestListRetryBudget(t *testing.T) {
	e := newS3Env(t, S3Options{RetryBudget: 2 * time.Second, BaseBackoff: DefaultBaseBackoff, MaxBackoff: DefaultMaxBackoff})
	useVirtualClock(e.c)
	e.put(t, "l/a.parquet", fakeParquet(4096, 100, 10))
	e.proxy.SetFault(func(*http.Request, int64) s3test.Fault { return s3test.SlowDown })
	_, err := e.c.List(context.Background(), "s3://data/l/")
	if !errors.Is(err, ErrRetriesExhausted) || !strings.Contains(err.Error(), "attempts in 2.0s, last: HTTP 503 SlowDown") {
		t.Fatalf("error %v, want retries exhausted after 2.0s", err)
	}
}

// TestEmptyObjectTooSmall: a zero-byte object (S3 answers the suffix read
// 416) is "file too small: 0 bytes", as a local empty file is, not an
// HTTP error.
func TestEmptyObjectTooSmall(t *testing.T) {
	e := newS3Env(t, S3Options{})
	e.put(t, "e/empty.parquet", nil)
	_, err := e.c.DiscoverS3(context.Background(), []string{"s3://data/e/"})
	want := "s3://data/e/empty.parquet: corrupt parquet data: file too small: 0 bytes, a Parquet file has at least 12"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant %s", err, want)
	}
	if r := e.c.Stats().Retries; r != 0 {
		t.Errorf("%d retries of a 416", r)
	}
}

func TestBackoffGrowsWithJitter(t *testing.T) {
	c := &S3Client{o: S3Options{BaseBackoff: 100 * time.Millisecond, MaxBackoff: 1 * time.Second}}
	for attempt, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 9: time.Second} {
		for range 50 {
			if d := c.backoff(attempt); d < want/2 || d > want {
				t.Fatalf("backoff(%d) = %v, want in [%v, %v]", attempt, d, want/2, want)
			}
		}
	}
}

// TestFatalErrors: each is its own sentinel, tried once, with a message
// naming the object and never the secret.
func TestFatalErrors(t *testing.T) {
	e := newS3Env(t, S3Options{})
	e.put(t, "ok.parquet", fakeParquet(4096, 100, 3))
	e.put(t, "secret/x.parquet", fakeParquet(4096, 100, 3))
	e.srv.Deny("data/secret/")
	bad := newS3Env(t, S3Options{Config: testConfig("AKIAWRONGWRONGWRONG0", "wrong-secret-value")})
	for _, tc := range []struct {
		name  string
		c     *S3Client
		store string
		key   string
		want  error
		msg   string
	}{
		{"access_denied", e.c, "s3://data/", "secret/x.parquet", ErrAccessDenied, "reading s3://data/secret/x.parquet last 65536 bytes: access denied (HTTP 403 AccessDenied: Access Denied)"},
		{"no_bucket", e.c, "s3://nothere/", "ok.parquet", ErrNoBucket, "reading s3://nothere/ok.parquet last 65536 bytes: no such bucket (HTTP 404 NoSuchBucket: The specified bucket does not exist)"},
		{"no_key", e.c, "s3://data/", "missing.parquet", fs.ErrNotExist, "reading s3://data/missing.parquet last 65536 bytes: no such key: file does not exist"},
		{"bad_credentials", bad.c, "s3://data/", "ok.parquet", ErrBadCredentials, "reading s3://data/ok.parquet last 65536 bytes: bad or missing credentials (HTTP 403 InvalidAccessKeyId: The AWS Access Key Id you provided does not exist in our records.)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := tc.c.Store(tc.store)
			if err != nil {
				t.Fatal(err)
			}
			before := tc.c.Stats()
			_, err = st.Open(context.Background(), tc.key)
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if err.Error() != tc.msg {
				t.Errorf("message\n%s\nwant\n%s", err, tc.msg)
			}
			if strings.Contains(err.Error(), "wrong-secret-value") || strings.Contains(err.Error(), s3test.SecretKey) {
				t.Error("message carries a secret")
			}
			if n := tc.c.Stats().Requests - before.Requests; n != 1 {
				t.Errorf("%d requests, want 1 (not retried)", n)
			}
		})
	}
}

// TestReplacedMidRun: an object replaced after it was opened fails the
// next read with a *ChangedError naming it, never mixing versions.
func TestReplacedMidRun(t *testing.T) {
	e := newS3Env(t, S3Options{FooterGuess: 1024})
	e.put(t, "r.parquet", fakeParquet(64<<10, 100, 4))
	obj, err := e.store(t).Open(context.Background(), "r.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	p := make([]byte, 1000)
	if _, err := obj.ReadAt(p, 0); err != nil {
		t.Fatal(err)
	}
	e.put(t, "r.parquet", fakeParquet(64<<10, 100, 5)) // same size, new bytes
	_, err = obj.ReadAt(p, 1000)
	var ce *ChangedError
	if !errors.As(err, &ce) || ce.File != "r.parquet" {
		t.Fatalf("error %v, want *ChangedError naming r.parquet", err)
	}
}

// TestOpenVersionPinsPlanETag: opening with the ETag seen at plan time
// fails once the object was replaced, at the first request.
func TestOpenVersionPinsPlanETag(t *testing.T) {
	e := newS3Env(t, S3Options{})
	old := e.put(t, "v.parquet", fakeParquet(4096, 100, 6))
	e.put(t, "v.parquet", fakeParquet(4096, 100, 7))
	_, err := e.store(t).OpenVersion(context.Background(), "v.parquet", old)
	var ce *ChangedError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v, want *ChangedError", err)
	}
	if c := e.srv.Counts(); c.Gets != 1 || c.GetBytes != 0 {
		t.Errorf("counts %+v, want one GET and no body", c)
	}
}

func TestParseContentRange(t *testing.T) {
	a, b, n, err := parseContentRange("bytes 10-19/100")
	if err != nil || a != 10 || b != 19 || n != 100 {
		t.Fatalf("got %d %d %d %v", a, b, n, err)
	}
	for _, bad := range []string{"bytes */100", "bytes 10-9/100", "bytes 0-99/99", "items 0-1/2", ""} {
		if _, _, _, err := parseContentRange(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestByteBudgetOrderAndOversize(t *testing.T) {
	b := newByteBudget(100)
	r1 := b.reserve(80)
	r2 := b.reserve(500) // larger than the budget: runs alone
	r3 := b.reserve(10)
	ctx := context.Background()
	if !r1.wait(ctx) {
		t.Fatal("r1 refused")
	}
	got := make(chan int, 2)
	go func() { r2.wait(ctx); got <- 2 }()
	go func() { r3.wait(ctx); got <- 3 }()
	time.Sleep(20 * time.Millisecond)
	select {
	case g := <-got:
		t.Fatalf("reservation %d granted while r1 holds 80 of 100 (r3 must queue behind r2)", g)
	default:
	}
	r1.release()
	if g := <-got; g != 2 {
		t.Fatalf("granted %d first, want 2", g)
	}
	r2.release()
	if g := <-got; g != 3 {
		t.Fatalf("granted %d, want 3", g)
	}
	if b.peak != 500 {
		t.Errorf("peak %d, want 500", b.peak)
	}
	cctx, cancel := context.WithCancel(ctx)
	r4 := b.reserve(200)
	cancel()
	if r4.wait(cctx) {
		t.Fatal("cancelled reservation granted")
	}
	r3.release()
	if b.held != 0 || len(b.queue) != 0 {
		t.Fatalf("held %d queue %d after all released", b.held, len(b.queue))
	}
}

// TestRealServer runs the protocol points prep relies on against a real
// S3 server (`make test-s3`: SeaweedFS on 127.0.0.1): suffix ranges,
// ranged reads, If-Match, and the error codes behind each sentinel.
func TestRealServer(t *testing.T) {
	ext := s3test.NewExternal()
	if ext == nil {
		t.Skip("set " + s3test.EndpointEnv + " (make test-s3)")
	}
	ctx := context.Background()
	if err := ext.CreateBucket("prep-real"); err != nil {
		t.Fatal(err)
	}
	data := fakeParquet(3<<20, 5000, 20)
	if _, err := ext.Put("prep-real", "r/a.parquet", data); err != nil {
		t.Fatal(err)
	}
	small := fakeParquet(700, 100, 21)
	if _, err := ext.Put("prep-real", "r/small.parquet", small); err != nil {
		t.Fatal(err)
	}
	mk := func(id, secret string) *S3Client {
		c, err := NewS3Client(ctx, S3Options{Config: testConfig(id, secret), Endpoint: ext.Endpoint(), FooterGuess: 4096, PartBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := mk(ext.AccessKey(), ext.SecretKey())
	st, _ := c.Store("s3://prep-real/r/")
	obj, err := st.Open(ctx, "a.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	ft, err := obj.(*s3Object).footer(0)
	if err != nil || !bytes.Equal(ft.Meta, data[len(data)-5008:len(data)-8]) {
		t.Fatalf("footer: %v", err)
	}
	p := make([]byte, 2<<20+7)
	if _, err := obj.ReadAt(p, 11); err != nil || !bytes.Equal(p, data[11:11+len(p)]) {
		t.Fatalf("ranged read: %v", err)
	}
	if s := c.Stats(); s.Requests != 2+3 {
		t.Errorf("requests %d, want 5 (2 for the footer, 3 parts)", s.Requests)
	}
	so, err := st.Open(ctx, "small.parquet")
	if err != nil {
		t.Fatalf("suffix longer than the object: %v", err)
	}
	q := make([]byte, 700)
	if _, err := so.ReadAt(q, 0); err != nil || !bytes.Equal(q, small) {
		t.Fatalf("small object: %v", err)
	}
	so.Close()
	if _, err := ext.Put("prep-real", "r/a.parquet", fakeParquet(3<<20, 5000, 22)); err != nil {
		t.Fatal(err)
	}
	var ce *ChangedError
	if _, err := obj.ReadAt(p[:100], 0); !errors.As(err, &ce) {
		t.Errorf("replaced object: %v, want *ChangedError", err)
	}
	if _, err := st.Open(ctx, "none.parquet"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no key: %v", err)
	}
	nb, _ := c.Store("s3://prep-no-such-bucket/")
	if _, err := nb.Open(ctx, "a.parquet"); !errors.Is(err, ErrNoBucket) {
		t.Errorf("no bucket: %v", err)
	}
	if _, err := c.List(ctx, "s3://prep-no-such-bucket/"); !errors.Is(err, ErrNoBucket) {
		t.Errorf("no bucket, listing: %v", err)
	}
	bad := mk(ext.AccessKey(), "not-the-secret")
	bst, _ := bad.Store("s3://prep-real/r/")
	if _, err := bst.Open(ctx, "a.parquet"); !errors.Is(err, ErrBadCredentials) || strings.Contains(err.Error(), "not-the-secret") {
		t.Errorf("wrong secret: %v", err)
	}
	unknown := mk("AKIANOSUCHKEY0000000", ext.SecretKey())
	ust, _ := unknown.Store("s3://prep-real/r/")
	if _, err := ust.Open(ctx, "a.parquet"); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("unknown key id: %v", err)
	}
}

// TestPinnedStoreRefusesReplacedObject: a store pinned to the plan's ETags
// refuses an object replaced with the same size (and so the same footer
// for all the size check knows).
func TestPinnedStoreRefusesReplacedObject(t *testing.T) {
	e := newS3Env(t, S3Options{})
	data := fakeParquet(4096, 100, 8)
	old := e.put(t, "p.parquet", data)
	data[10] ^= 1
	e.put(t, "p.parquet", data)
	st := e.store(t)
	st.Pin(map[string]string{"p.parquet": old})
	_, err := st.Open(context.Background(), "p.parquet")
	var ce *ChangedError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v, want *ChangedError", err)
	}
	st.Pin(nil)
	obj, err := st.Open(context.Background(), "p.parquet")
	if err != nil {
		t.Fatalf("unpinned: %v", err)
	}
	obj.Close()
}

// TestClassify pins the S3 error codes behind each sentinel and which
// causes are retried.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		code  string
		kind  error
		retry bool
	}{
		{"AccessDenied", ErrAccessDenied, false},
		{"NoSuchBucket", ErrNoBucket, false},
		{"NoSuchKey", fs.ErrNotExist, false},
		{"InvalidAccessKeyId", ErrBadCredentials, false},
		{"SignatureDoesNotMatch", ErrBadCredentials, false},
		{"ExpiredToken", ErrBadCredentials, false},
		{"PermanentRedirect", ErrWrongRegion, false},
		{"AuthorizationHeaderMalformed", ErrWrongRegion, false},
		{"PreconditionFailed", errPrecondition, false},
		{"SlowDown", nil, true},
		{"InternalError", nil, true},
		{"RequestTimeout", nil, true},
		{"InvalidRange", errUnsatisfiable, false},
	} {
		kind, retry := classify(&smithy.GenericAPIError{Code: tc.code})
		if kind != tc.kind || retry != tc.retry {
			t.Errorf("%s: (%v, %v), want (%v, %v)", tc.code, kind, retry, tc.kind, tc.retry)
		}
	}
	for _, err := range []error{errTruncated, errStalled, io.ErrUnexpectedEOF, errors.New("read tcp: connection reset by peer")} {
		if kind, retry := classify(err); kind != nil || !retry {
			t.Errorf("%v: (%v, %v), want retried", err, kind, retry)
		}
	}
}
