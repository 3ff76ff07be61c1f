// Package s3test runs an S3-protocol server and a fault-injecting proxy
// inside a Go test process, on 127.0.0.1 only, for the object-store source
// tests: no network, no external server.
//
// The server is github.com/johannesboyne/gofakes3 over an in-memory
// backend, with the parts of S3's behaviour it lacks and prep relies on
// added in front of it: If-Match on GET and HEAD (412 PreconditionFailed),
// a suffix range longer than the object answered with the whole object
// (RFC 9110 14.1.2, as S3 does), an access-key check (403
// InvalidAccessKeyId) and per-prefix access denial (403 AccessDenied).
package s3test

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Credentials the server accepts, for tests' AWS configuration.
const (
	AccessKey = "AKIAPREPTEST00000000"
	SecretKey = "prep-test-secret-do-not-log-0123456789ab"
	Region    = "us-east-1"
)

// Server is an in-process S3 server on 127.0.0.1.
type Server struct {
	URL     string // http://127.0.0.1:port
	srv     *httptest.Server
	backend *s3mem.Backend

	mu     sync.Mutex
	denied []string // key prefixes ("bucket/prefix") answered 403 AccessDenied

	// Requests counts requests by kind: "GET" (object reads), "LIST",
	// "HEAD", "PUT", "OTHER".
	gets, lists, heads, puts, other atomic.Int64
	// GetBytes counts object body bytes served to GETs.
	getBytes atomic.Int64
}

// NewServer starts a server; Close stops it.
func NewServer() *Server {
	s := &Server{backend: s3mem.New()}
	faker := gofakes3.New(s.backend, gofakes3.WithLogger(gofakes3.DiscardLog()))
	inner := faker.Server()
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.serve(inner, w, r)
	}))
	s.srv.Start()
	s.URL = s.srv.URL
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// CreateBucket creates a bucket.
func (s *Server) CreateBucket(name string) error { return s.backend.CreateBucket(name) }

// Put stores (or replaces) an object and returns its ETag (quoted MD5).
func (s *Server) Put(bucket, key string, data []byte) (string, error) {
	if _, err := s.backend.PutObject(bucket, key, map[string]string{}, bytes.NewReader(data), int64(len(data)), nil); err != nil {
		return "", err
	}
	sum := md5.Sum(data)
	return `"` + hex.EncodeToString(sum[:]) + `"`, nil
}

// Deny makes every request for a key starting with bucket/prefix answer
// 403 AccessDenied (listing such a prefix too).
func (s *Server) Deny(bucketPrefix string) {
	s.mu.Lock()
	s.denied = append(s.denied, bucketPrefix)
	s.mu.Unlock()
}

// Counts are request counts by kind and GET body bytes.
type Counts struct {
	Gets, Lists, Heads, Puts, Other int64
	GetBytes                        int64
}

// Counts returns the requests served so far.
func (s *Server) Counts() Counts {
	return Counts{Gets: s.gets.Load(), Lists: s.lists.Load(), Heads: s.heads.Load(), Puts: s.puts.Load(),
		Other: s.other.Load(), GetBytes: s.getBytes.Load()}
}

var credRE = regexp.MustCompile(`Credential=([^/]+)/`)

func (s *Server) serve(inner http.Handler, w http.ResponseWriter, r *http.Request) {
	bucket, key := splitPath(r.URL.Path)
	kind := "OTHER"
	switch {
	case r.Method == http.MethodGet && key != "":
		kind = "GET"
		s.gets.Add(1)
	case r.Method == http.MethodGet:
		kind = "LIST"
		s.lists.Add(1)
	case r.Method == http.MethodHead:
		kind = "HEAD"
		s.heads.Add(1)
	case r.Method == http.MethodPut:
		kind = "PUT"
		s.puts.Add(1)
	default:
		s.other.Add(1)
	}
	// Authentication: the access key must be ours (signatures are not
	// checked; SeaweedFS in `make test-s3` checks them).
	m := credRE.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil || m[1] != AccessKey {
		writeError(w, http.StatusForbidden, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.")
		return
	}
	s.mu.Lock()
	denied := false
	target := bucket + "/" + key
	if kind == "LIST" {
		target = bucket + "/" + r.URL.Query().Get("prefix")
	}
	for _, d := range s.denied {
		denied = denied || strings.HasPrefix(target, d)
	}
	s.mu.Unlock()
	if denied {
		writeError(w, http.StatusForbidden, "AccessDenied", "Access Denied")
		return
	}
	if kind == "GET" || kind == "HEAD" {
		obj, err := s.backend.HeadObject(bucket, key)
		if err == nil {
			etag := `"` + hex.EncodeToString(obj.Hash) + `"`
			if im := r.Header.Get("If-Match"); im != "" && im != "*" && im != etag {
				writeError(w, http.StatusPreconditionFailed, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
				return
			}
			if rg := r.Header.Get("Range"); strings.HasPrefix(rg, "bytes=-") {
				if n, err := strconv.ParseInt(rg[len("bytes=-"):], 10, 64); err == nil && n >= obj.Size && obj.Size > 0 {
					r.Header.Set("Range", "bytes=0-") // the whole object, as S3 answers
				}
			}
		}
		if kind == "GET" {
			cw := &countWriter{ResponseWriter: w, n: &s.getBytes}
			inner.ServeHTTP(cw, r)
			return
		}
	}
	inner.ServeHTTP(w, r)
}

type countWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

// Write counts the body bytes written. They are counted before they are
// written, since a client can hold them (and a test read the count) before
// the write returns; bytes a failed write did not send are taken back.
func (c *countWriter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	n, err := c.ResponseWriter.Write(p)
	if n < len(p) {
		c.n.Add(int64(n - len(p)))
	}
	return n, err
}

// splitPath splits a path-style request path into bucket and key.
func splitPath(p string) (bucket, key string) {
	p = strings.TrimPrefix(p, "/")
	bucket, key, _ = strings.Cut(p, "/")
	return bucket, key
}

// writeError writes an S3 XML error response.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n<Error><Code>%s</Code><Message>%s</Message><RequestId>test</RequestId></Error>", code, msg)
}
