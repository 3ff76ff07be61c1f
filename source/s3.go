package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	workers "github.com/prepml/prep/internal/pool" // pool is the descriptor pool (local.go)
	"github.com/prepml/prep/plan"
)

// Object-store sources are read with the AWS SDK for Go v2 (service/s3):
// the reference client of the S3 protocol, kept up to date by AWS, speaking
// to every S3-compatible server (MinIO, SeaweedFS, Ceph RGW, R2, GCS's XML
// API) and resolving credentials and region through the standard AWS chain
// (environment, shared config and profile, web identity, container and
// instance metadata) with no prep-specific setting. Its own retries are off:
// prep retries each ranged read itself (fetch.go's loop in s3_fetch.go) so
// that a truncated body, which the SDK hands over as a successful response,
// is retried like a 503, and every retry is counted.

// Defaults of S3Options.
const (
	// DefaultIOConcurrency is the default number of S3 requests in flight
	// per store (--io-concurrency).
	DefaultIOConcurrency = 16
	// DefaultFooterGuess is the size in bytes of the suffix-range request
	// that reads a footer: one request when the footer, its length and
	// magic fit in it, a second for the rest otherwise.
	DefaultFooterGuess = 64 << 10
	// DefaultPartBytes is the largest ranged GET: a longer read is split
	// into parts of this many bytes fetched in parallel (8 MiB, inside the
	// 8-16 MiB band measured best on S3).
	DefaultPartBytes = 8 << 20
	// DefaultCoalesceGap is the largest hole in bytes between two needed
	// ranges that Prefetch merges into one request (the hole is fetched and
	// dropped).
	DefaultCoalesceGap = 8 << 10
	// DefaultReadAheadBytes is the default bound on bytes fetched ahead by
	// Prefetch and not yet read.
	DefaultReadAheadBytes = 256 << 20
	// DefaultRetryBudget is how long one request keeps retrying retryable
	// failures, measured from its first attempt (--s3-retry-budget): long
	// enough to ride out a minute-long endpoint outage, as the AWS SDKs'
	// standard retry mode and restic's backoff bound retrying by time
	// rather than by a handful of attempts.
	DefaultRetryBudget = 60 * time.Second
	// DefaultBaseBackoff and DefaultMaxBackoff are the first retry delay
	// and its cap: the delay doubles per retry (exponential backoff), each
	// drawn uniformly from [d/2, d) (jitter).
	DefaultBaseBackoff = 50 * time.Millisecond
	DefaultMaxBackoff  = 5 * time.Second
)

// S3Options tunes an S3Store. The zero value is ready to use.
type S3Options struct {
	// Concurrency bounds the requests in flight over the whole store
	// (--io-concurrency); <= 0: DefaultIOConcurrency.
	Concurrency int
	// ReadAheadBytes bounds the bytes fetched by Prefetch and not yet
	// consumed by ReadAt (they count against --memory-limit); <= 0:
	// DefaultReadAheadBytes. One row group's ranges larger than this are
	// still fetched, alone.
	ReadAheadBytes int64
	// RetryBudget bounds the time one request spends on retryable
	// failures, from the start of its first attempt: no retry starts once
	// it is spent, and the last delay is cut to what remains of it;
	// <= 0: DefaultRetryBudget.
	RetryBudget time.Duration
	// MaxAttempts, when > 0, also bounds the attempts of one request (the
	// first included); <= 0: only RetryBudget bounds them.
	MaxAttempts int
	// BaseBackoff is the first retry delay, doubled per retry up to
	// MaxBackoff, each delay drawn uniformly from [d/2, d) (jitter);
	// <= 0: DefaultBaseBackoff and DefaultMaxBackoff.
	BaseBackoff, MaxBackoff time.Duration
	// StallTimeout aborts an attempt (and retries it) when no response
	// header or body byte arrives for this long; <= 0: 30 s.
	StallTimeout time.Duration
	// FooterGuess is the size of the suffix-range request reading a
	// footer; <= 0: DefaultFooterGuess.
	FooterGuess int64
	// PartBytes is the largest single ranged GET; <= 0: DefaultPartBytes.
	PartBytes int64
	// CoalesceGap is the largest hole Prefetch merges; < 0: none merged;
	// 0: DefaultCoalesceGap.
	CoalesceGap int64
	// Config, when set, replaces the standard AWS chain (tests).
	Config *aws.Config
	// Endpoint, when set, replaces AWS_ENDPOINT_URL (tests); path-style
	// addressing is used whenever an endpoint is set.
	Endpoint string
}

func (o S3Options) withDefaults() S3Options {
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultIOConcurrency
	}
	if o.ReadAheadBytes <= 0 {
		o.ReadAheadBytes = DefaultReadAheadBytes
	}
	if o.RetryBudget <= 0 {
		o.RetryBudget = DefaultRetryBudget
	}
	if o.BaseBackoff <= 0 {
		o.BaseBackoff = DefaultBaseBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = 30 * time.Second
	}
	if o.FooterGuess <= 0 {
		o.FooterGuess = DefaultFooterGuess
	}
	if o.PartBytes <= 0 {
		o.PartBytes = DefaultPartBytes
	}
	if o.CoalesceGap == 0 {
		o.CoalesceGap = DefaultCoalesceGap
	}
	return o
}

// S3Stats counts a store's traffic. All fields are totals since the store
// was made.
type S3Stats struct {
	Requests     int64 `json:"requests"`      // HTTP requests sent (LIST and GET), retries included
	Retries      int64 `json:"retries"`       // attempts after a retryable failure
	BytesFetched int64 `json:"bytes_fetched"` // response body bytes received, holes and retried bytes included
	BytesNeeded  int64 `json:"bytes_needed"`  // bytes asked for by ReadAt and Prefetch, each once
}

type s3Counters struct {
	requests, retries, fetched, needed atomic.Int64
}

// IsS3URL reports whether s names an S3 location (s3://...).
func IsS3URL(s string) bool { return strings.HasPrefix(s, "s3://") }

// S3URL is a parsed s3://bucket/key URL.
type S3URL struct {
	Bucket string
	Key    string // may be empty, a prefix ending in '/', a key or a glob over keys
}

// String returns the URL as s3://bucket/key.
func (u S3URL) String() string { return "s3://" + u.Bucket + "/" + u.Key }

// ParseS3URL parses s3://bucket/key. It refuses, with an error wrapping
// ErrCredentialURL and never repeating the secret, a URL carrying
// credentials (user info, or a query such as a presigned URL's
// X-Amz-Credential, X-Amz-Signature or X-Amz-Security-Token); credentials
// come from the standard AWS chain only. Other malformed URLs (no bucket,
// an invalid bucket name, a query or fragment) wrap ErrBadURL.
func ParseS3URL(s string) (S3URL, error) {
	if !IsS3URL(s) {
		return S3URL{}, fmt.Errorf("%w: %q is not an s3:// URL", ErrBadURL, redactURL(s))
	}
	rest := s[len("s3://"):]
	host, key, _ := strings.Cut(rest, "/")
	if strings.Contains(host, "@") {
		return S3URL{}, fmt.Errorf("%w: %s (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile, instead)", ErrCredentialURL, redactURL(s))
	}
	if q := strings.IndexAny(key, "?#"); q >= 0 {
		query := strings.ToLower(key[q:])
		for _, w := range []string{"x-amz-credential", "x-amz-signature", "x-amz-security-token", "awsaccesskeyid", "signature"} {
			if strings.Contains(query, w) {
				return S3URL{}, fmt.Errorf("%w: %s (presigned or credentialed URLs are refused; use the standard AWS credential chain)", ErrCredentialURL, redactURL(s))
			}
		}
		return S3URL{}, fmt.Errorf("%w: %s: a query or fragment is not part of an S3 key", ErrBadURL, redactURL(s))
	}
	if !validBucket(host) {
		return S3URL{}, fmt.Errorf("%w: %s: bucket name %q is not a valid S3 bucket name", ErrBadURL, redactURL(s), host)
	}
	return S3URL{Bucket: host, Key: key}, nil
}

// validBucket checks the S3 bucket naming rules that matter here: 3 to 63
// characters of lower-case letters, digits, '.' and '-'.
func validBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 {
		return false
	}
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// redactURL returns s with any user info and query removed, for messages.
func redactURL(s string) string {
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i] + "?<redacted>"
	}
	if scheme, rest, ok := strings.Cut(s, "://"); ok {
		host, tail, _ := strings.Cut(rest, "/")
		if at := strings.LastIndex(host, "@"); at >= 0 {
			host = "<redacted>@" + host[at+1:]
		}
		s = scheme + "://" + host
		if tail != "" || strings.Contains(rest, "/") {
			s += "/" + tail
		}
	}
	return s
}

// S3Client is an S3 connection shared by the stores of one run: one HTTP
// connection pool, one request limit (Concurrency), one read-ahead budget
// and one set of counters.
type S3Client struct {
	api    *s3.Client
	o      S3Options
	sem    chan struct{}
	budget *byteBudget
	n      s3Counters
	sleep  func(ctx context.Context, d time.Duration) error // tests
	now    func() time.Time                                 // tests
}

// NewS3Client loads the AWS configuration from the standard chain (or
// o.Config) and returns a client. AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_S3,
// or o.Endpoint) selects an S3-compatible endpoint and then path-style
// addressing; with no region configured, us-east-1 is used. It makes no
// request: missing or bad credentials surface on the first request as
// ErrBadCredentials.
func NewS3Client(ctx context.Context, o S3Options) (*S3Client, error) {
	o = o.withDefaults()
	var cfg aws.Config
	if o.Config != nil {
		cfg = o.Config.Copy()
	} else {
		var err error
		if cfg, err = config.LoadDefaultConfig(ctx); err != nil {
			return nil, fmt.Errorf("loading AWS configuration: %w", err)
		}
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	endpoint := o.Endpoint
	if endpoint == "" {
		endpoint = os.Getenv("AWS_ENDPOINT_URL_S3")
	}
	if endpoint == "" {
		endpoint = os.Getenv("AWS_ENDPOINT_URL")
	}
	if endpoint == "" && cfg.BaseEndpoint != nil {
		endpoint = *cfg.BaseEndpoint
	}
	if endpoint != "" {
		u, err := url.Parse(endpoint)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("%w: endpoint %s: want http(s)://host[:port]", ErrBadURL, redactURL(endpoint))
		}
		if u.User != nil {
			return nil, fmt.Errorf("%w: endpoint %s", ErrCredentialURL, redactURL(endpoint))
		}
	}
	httpc := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = 4 * o.Concurrency
		t.MaxIdleConnsPerHost = 2 * o.Concurrency
		t.ResponseHeaderTimeout = o.StallTimeout
		t.IdleConnTimeout = 90 * time.Second
	})
	api := s3.NewFromConfig(cfg, func(so *s3.Options) {
		so.HTTPClient = httpc
		so.Retryer = aws.NopRetryer{}
		so.RetryMaxAttempts = 1
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.DisableLogOutputChecksumValidationSkipped = true
		if endpoint != "" {
			so.BaseEndpoint = aws.String(endpoint)
			so.UsePathStyle = true
		}
	})
	return &S3Client{api: api, o: o, sem: make(chan struct{}, o.Concurrency),
		budget: newByteBudget(o.ReadAheadBytes), sleep: sleepCtx, now: time.Now}, nil
}

// Stats returns the client's counters so far.
func (c *S3Client) Stats() S3Stats {
	return S3Stats{Requests: c.n.requests.Load(), Retries: c.n.retries.Load(),
		BytesFetched: c.n.fetched.Load(), BytesNeeded: c.n.needed.Load()}
}

// S3Store is a Store over the objects under one s3://bucket/prefix/. Names
// are keys relative to the prefix.
type S3Store struct {
	c      *S3Client
	bucket string
	prefix string // "" or ends in '/'

	pins map[string]string // name -> ETag recorded at plan time (Pin)

	mu        sync.Mutex
	opened    map[string]*preopened // Preopen's objects, until Open takes them
	tails     map[string]cachedTail // footers read, by name (footerCacheBytes)
	tailBytes int64
}

// preopened is an object Preopen opens ahead of its Open.
type preopened struct {
	done chan struct{}
	obj  *s3Object
	err  error
}

// Preopen opens the named objects in the background, Concurrency at a
// time: each one's tail (footer) and leading magic are fetched, so that
// the Open of each, by a caller that opens files one after the other,
// costs no round trip. Open waits for a preopened object and hands it
// over; one never opened is closed by Close. ctx bounds the background
// work.
func (s *S3Store) Preopen(ctx context.Context, files []plan.SourceFile) {
	names := make([]string, len(files))
	sizes := make(map[string]int64, len(files))
	for i, f := range files {
		names[i] = f.Path
		sizes[f.Path] = f.Size
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opened == nil {
		s.opened = map[string]*preopened{}
	}
	var todo []*preopened
	var todoNames []string
	for _, n := range names {
		if _, ok := s.opened[n]; ok {
			continue
		}
		p := &preopened{done: make(chan struct{})}
		s.opened[n] = p
		todo, todoNames = append(todo, p), append(todoNames, n)
	}
	// In the background, Concurrency objects at a time; each open's
	// error is its own (p.err), so every one is tried.
	go workers.ForEach(context.Background(), len(todo), s.c.o.Concurrency, func(i int) error {
		p, name := todo[i], todoNames[i]
		// With the version known from the plan, the leading magic
		// is fetched beside the tail, not after it: one round trip.
		etag := s.pins[name]
		var hd headRead
		var hw sync.WaitGroup
		if etag != "" && sizes[name] > s.c.o.FooterGuess {
			hw.Add(1)
			go func() { defer hw.Done(); hd = s.readHeadPinned(ctx, name, etag) }()
		}
		obj, err := s.OpenVersion(ctx, name, etag)
		hw.Wait()
		if err == nil {
			o := obj.(*s3Object)
			if hd.err == nil && hd.b != nil && hd.total == o.size {
				o.head = hd.b
				s.rememberHead(o)
			} else if err = o.readHead(); err != nil {
				o.Close()
			}
			if err == nil {
				p.obj = o
			}
		}
		p.err = err
		close(p.done)
		return nil
	})
}

// headRead is a leading-magic read made beside an object's open.
type headRead struct {
	b     []byte
	total int64 // the object's size from Content-Range
	err   error
}

// readHeadPinned reads the first 4 bytes of name at version etag.
func (s *S3Store) readHeadPinned(ctx context.Context, name, etag string) headRead {
	var h headRead
	res, err := s.c.get(ctx, s.bucket, s.prefix+name, "bytes=0-3", etag, 0, 4, func(n int64) ([]byte, error) {
		if n > 4 {
			return nil, fmt.Errorf("server sent %d bytes for a 4-byte range", n)
		}
		h.b = make([]byte, n)
		return h.b, nil
	})
	h.total, h.err = res.total, err
	return h
}

// Close closes the objects Preopen opened that no Open took.
func (s *S3Store) Close() error {
	s.mu.Lock()
	ps := s.opened
	s.opened = nil
	s.mu.Unlock()
	for _, p := range ps {
		<-p.done
		if p.obj != nil {
			p.obj.Close()
		}
	}
	return nil
}

// Pin makes Open of each named object send its ETag (as recorded at plan
// time) as If-Match from the first request on, so an object replaced since
// the plan was made fails with a *ChangedError even when its size and
// footer are unchanged. Names without an entry are pinned to the version
// their first read sees. Call it before the store is used.
func (s *S3Store) Pin(etags map[string]string) { s.pins = etags }

// Store returns the store rooted at root, an s3://bucket/ or
// s3://bucket/prefix/ URL (a missing final '/' is added). Errors wrap
// ErrBadURL or ErrCredentialURL.
func (c *S3Client) Store(root string) (*S3Store, error) {
	u, err := ParseS3URL(root)
	if err != nil {
		return nil, err
	}
	if strings.ContainsAny(u.Key, "*?[") {
		return nil, fmt.Errorf("%w: root %s: a store root cannot be a glob", ErrBadURL, u)
	}
	p := u.Key
	if p != "" && !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return &S3Store{c: c, bucket: u.Bucket, prefix: p}, nil
}

// String returns the root URL, s3://bucket/prefix/.
func (s *S3Store) String() string { return "s3://" + s.bucket + "/" + s.prefix }

// Client returns the client the store reads through.
func (s *S3Store) Client() *S3Client { return s.c }

// Open opens the object name (relative to the store's root) at its current
// version (or the one Pin recorded for it): one suffix-range GET reads its tail (the footer, when it fits
// DefaultFooterGuess) and learns its size and ETag; every later read of the
// object is pinned to that ETag. A missing object wraps fs.ErrNotExist.
func (s *S3Store) Open(ctx context.Context, name string) (Object, error) {
	s.mu.Lock()
	p, ok := s.opened[name]
	delete(s.opened, name)
	s.mu.Unlock()
	if ok {
		select {
		case <-p.done:
		case <-ctx.Done():
			go func() { // the object is still someone's to close
				<-p.done
				if p.obj != nil {
					p.obj.Close()
				}
			}()
			return nil, ctx.Err()
		}
		if p.err != nil {
			return nil, p.err
		}
		return p.obj, nil
	}
	return s.OpenVersion(ctx, name, s.pins[name])
}

// OpenVersion is Open pinned to a version recorded earlier: etag (as
// listed at plan time; "" for none) is sent as If-Match with the first
// request already, so an object replaced since fails with a *ChangedError.
func (s *S3Store) OpenVersion(ctx context.Context, name, etag string) (Object, error) {
	if name == "" || strings.HasPrefix(name, "/") || path.Clean(name) != name || strings.HasPrefix(name, "../") || name == ".." {
		return nil, fmt.Errorf("%w: object name %q must be a clean relative key", ErrBadURL, name)
	}
	o := &s3Object{s: s, name: name, key: s.prefix + name, etag: etag, pinnedAtPlan: etag != ""}
	if s.fromCache(ctx, o) {
		return o, nil
	}
	if err := o.openTail(ctx); err != nil {
		return nil, err
	}
	s.remember(o)
	return o, nil
}

// footerCacheBytes bounds the footers (tail and leading bytes) a store
// keeps so that reopening an object costs no request: readers that drop a
// footer to save memory and reopen the file later (convert over many
// files) pay no round trip for it. Later reads stay pinned by If-Match to
// the ETag the footer was read at, so a replaced object is still refused.
const footerCacheBytes = 64 << 20

type cachedTail struct {
	etag          string
	size, tailOff int64
	tail, head    []byte
}

// fromCache fills o from the footer cache; false when it holds none for o
// (or one of another version than o is pinned to).
func (s *S3Store) fromCache(ctx context.Context, o *s3Object) bool {
	s.mu.Lock()
	c, ok := s.tails[o.name]
	s.mu.Unlock()
	if !ok || (o.etag != "" && o.etag != c.etag) {
		return false
	}
	o.ctx, o.cancel = context.WithCancel(ctx)
	o.etag, o.size, o.tailOff, o.tail, o.head = c.etag, c.size, c.tailOff, c.tail, c.head
	return true
}

// remember caches o's footer while the cache has room.
func (s *S3Store) remember(o *s3Object) {
	n := int64(len(o.tail) + len(o.head))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tails == nil {
		s.tails = map[string]cachedTail{}
	}
	if _, ok := s.tails[o.name]; ok || s.tailBytes+n > footerCacheBytes {
		return
	}
	s.tails[o.name] = cachedTail{etag: o.etag, size: o.size, tailOff: o.tailOff, tail: o.tail, head: o.head}
	s.tailBytes += n
}

// Errors of object-store sources. Each is wrapped by the error returned,
// which names the object (s3://bucket/key) and, for reads, the byte range
// and the number of attempts.
var (
	// ErrBadURL is returned for a malformed s3:// URL or endpoint.
	ErrBadURL = errors.New("bad object-store URL")
	// ErrCredentialURL is returned for a URL that carries credentials.
	ErrCredentialURL = errors.New("refusing a URL that carries credentials")
	// ErrAccessDenied is returned for a 403 AccessDenied: the credentials
	// are valid but may not read the bucket or object.
	ErrAccessDenied = errors.New("access denied")
	// ErrNoBucket is returned when the bucket does not exist.
	ErrNoBucket = errors.New("no such bucket")
	// ErrBadCredentials is returned when the server rejects the
	// credentials (unknown access key, wrong secret, expired token) or
	// none could be found.
	ErrBadCredentials = errors.New("bad or missing credentials")
	// ErrWrongRegion is returned when the bucket lives in another region
	// than the one configured (AWS_REGION, the profile's region).
	ErrWrongRegion = errors.New("bucket is in another region than AWS_REGION")
	// ErrRetriesExhausted is returned when a request failed with a
	// retryable cause on every attempt.
	ErrRetriesExhausted = errors.New("retries exhausted")
)

// RangeError is a failed read of an object: which object, which bytes,
// how many attempts over how long, and the last cause (wrapped).
type RangeError struct {
	URL      string        // s3://bucket/key
	Off, Len int64         // byte range [Off, Off+Len); Len -1 for a suffix read of the tail
	Attempts int           // attempts made, the first included
	Elapsed  time.Duration // from the start of the first attempt to the end of the last
	Err      error
}

// Error implements error: "reading s3://bucket/key bytes [a, b): N
// attempts in 61.3s, last: cause" (the attempts and their time only when
// more than one).
func (e *RangeError) Error() string {
	r := fmt.Sprintf("bytes [%d, %d)", e.Off, e.Off+e.Len)
	if e.Len < 0 {
		r = fmt.Sprintf("last %d bytes", e.Off)
	}
	if e.Attempts > 1 {
		return fmt.Sprintf("reading %s %s: %d attempts in %s, last: %v", e.URL, r, e.Attempts, seconds(e.Elapsed), e.Err)
	}
	return fmt.Sprintf("reading %s %s: %v", e.URL, r, e.Err)
}

// Unwrap returns the last cause.
func (e *RangeError) Unwrap() error { return e.Err }

// seconds renders d in seconds with one decimal ("2.5s"), the precision
// retry times are reported at.
func seconds(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

// notExist reports a missing key as fs.ErrNotExist with the URL.
func notExist(u string) error { return fmt.Errorf("%s: %w", u, fs.ErrNotExist) }
