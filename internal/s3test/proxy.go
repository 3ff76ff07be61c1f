package s3test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Fault is what the proxy does to one request.
type Fault int

// Faults the proxy injects.
const (
	Pass     Fault = iota // forward the request unchanged
	SlowDown              // answer 503 SlowDown without forwarding
	Internal              // answer 500 InternalError without forwarding
	Reset                 // close the connection with a TCP reset before any response
	Truncate              // forward, then send only half of the body and close
	Stall                 // forward, send the headers, then stop sending until the client gives up
)

// Proxy is a fault-injecting HTTP proxy on 127.0.0.1 in front of an S3
// server (in-process or real). Host headers are kept, so SigV4 signatures
// made for the proxy's address stay valid at servers that check them
// against the Host header the client signed.
type Proxy struct {
	URL    string // http://127.0.0.1:port
	srv    *httptest.Server
	target *url.URL
	client *http.Client

	mu      sync.Mutex
	latency time.Duration
	fault   func(r *http.Request, n int64) Fault

	n        atomic.Int64 // requests seen
	injected atomic.Int64 // faults injected
	stallCh  chan struct{}
}

// NewProxy starts a proxy forwarding to target (http://127.0.0.1:port).
func NewProxy(target string) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: u, stallCh: make(chan struct{}),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	p.URL = p.srv.URL
	return p, nil
}

// Close stops the proxy (and releases stalled responses).
func (p *Proxy) Close() {
	close(p.stallCh)
	p.srv.CloseClientConnections()
	p.srv.Close()
}

// SetLatency adds d before forwarding every request.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// SetFault sets the function choosing each request's fault; n counts
// requests from 1. nil: every request passes.
func (p *Proxy) SetFault(f func(r *http.Request, n int64) Fault) {
	p.mu.Lock()
	p.fault = f
	p.mu.Unlock()
}

// Requests returns the requests the proxy has seen.
func (p *Proxy) Requests() int64 { return p.n.Load() }

// Injected returns the faults injected so far.
func (p *Proxy) Injected() int64 { return p.injected.Load() }

// Nth returns a fault function injecting f into the requests for which
// match is true, the first k of them, and passing every other.
func Nth(k int64, f Fault, match func(r *http.Request) bool) func(*http.Request, int64) Fault {
	var seen atomic.Int64
	return func(r *http.Request, _ int64) Fault {
		if match != nil && !match(r) {
			return Pass
		}
		if seen.Add(1) <= k {
			return f
		}
		return Pass
	}
}

// IsRangedGet matches GETs carrying a Range header (object reads).
func IsRangedGet(r *http.Request) bool {
	return r.Method == http.MethodGet && r.Header.Get("Range") != ""
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	n := p.n.Add(1)
	p.mu.Lock()
	lat, ff := p.latency, p.fault
	p.mu.Unlock()
	if lat > 0 {
		time.Sleep(lat)
	}
	f := Pass
	if ff != nil {
		f = ff(r, n)
	}
	if f != Pass {
		p.injected.Add(1)
	}
	switch f {
	case SlowDown:
		writeError(w, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
		return
	case Internal:
		writeError(w, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
		return
	case Reset:
		hj, ok := w.(http.Hijacker)
		if !ok {
			panic(http.ErrAbortHandler)
		}
		conn, _, err := hj.Hijack()
		if err != nil {
			return
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0) // RST, not FIN
		}
		conn.Close()
		return
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = p.target.Scheme, p.target.Host
	out.Host = r.Host
	resp, err := p.client.Transport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	switch f {
	case Truncate:
		half := resp.ContentLength / 2
		if cl, err := strconv.ParseInt(resp.Header.Get("Content-Length"), 10, 64); err == nil {
			half = cl / 2
		}
		io.CopyN(w, resp.Body, half)
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
		panic(http.ErrAbortHandler) // close the connection mid-body
	case Stall:
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
		select {
		case <-r.Context().Done():
		case <-p.stallCh:
		}
		panic(http.ErrAbortHandler)
	}
	io.Copy(w, resp.Body)
}
