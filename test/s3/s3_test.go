// Package s3 runs prep end to end against an S3 server through the binary,
// the way a user would: prep plan --source s3://..., prep convert and prep
// verify --deep reading the plan's objects, each compared with the same run
// from local copies of the same files (byte-identical shards, identical
// fingerprints). The server is in-process (internal/s3test, on 127.0.0.1)
// behind a fault-injecting proxy; with PREP_S3_TEST_ENDPOINT set (`make
// test-s3`) it is a real server (SeaweedFS) behind the same proxy.
package s3

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/internal/s3test"
	"github.com/prepml/prep/internal/testutil"
)

var prepBin string

func TestMain(m *testing.M) {
	testutil.MainWithPrep(m, "prep-s3-bin-", &prepBin, nil)
}

// env is one server, the proxy in front of it, a bucket holding the data
// set under ds/ and a local copy of it.
type env struct {
	t      *testing.T
	target s3test.Target
	proxy  *s3test.Proxy
	bucket string
	local  string // local copy of s3://bucket/ds/
	files  map[string][]byte
	spec   string
	work   string
	secret string
}

// row is one row of the generated data set: 11 columns, of which the
// spec reads 2.
type row struct {
	ID    int64   `parquet:"id"`
	Label int32   `parquet:"label"`
	F0    float32 `parquet:"f0"`
	F1    float32 `parquet:"f1"`
	F2    float64 `parquet:"f2"`
	F3    float64 `parquet:"f3"`
	F4    int64   `parquet:"f4"`
	F5    int64   `parquet:"f5"`
	F6    float32 `parquet:"f6"`
	F7    float32 `parquet:"f7"`
	F8    int32   `parquet:"f8"`
}

// dataset returns n files of rows rows each, in row groups of group rows.
func dataset(t testing.TB, n, rows, group int) map[string][]byte {
	out := map[string][]byte{}
	id := int64(0)
	for f := range n {
		rs := make([]row, rows)
		for i := range rs {
			v := id * 2654435761
			rs[i] = row{ID: id, Label: int32(id % 7), F0: float32(v%1000) / 7, F1: float32(i), F2: float64(v % 977), F3: float64(id) / 3,
				F4: v, F5: -v, F6: float32(id % 13), F7: float32(v%31) * 0.5, F8: int32(v % 65536)}
			id++
		}
		out[fmt.Sprintf("part=%d/f-%03d.parquet", f%2, f)] = pqfixture.Of(rs...).RowGroupRows(int64(group)).Bytes(t)
	}
	return out
}

const spec2of11 = `tensors:
  - name: label
    column: label
    dtype: I64
  - name: f0
    column: f0
    dtype: F32
`

// newEnv uploads files under s3://bucket/ds/ and writes the local copy.
func newEnv(t *testing.T, files map[string][]byte) *env {
	t.Helper()
	return newEnvIn(t, "prep-e2e", files)
}

// newEnvIn is newEnv in the named bucket (a test whose listing must not
// see other tests' objects on a real server, where they stay).
func newEnvIn(t *testing.T, bucket string, files map[string][]byte) *env {
	t.Helper()
	e := &env{t: t, files: files, work: t.TempDir(), bucket: bucket}
	if ext := s3test.NewExternal(); ext != nil {
		e.target = ext
	} else {
		srv := s3test.NewServer()
		t.Cleanup(srv.Close)
		e.target = srv
	}
	e.secret = e.target.SecretKey()
	if err := e.target.CreateBucket(e.bucket); err != nil {
		t.Fatal(err)
	}
	px, err := s3test.NewProxy(e.target.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	e.proxy = px
	e.local = filepath.Join(e.work, "local")
	for name, data := range files {
		e.put(name, data)
		p := filepath.Join(e.local, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.spec = filepath.Join(e.work, "spec.yaml")
	if err := os.WriteFile(e.spec, []byte(spec2of11), 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) put(name string, data []byte) {
	e.t.Helper()
	if _, err := e.target.Put(e.bucket, "ds/"+name, data); err != nil {
		e.t.Fatal(err)
	}
}

// prep runs the binary with the AWS settings of a user on a machine with
// nothing else configured: credentials, region and endpoint (the proxy).
func (e *env) prep(args ...string) testutil.Result {
	e.t.Helper()
	return e.prepWith(e.target.AccessKey(), e.secret, args...)
}

func (e *env) prepWith(id, secret string, args ...string) testutil.Result {
	e.t.Helper()
	cmd := exec.Command(prepBin, append([]string{"--progress", "never"}, args...)...)
	home := filepath.Join(e.work, "home")
	os.MkdirAll(home, 0o755)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + os.TempDir(),
		"AWS_ACCESS_KEY_ID=" + id, "AWS_SECRET_ACCESS_KEY=" + secret, "AWS_REGION=" + s3test.Region,
		"AWS_ENDPOINT_URL=" + e.proxy.URL, "AWS_EC2_METADATA_DISABLED=true"}
	return testutil.Run(e.t, cmd, args)
}

func (e *env) url(rel string) string { return "s3://" + e.bucket + "/ds/" + rel }

// planJSON is the part of `prep plan --json` these tests read.
type planJSON struct {
	Fingerprint       string `json:"fingerprint"`
	SourceFingerprint string `json:"source_fingerprint"`
}

func (e *env) plan(out string, sources ...string) planJSON {
	e.t.Helper()
	args := []string{"plan", "--seed", "3", "--epochs", "2", "--global-batch", "64", "--world-size", "2", "--shuffle", "global", "--remainder", "pad", "--json", "-o", out}
	for _, s := range sources {
		args = append(args, "--source", s)
	}
	r := e.prep(args...).OK(e.t)
	var p planJSON
	if err := json.Unmarshal([]byte(r.Stdout), &p); err != nil || p.Fingerprint == "" {
		e.t.Fatalf("plan --json: %v\n%s", err, r.Stdout)
	}
	return p
}

// convertJSON is the part of `prep convert --json` these tests read.
type convertJSON struct {
	Shards int `json:"shards"`
	Source *struct {
		Requests     int64 `json:"requests"`
		Retries      int64 `json:"retries"`
		BytesFetched int64 `json:"bytes_fetched"`
		BytesNeeded  int64 `json:"bytes_needed"`
	} `json:"source"`
}

func (e *env) convert(planPath, out string, extra ...string) convertJSON {
	e.t.Helper()
	r := e.prep(append([]string{"convert", "--plan", planPath, "--spec", e.spec, "-o", out, "--json"}, extra...)...).OK(e.t)
	var c convertJSON
	if err := json.Unmarshal([]byte(r.Stdout), &c); err != nil {
		e.t.Fatalf("convert --json: %v\n%s", err, r.Stdout)
	}
	return c
}

// shardDigests returns the digests of the shard files under dir.
func shardDigests(t *testing.T, dir string) map[string]string {
	all := testutil.TreeDigests(t, dir)
	out := map[string]string{}
	for k, v := range all {
		if strings.HasSuffix(k, ".shard") {
			out[k] = v
		}
	}
	if len(out) == 0 {
		t.Fatalf("no shard under %s", dir)
	}
	return out
}

func sameDigests(t *testing.T, what string, a, b map[string]string) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d shards vs %d", what, len(a), len(b))
	}
	for k, v := range a {
		if b[k] != v {
			t.Errorf("%s: shard %s differs", what, k)
		}
	}
}

// TestS3EndToEndMatchesLocal: plan -> convert -> verify --deep from S3
// gives the fingerprints and byte-identical shards of the same run from
// local files, and either plan converts from either place.
func TestS3EndToEndMatchesLocal(t *testing.T) {
	e := newEnv(t, dataset(t, 4, 3000, 1000))
	pl := filepath.Join(e.work, "local.json")
	ps := filepath.Join(e.work, "s3.json")
	lp := e.plan(pl, e.local)
	sp := e.plan(ps, e.url(""))
	// One LIST and one GET per file; the text summary says so.
	r := e.prep("plan", "--source", e.url(""), "--global-batch", "64", "-o", filepath.Join(e.work, "text.json"))
	if !strings.Contains(r.OK(t).Stdout, "  source reads     5 requests (1.25 per file), 0 retries") {
		t.Errorf("plan summary:\n%s", r.Stdout)
	}
	if lp.Fingerprint != sp.Fingerprint || lp.SourceFingerprint != sp.SourceFingerprint {
		t.Fatalf("fingerprints differ: local %+v, s3 %+v", lp, sp)
	}
	outL, outS, outX := filepath.Join(e.work, "outL"), filepath.Join(e.work, "outS"), filepath.Join(e.work, "outX")
	cl := e.convert(pl, outL)
	if cl.Source != nil {
		t.Errorf("a local convert reports object-store traffic: %+v", cl.Source)
	}
	prom := filepath.Join(e.work, "prep.prom")
	cs := e.convert(ps, outS, "--io-concurrency", "4", "--metrics-file", prom)
	if cs.Source == nil || cs.Source.Retries != 0 || cs.Source.BytesFetched == 0 {
		t.Fatalf("s3 convert source stats %+v", cs.Source)
	}
	// 2 footer requests per file (tail and leading magic), then one
	// coalesced GET per row group (label and f0 lie 4 bytes apart).
	if cs.Source.Requests != 4*2+4*3 {
		t.Errorf("requests %d, want %d", cs.Source.Requests, 4*2+4*3)
	}
	m := testutil.ReadMetrics(t, prom, "convert", outS)
	if m["prep_source_bytes_fetched_total"] != float64(cs.Source.BytesFetched) || m["prep_source_requests_total"] != float64(cs.Source.Requests) ||
		m["prep_source_bytes_needed_total"] != float64(cs.Source.BytesNeeded) || m["prep_source_retries_total"] != 0 {
		t.Errorf("metrics %v disagree with the summary %+v", m, cs.Source)
	}
	// The local plan, converted from S3 through --source-root.
	e.convert(pl, outX, "--source-root", e.url(""))
	dl := shardDigests(t, outL)
	sameDigests(t, "s3 vs local", dl, shardDigests(t, outS))
	sameDigests(t, "local plan from s3 vs local", dl, shardDigests(t, outX))
	e.prep("verify", "--deep", outS).OK(t)
	// The S3 plan, converted and verified from the local copy.
	outY := filepath.Join(e.work, "outY")
	e.convert(ps, outY, "--source-root", e.local)
	sameDigests(t, "s3 plan from local vs local", dl, shardDigests(t, outY))
	e.prep("verify", "--deep", "--source-root", e.local, outY).OK(t)
	// Nothing the run wrote carries the secret.
	for _, dir := range []string{outS, outX} {
		filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() {
				if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(e.secret)) {
					t.Errorf("%s holds the secret", p)
				}
			}
			return nil
		})
	}
	if b, _ := os.ReadFile(ps); bytes.Contains(b, []byte(e.secret)) || !bytes.Contains(b, []byte(`"root": "s3://prep-e2e/ds/"`)) {
		t.Errorf("plan.json: secret present or root not the s3 URL:\n%.400s", b)
	}
}

// TestS3ConvertSurvivesFaults: 503s, truncated bodies and resets on the
// column-chunk reads are retried; the shards equal the clean run's.
func TestS3ConvertSurvivesFaults(t *testing.T) {
	e := newEnv(t, dataset(t, 3, 2000, 500))
	ps := filepath.Join(e.work, "s3.json")
	e.plan(ps, e.url(""))
	clean := filepath.Join(e.work, "clean")
	e.convert(ps, clean)
	var n atomic.Int64
	e.proxy.SetFault(func(r *http.Request, _ int64) s3test.Fault {
		if !s3test.IsRangedGet(r) {
			return s3test.Pass
		}
		switch n.Add(1) % 6 {
		case 1:
			return s3test.SlowDown
		case 3:
			return s3test.Truncate
		case 5:
			return s3test.Internal
		}
		return s3test.Pass
	})
	out := filepath.Join(e.work, "faulty")
	c := e.convert(ps, out)
	if c.Source.Retries != e.proxy.Injected() || c.Source.Retries == 0 {
		t.Errorf("retries %d, faults injected %d", c.Source.Retries, e.proxy.Injected())
	}
	sameDigests(t, "faulty vs clean", shardDigests(t, clean), shardDigests(t, out))
}

// TestS3ConvertRidesOutOutage: the endpoint down for 10 s (every request
// reset) from the convert's first request on: the default retry budget
// (60 s) rides it out and the shards equal the clean run's. With
// --s3-retry-budget 2s and the endpoint down for good, the convert fails
// cleanly: exit 1, retries exhausted naming the object, the attempts and
// the time spent retrying, and no manifest.
func TestS3ConvertRidesOutOutage(t *testing.T) {
	e := newEnv(t, dataset(t, 2, 1000, 500))
	ps := filepath.Join(e.work, "s3.json")
	e.plan(ps, e.url(""))
	clean := filepath.Join(e.work, "clean")
	e.convert(ps, clean)
	const outage = 10 * time.Second
	var mu sync.Mutex
	var first time.Time
	e.proxy.SetFault(func(*http.Request, int64) s3test.Fault {
		mu.Lock()
		defer mu.Unlock()
		if first.IsZero() {
			first = time.Now()
		}
		if time.Since(first) < outage {
			return s3test.Reset
		}
		return s3test.Pass
	})
	out := filepath.Join(e.work, "out")
	c := e.convert(ps, out)
	if c.Source == nil || c.Source.Retries == 0 {
		t.Fatalf("source stats %+v: the outage was not retried", c.Source)
	}
	sameDigests(t, "after an outage vs clean", shardDigests(t, clean), shardDigests(t, out))

	e.proxy.SetFault(func(*http.Request, int64) s3test.Fault { return s3test.Reset })
	out2 := filepath.Join(e.work, "out2")
	r := e.prep("convert", "--plan", ps, "--spec", e.spec, "-o", out2, "--s3-retry-budget", "2s")
	r.MustExit(t, 1)
	r.Failed(t, "retries exhausted (retry budget 2s)", ".parquet")
	m := regexp.MustCompile(`(\d+) attempts in (\d+\.\d)s`).FindStringSubmatch(r.Stderr)
	if m == nil {
		t.Fatalf("no attempts and retry time in:\n%s", r.Stderr)
	}
	if secs, _ := strconv.ParseFloat(m[2], 64); secs < 2.0 {
		t.Errorf("retried for %ss, want at least the 2s budget:\n%s", m[2], r.Stderr)
	}
	if _, err := os.Stat(filepath.Join(out2, "manifest.json")); err == nil {
		t.Error("a failed convert wrote a manifest")
	}
}

// TestS3EmptyObject: a zero-byte object is refused as a local empty file
// is ("file too small: 0 bytes"), not as an HTTP 416.
func TestS3EmptyObject(t *testing.T) {
	e := newEnvIn(t, "prep-e2e-empty", map[string][]byte{"empty.parquet": {}})
	r := e.prep("plan", "--source", e.url(""), "--global-batch", "8", "-o", filepath.Join(e.work, "p.json"))
	r.MustExit(t, 1)
	r.Failed(t, e.url("empty.parquet"), "file too small: 0 bytes")
	if strings.Contains(r.Stderr, "416") {
		t.Errorf("the HTTP status leaks into the message:\n%s", r.Stderr)
	}
}

// TestS3ObjectReplaced: an object replaced after planning, or while the
// convert runs, fails the convert naming it; nothing is written.
func TestS3ObjectReplaced(t *testing.T) {
	files := dataset(t, 3, 2000, 500)
	e := newEnv(t, files)
	ps := filepath.Join(e.work, "s3.json")
	e.plan(ps, e.url(""))
	// Same size and footer, other bytes: only the ETag tells.
	data := append([]byte(nil), files["part=1/f-001.parquet"]...)
	data[100] ^= 0xff
	e.put("part=1/f-001.parquet", data)
	out := filepath.Join(e.work, "out")
	r := e.prep("convert", "--plan", ps, "--spec", e.spec, "-o", out)
	r.Failed(t, "part=1/f-001.parquet", "source changed")
	if _, err := os.Stat(filepath.Join(out, "manifest.json")); err == nil {
		t.Error("a manifest was written")
	}
	e.put("part=1/f-001.parquet", files["part=1/f-001.parquet"])
	// Mid-run: every footer was read and checked; at the first
	// column-chunk read (a range that is neither a suffix nor the leading
	// magic) file 2 is replaced, same size and footer again.
	e.plan(ps, e.url(""))
	var once atomic.Bool
	changed := append([]byte(nil), files["part=0/f-002.parquet"]...)
	changed[200] ^= 0xff
	e.proxy.SetFault(func(r *http.Request, _ int64) s3test.Fault {
		rg := r.Header.Get("Range")
		if s3test.IsRangedGet(r) && !strings.HasPrefix(rg, "bytes=-") && rg != "bytes=0-3" && once.CompareAndSwap(false, true) {
			e.put("part=0/f-002.parquet", changed)
		}
		return s3test.Pass
	})
	out2 := filepath.Join(e.work, "out2")
	r = e.prep("convert", "--plan", ps, "--spec", e.spec, "-o", out2, "--io-concurrency", "1")
	r.Failed(t, "part=0/f-002.parquet", "source changed")
	if _, err := os.Stat(filepath.Join(out2, "manifest.json")); err == nil {
		t.Error("a manifest was written")
	}
}

// TestS3Errors: each failure has its own message, exits 1 and writes
// nothing; no secret appears in any output.
func TestS3Errors(t *testing.T) {
	e := newEnv(t, dataset(t, 1, 100, 100))
	srv, inProcess := e.target.(*s3test.Server)
	plan := func(id, secret, src string) testutil.Result {
		return e.prepWith(id, secret, "plan", "--source", src, "--global-batch", "8", "-o", filepath.Join(e.work, "p.json"))
	}
	for _, tc := range []struct {
		name     string
		id, sec  string
		src      string
		code     int
		mustName []string
	}{
		{"no_bucket", e.target.AccessKey(), e.secret, "s3://prep-no-such-bucket/ds/", 1, []string{"s3://prep-no-such-bucket/ds/", "no such bucket"}},
		{"no_key", e.target.AccessKey(), e.secret, e.url("nothing.parquet"), 1, []string{e.url("nothing.parquet"), "no such key"}},
		{"bad_credentials", "AKIAWRONG00000000000", "wrong-secret-value-xyz", e.url(""), 1, []string{"bad or missing credentials"}},
		{"credential_url", e.target.AccessKey(), e.secret, "s3://AKIAX:" + e.secret + "@prep-e2e/ds/", 2, []string{"refusing a URL that carries credentials"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := plan(tc.id, tc.sec, tc.src)
			r.MustExit(t, tc.code)
			r.Failed(t, tc.mustName...)
			for _, s := range []string{e.secret, "wrong-secret-value-xyz"} {
				if strings.Contains(r.Stderr+r.Stdout, s) {
					t.Errorf("output carries a secret:\n%s", r.Stderr)
				}
			}
			if _, err := os.Stat(filepath.Join(e.work, "p.json")); err == nil {
				t.Error("a plan file was written")
			}
		})
	}
	// A convert whose reads are refused (denied after planning, then
	// wrong credentials) fails with that message and writes nothing.
	ps := filepath.Join(e.work, "ok.json")
	e.plan(ps, e.url(""))
	out := filepath.Join(e.work, "out")
	r := e.prepWith("AKIAWRONG00000000000", "wrong-secret-value-xyz", "convert", "--plan", ps, "--spec", e.spec, "-o", out)
	r.MustExit(t, 1)
	r.Failed(t, "bad or missing credentials")
	if inProcess {
		srv.Deny("prep-e2e/ds/")
		r := plan(e.target.AccessKey(), e.secret, e.url(""))
		r.MustExit(t, 1)
		r.Failed(t, "access denied")
		r = e.prep("convert", "--plan", ps, "--spec", e.spec, "-o", out, "--metrics-file", filepath.Join(e.work, "m.prom"))
		r.MustExit(t, 1)
		r.Failed(t, "access denied", "f-000.parquet")
		if b, _ := os.ReadFile(filepath.Join(e.work, "m.prom")); bytes.Contains(b, []byte(e.secret)) || !bytes.Contains(b, []byte("prep_errors_total")) {
			t.Errorf("metrics file: secret present or no error counted:\n%s", b)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "manifest.json")); err == nil {
		t.Error("a refused convert wrote a manifest")
	}
}

// hiveDataset is 4 dates x 2 regions of one file each, under
// date=2026-11-0D/region=R/, rows ids continuing across files in key order.
func hiveDataset(t testing.TB) map[string][]byte {
	out := map[string][]byte{}
	id := int64(0)
	for d := 1; d <= 4; d++ {
		for _, r := range []string{"eu", "us"} {
			rs := make([]row, 250)
			for i := range rs {
				rs[i] = row{ID: id, Label: int32(id % 7), F0: float32(i)}
				id++
			}
			out[fmt.Sprintf("date=2026-11-%02d/region=%s/part-0.parquet", d, r)] = pqfixture.Of(rs...).RowGroupRows(100).Bytes(t)
		}
	}
	return out
}

// TestS3HivePrunedPartitionsUnread: a sources file naming an s3://
// directory of hive partitions, with a filter on the partition columns
// (a declared date and an inferred text key) and a data column: the
// proxy sees the listing and GETs of the two kept objects only, never a
// GET or HEAD of an object in a pruned partition; the plan selects
// exactly the rows the same sources file selects from the local copy
// (same selection digest, rows and fingerprint of the selection), which
// are the ids computed here by hand. Without a filter each object is read
// by one GET.
func TestS3HivePrunedPartitionsUnread(t *testing.T) {
	files := hiveDataset(t)
	e := newEnvIn(t, "prep-e2e-hive", files)
	const filter = "region = 'eu' AND date BETWEEN DATE '2026-11-02' AND '2026-11-03' AND label != 3"
	sources := func(path string) string {
		p := filepath.Join(e.work, fmt.Sprintf("sources-%d.yaml", len(path)))
		body := fmt.Sprintf("sources:\n  - name: ev\n    path: %s\n    filter: %q\n    partitions:\n      date: date\n", path, filter)
		if path == "" {
			p, body = filepath.Join(e.work, "sources-all.yaml"), fmt.Sprintf("sources:\n  - name: ev\n    path: %s\n", e.url(""))
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var mu sync.Mutex
	var reqs []string
	e.proxy.SetFault(func(r *http.Request, _ int64) s3test.Fault {
		mu.Lock()
		defer mu.Unlock()
		reqs = append(reqs, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		return s3test.Pass
	})
	type summary struct {
		Files   int `json:"files"`
		Mixture struct {
			Sources []struct {
				Rows            uint64 `json:"rows"`
				SelectionDigest string `json:"selection_digest"`
				Partitions      []struct {
					Key, Type string
				} `json:"partitions"`
			} `json:"sources"`
		} `json:"mixture"`
	}
	plan := func(src, out string) summary {
		r := e.prep("plan", "--sources", src, "--global-batch", "16", "--json", "-o", out).OK(t)
		var s summary
		if err := json.Unmarshal([]byte(r.Stdout), &s); err != nil || len(s.Mixture.Sources) != 1 {
			t.Fatalf("plan --json: %v\n%s", err, r.Stdout)
		}
		return s
	}
	remote := plan(sources(e.url("")), filepath.Join(e.work, "s3.json"))
	mu.Lock()
	seen := append([]string(nil), reqs...)
	mu.Unlock()
	kept := map[string]bool{"date=2026-11-02/region=eu/part-0.parquet": true, "date=2026-11-03/region=eu/part-0.parquet": true}
	read := map[string]int{}
	for _, q := range seen {
		method, rest, _ := strings.Cut(q, " ")
		path, _, _ := strings.Cut(rest, "?")
		for name := range files {
			if strings.HasSuffix(path, "/ds/"+name) {
				read[name]++
				if !kept[name] && (method == http.MethodGet || method == http.MethodHead) {
					t.Errorf("%s of %s, in a pruned partition", method, name)
				}
			}
		}
	}
	for name := range kept {
		if read[name] == 0 {
			t.Errorf("kept object %s never read (requests: %v)", name, seen)
		}
	}
	if len(read) != len(kept) {
		t.Errorf("objects read: %v, want only %v", read, kept)
	}
	t.Logf("%d requests in all; requests per object read: %v", len(seen), read)
	// Files 2 and 4 of the key order (date 02 and 03, region eu) hold ids
	// 500..749 and 1000..1249; label = id % 7 != 3 keeps 6 of every 7.
	var want uint64
	for _, base := range []int64{500, 1000} {
		for id := base; id < base+250; id++ {
			if id%7 != 3 {
				want++
			}
		}
	}
	if remote.Files != 2 || remote.Mixture.Sources[0].Rows != want {
		t.Errorf("s3 plan: %d files, %d rows; want 2 files, %d rows", remote.Files, remote.Mixture.Sources[0].Rows, want)
	}
	local := plan(sources(e.local), filepath.Join(e.work, "local.json"))
	if local.Files != remote.Files || local.Mixture.Sources[0].Rows != remote.Mixture.Sources[0].Rows ||
		local.Mixture.Sources[0].SelectionDigest != remote.Mixture.Sources[0].SelectionDigest {
		t.Errorf("local plan %+v, s3 plan %+v", local, remote)
	}
	// Without a filter every object is read (footers while listing) and
	// the layout still typed: date inferred DATE, region TEXT. Each object
	// costs one GET, its footer's: the partition key check takes the
	// columns from that footer and reads none again.
	mu.Lock()
	reqs = nil
	mu.Unlock()
	all := plan(sources(""), filepath.Join(e.work, "all.json"))
	if all.Files != 8 || fmt.Sprint(all.Mixture.Sources[0].Partitions) != "[{date date} {region string}]" {
		t.Errorf("unfiltered s3 plan: %+v", all)
	}
	mu.Lock()
	perObject := map[string][]string{}
	for _, q := range reqs {
		method, rest, _ := strings.Cut(q, " ")
		path, _, _ := strings.Cut(rest, "?")
		if name, ok := strings.CutPrefix(path, "/"+e.bucket+"/ds/"); ok {
			perObject[name] = append(perObject[name], method)
		}
	}
	mu.Unlock()
	for name := range files {
		if got := perObject[name]; len(got) != 1 || got[0] != http.MethodGet {
			t.Errorf("unfiltered plan: requests of %s: %v, want one GET", name, got)
		}
	}

	// An object with other keys is refused from the listing alone, naming
	// the source and the object: no object is read, no plan written.
	e.put("zone=x/part-0.parquet", files["date=2026-11-01/region=eu/part-0.parquet"])
	mu.Lock()
	reqs = nil
	mu.Unlock()
	out := filepath.Join(e.work, "bad.json")
	r := e.prep("plan", "--sources", sources(e.url("")), "--global-batch", "16", "-o", out)
	r.MustExit(t, 2)
	r.Failed(t, "source ev", "zone=x/part-0.parquet has partition keys zone, but date=2026-11-01/region=eu/part-0.parquet has date/region")
	mu.Lock()
	for _, q := range reqs {
		if path, _, _ := strings.Cut(q, "?"); (strings.HasPrefix(q, "GET ") || strings.HasPrefix(q, "HEAD ")) && strings.HasSuffix(path, ".parquet") {
			t.Errorf("object read for a refused layout: %s", q)
		}
	}
	mu.Unlock()
	if _, err := os.Stat(out); err == nil {
		t.Error("a plan was written")
	}
}

// TestS3HiveKeyConflict: objects with a column label under label=N/
// levels of an s3:// directory are refused at plan time, naming the
// source, the object and the key, without a filter (every object's footer
// checked) and with one keeping label=2 only (the kept object checked);
// no plan is written.
func TestS3HiveKeyConflict(t *testing.T) {
	data := hiveDataset(t)["date=2026-11-01/region=eu/part-0.parquet"]
	e := newEnvIn(t, "prep-e2e-hive-conflict", map[string][]byte{"label=1/part-0.parquet": data, "label=2/part-0.parquet": data})
	for i, c := range []struct{ filter, want string }{
		{"", "source ev: partition key conflict: label=1/part-0.parquet has a top-level column label and a partition level label=...; rename one (checked every file's footer: 2 files)"},
		{"label > 1", "source ev: partition key conflict: label=2/part-0.parquet has a top-level column label and a partition level label=...; rename one (checked the 1 file the filter keeps; 1 file pruned unread)"},
	} {
		body := fmt.Sprintf("sources:\n  - name: ev\n    path: %s\n", e.url(""))
		if c.filter != "" {
			body += fmt.Sprintf("    filter: %q\n", c.filter)
		}
		p := filepath.Join(e.work, fmt.Sprintf("sources-%d.yaml", i))
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(e.work, fmt.Sprintf("plan-%d.json", i))
		r := e.prep("plan", "--sources", p, "--global-batch", "16", "-o", out)
		r.MustExit(t, 2)
		r.Failed(t, c.want)
		if _, err := os.Stat(out); err == nil {
			t.Errorf("filter %q: a plan was written", c.filter)
		}
	}
}
