package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// One ranged GET is one attempt of get below: it holds one of the
// client's Concurrency slots while its request is in flight and its body is
// read, and it is retried on the causes classify calls retryable, sleeping
// BaseBackoff·2^(attempt-1), capped at MaxBackoff, with jitter between
// attempts, until RetryBudget has passed since its first attempt began
// (retryWait). The SDK's own retryer is off (NewS3Client) because a
// truncated or stalled body is only seen after GetObject returned, where
// the SDK no longer retries; one loop here retries every cause alike and
// counts each retry.

// getResult is what one successful GET returned.
type getResult struct {
	start, total int64 // Content-Range: first byte and object size
	etag         string
	n            int // body bytes read into the buffer
}

// get performs the GET of key with the Range header rng and If-Match
// ifMatch (when not empty), reading the body into the buffer that buf
// returns for the response's body length. It retries retryable failures.
// url, off and ln name the read in errors (ln -1: a suffix read of off
// bytes).
func (c *S3Client) get(ctx context.Context, bucket, key, rng, ifMatch string, off, ln int64,
	buf func(length int64) ([]byte, error)) (getResult, error) {
	u := "s3://" + bucket + "/" + key
	start := c.now()
	fail := func(attempt int, err error) error {
		return &RangeError{URL: u, Off: off, Len: ln, Attempts: attempt, Elapsed: c.now().Sub(start), Err: err}
	}
	for attempt := 1; ; attempt++ {
		res, err := c.getOnce(ctx, bucket, key, rng, ifMatch, buf)
		if err == nil {
			return res, nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return res, fail(attempt, cerr)
		}
		kind, retry := classify(err)
		if kind != nil {
			if errors.Is(kind, fs.ErrNotExist) {
				return res, fail(attempt, fmt.Errorf("no such key: %w", fs.ErrNotExist))
			}
			if errors.Is(kind, errPrecondition) {
				return res, errPrecondition // the object turns it into a *ChangedError
			}
			if errors.Is(kind, errUnsatisfiable) && strings.HasPrefix(rng, "bytes=-") {
				// S3 answers 416 to a suffix range only when the object
				// is empty: the caller reports the size, as for a
				// local empty file.
				return res, errEmptyObject
			}
			err = fmt.Errorf("%w (%s)", kind, describe(err))
		} else {
			err = errors.New(describe(err))
		}
		if !retry {
			return res, fail(attempt, err)
		}
		if werr := c.retryWait(ctx, start, attempt); werr != nil {
			if errors.Is(werr, ErrRetriesExhausted) {
				werr = fmt.Errorf("%w: %w", werr, err)
			}
			return res, fail(attempt, werr)
		}
	}
}

// retryWait is called after attempt number attempt (1-based) of a request
// whose first attempt began at start failed retryably. While the retry
// budget is not spent (nor MaxAttempts reached, when set) it counts a
// retry and sleeps the backoff, cut to what remains of the budget, and
// returns nil. Otherwise it returns an error wrapping
// ErrRetriesExhausted that states the budget; ctx ending returns ctx's
// error.
func (c *S3Client) retryWait(ctx context.Context, start time.Time, attempt int) error {
	elapsed := c.now().Sub(start)
	if elapsed >= c.o.RetryBudget || (c.o.MaxAttempts > 0 && attempt >= c.o.MaxAttempts) {
		return fmt.Errorf("%w (retry budget %s)", ErrRetriesExhausted, c.o.RetryBudget)
	}
	c.n.retries.Add(1)
	return c.sleep(ctx, min(c.backoff(attempt), c.o.RetryBudget-elapsed))
}

// backoff returns the delay before retry number attempt (1-based):
// BaseBackoff·2^(attempt-1) capped at MaxBackoff, drawn from [d/2, d).
func (c *S3Client) backoff(attempt int) time.Duration {
	d := c.o.BaseBackoff
	for i := 1; i < attempt && d < c.o.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, c.o.MaxBackoff)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errStalled is the cause of an attempt aborted by StallTimeout.
var errStalled = errors.New("no response bytes within the stall timeout")

// errTruncated is the cause of a body shorter than its Content-Length.
var errTruncated = errors.New("response body truncated")

// errPrecondition marks a 412 Precondition Failed (If-Match).
var errPrecondition = errors.New("precondition failed")

// errUnsatisfiable marks a 416 Range Not Satisfiable.
var errUnsatisfiable = errors.New("requested range not satisfiable")

// errEmptyObject is get's error for a suffix range answered 416: the
// object holds no byte.
var errEmptyObject = errors.New("empty object")

// getOnce is one attempt of get.
func (c *S3Client) getOnce(ctx context.Context, bucket, key, rng, ifMatch string, buf func(int64) ([]byte, error)) (getResult, error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return getResult{}, ctx.Err()
	}
	defer func() { <-c.sem }()
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stall := time.AfterFunc(c.o.StallTimeout, func() { cancel(errStalled) })
	defer stall.Stop()
	in := &s3.GetObjectInput{Bucket: &bucket, Key: &key, Range: &rng}
	if ifMatch != "" {
		in.IfMatch = &ifMatch
	}
	c.n.requests.Add(1)
	out, err := c.api.GetObject(actx, in)
	if err != nil {
		if context.Cause(actx) == errStalled && ctx.Err() == nil {
			return getResult{}, errStalled
		}
		return getResult{}, err
	}
	defer out.Body.Close()
	var res getResult
	if out.ETag != nil {
		res.etag = *out.ETag
	}
	if ifMatch != "" && res.etag != "" && res.etag != ifMatch {
		return res, errPrecondition // a server that ignored If-Match
	}
	length := int64(-1)
	if out.ContentLength != nil {
		length = *out.ContentLength
	}
	if out.ContentRange == nil {
		return res, fmt.Errorf("response without Content-Range to a ranged GET (%s)", rng)
	}
	start, end, total, perr := parseContentRange(*out.ContentRange)
	if perr != nil {
		return res, perr
	}
	res.start, res.total = start, total
	if length < 0 {
		length = end - start + 1
	}
	if length != end-start+1 {
		return res, fmt.Errorf("Content-Length %d disagrees with Content-Range %s", length, *out.ContentRange)
	}
	dst, err := buf(length)
	if err != nil {
		return res, err
	}
	n, err := readFull(out.Body, dst, stall, c.o.StallTimeout, &c.n)
	res.n = n
	if err != nil {
		if context.Cause(actx) == errStalled && ctx.Err() == nil {
			return res, fmt.Errorf("%w after %d of %d bytes", errStalled, n, len(dst))
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return res, fmt.Errorf("%w: %d of %d bytes", errTruncated, n, len(dst))
		}
		return res, err
	}
	return res, nil
}

// readFull reads len(dst) bytes from r, resetting the stall timer on every
// read that returns bytes and counting them as fetched.
func readFull(r io.Reader, dst []byte, stall *time.Timer, d time.Duration, n *s3Counters) (int, error) {
	got := 0
	for got < len(dst) {
		k, err := r.Read(dst[got:])
		if k > 0 {
			got += k
			n.fetched.Add(int64(k))
			stall.Reset(d)
		}
		if err != nil {
			if err == io.EOF && got == len(dst) {
				break
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return got, err
		}
	}
	return got, nil
}

// parseContentRange parses "bytes first-last/total".
func parseContentRange(s string) (first, last, total int64, err error) {
	bad := fmt.Errorf("malformed Content-Range %q", s)
	r, ok := strings.CutPrefix(s, "bytes ")
	if !ok {
		return 0, 0, 0, bad
	}
	span, tot, ok := strings.Cut(r, "/")
	if !ok {
		return 0, 0, 0, bad
	}
	a, b, ok := strings.Cut(span, "-")
	if !ok {
		return 0, 0, 0, bad
	}
	first, err1 := strconv.ParseInt(a, 10, 64)
	last, err2 := strconv.ParseInt(b, 10, 64)
	total, err3 := strconv.ParseInt(tot, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || first < 0 || last < first || total <= last {
		return 0, 0, 0, bad
	}
	return first, last, total, nil
}

// classify maps a failed attempt to one of the package's sentinel errors
// (nil when none fits) and says whether it is worth retrying.
func classify(err error) (kind error, retry bool) {
	switch {
	case errors.Is(err, errStalled), errors.Is(err, errTruncated):
		return nil, true
	case errors.Is(err, errPrecondition):
		return errPrecondition, false
	}
	status := 0
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "AccessDenied", "AllAccessDisabled", "AccountProblem", "InvalidObjectState":
			return ErrAccessDenied, false
		case "NoSuchBucket":
			return ErrNoBucket, false
		case "NoSuchKey":
			return fs.ErrNotExist, false
		case "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken", "TokenRefreshRequired", "InvalidSecurity":
			return ErrBadCredentials, false
		case "PreconditionFailed":
			return errPrecondition, false
		case "InvalidRange":
			return errUnsatisfiable, false
		case "PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException":
			return ErrWrongRegion, false
		case "SlowDown", "RequestTimeout", "RequestTimeTooSkewed", "InternalError", "ServiceUnavailable",
			"Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequests", "RequestThrottled":
			return nil, true
		}
	}
	switch {
	case status == 412:
		return errPrecondition, false
	case status == 416:
		return errUnsatisfiable, false
	case status == 403:
		return ErrAccessDenied, false
	case status == 404:
		return fs.ErrNotExist, false
	case status == 429 || status >= 500:
		return nil, true
	case status != 0:
		return nil, false
	}
	var se *smithyhttp.RequestSendError
	if errors.As(err, &se) {
		return nil, true // connection refused or reset, DNS, TLS: the request did not complete
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return nil, true
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, errConnReset) {
		return nil, true
	}
	if msg := err.Error(); strings.Contains(msg, "connection reset") || strings.Contains(msg, "broken pipe") {
		return nil, true
	}
	if msg := err.Error(); strings.Contains(msg, "credentials") {
		return ErrBadCredentials, false // none in the chain, or a provider failed
	}
	return nil, false
}

var errConnReset = errors.New("connection reset by peer")

// describe renders the cause of a failed attempt briefly: the HTTP status
// and the S3 error code and message for a server error, the transport
// error otherwise. It never contains request headers or credentials (the
// SDK's messages carry neither; S3 error messages do not echo secrets).
func describe(err error) string {
	var ae smithy.APIError
	status := 0
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	if errors.As(err, &ae) {
		msg := ae.ErrorMessage()
		if msg == "" {
			return fmt.Sprintf("HTTP %d %s", status, ae.ErrorCode())
		}
		return fmt.Sprintf("HTTP %d %s: %s", status, ae.ErrorCode(), msg)
	}
	if status != 0 {
		return fmt.Sprintf("HTTP %d", status)
	}
	var se *smithyhttp.RequestSendError
	if errors.As(err, &se) {
		return se.Err.Error()
	}
	return err.Error()
}

// byteBudget bounds bytes held (read-ahead buffers). Reservations are
// granted in the order reserve was called, each once n fits beside what is
// held, or nothing is held (so one larger than the whole budget still
// runs, alone).
type byteBudget struct {
	mu    sync.Mutex
	cond  *sync.Cond
	limit int64
	held  int64
	queue []*reservation // waiting, in reserve order
	peak  int64
}

type reservation struct {
	b *byteBudget
	n int64
}

func newByteBudget(limit int64) *byteBudget {
	b := &byteBudget{limit: limit}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// reserve queues a request for n bytes; wait for it, then release it.
func (b *byteBudget) reserve(n int64) *reservation {
	r := &reservation{b: b, n: n}
	b.mu.Lock()
	b.queue = append(b.queue, r)
	b.mu.Unlock()
	return r
}

// wait blocks until r is granted (true) or ctx ends (false; r leaves the
// queue and holds nothing).
func (r *reservation) wait(ctx context.Context) bool {
	b := r.b
	stop := context.AfterFunc(ctx, func() {
		b.mu.Lock()
		b.cond.Broadcast()
		b.mu.Unlock()
	})
	defer stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for (b.queue[0] != r || (b.held > 0 && b.held+r.n > b.limit)) && ctx.Err() == nil {
		b.cond.Wait()
	}
	for i, w := range b.queue {
		if w == r {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			break
		}
	}
	b.cond.Broadcast()
	if ctx.Err() != nil {
		return false
	}
	b.held += r.n
	b.peak = max(b.peak, b.held)
	return true
}

// release returns a granted reservation's bytes.
func (r *reservation) release() {
	b := r.b
	b.mu.Lock()
	b.held -= r.n
	b.cond.Broadcast()
	b.mu.Unlock()
}
