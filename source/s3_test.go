package source

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/prepml/prep/internal/s3test"
)

// s3env is an in-process S3 server, a fault proxy in front of it and a
// client speaking to the proxy.
type s3env struct {
	srv   *s3test.Server
	proxy *s3test.Proxy
	c     *S3Client
	files map[string][]byte // what a test uploaded, by name
}

// newS3Env starts a server with bucket "data" and a client over the
// proxy, with short backoffs so fault tests stay fast.
func newS3Env(t *testing.T, o S3Options) *s3env {
	t.Helper()
	srv := s3test.NewServer()
	t.Cleanup(srv.Close)
	if err := srv.CreateBucket("data"); err != nil {
		t.Fatal(err)
	}
	px, err := s3test.NewProxy(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	if o.Config == nil {
		o.Config = testConfig(s3test.AccessKey, s3test.SecretKey)
	}
	o.Endpoint = px.URL
	if o.BaseBackoff == 0 {
		o.BaseBackoff, o.MaxBackoff = time.Millisecond, 4*time.Millisecond
	}
	c, err := NewS3Client(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return &s3env{srv: srv, proxy: px, c: c}
}

func testConfig(id, secret string) *aws.Config {
	return &aws.Config{Region: s3test.Region,
		Credentials: credentials.NewStaticCredentialsProvider(id, secret, "")}
}

func (e *s3env) put(t *testing.T, key string, data []byte) string {
	t.Helper()
	etag, err := e.srv.Put("data", key, data)
	if err != nil {
		t.Fatal(err)
	}
	return etag
}

func (e *s3env) store(t *testing.T) *S3Store {
	t.Helper()
	st, err := e.c.Store("s3://data/")
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestParseS3URL(t *testing.T) {
	for _, tc := range []struct {
		in     string
		bucket string
		key    string
		err    error
	}{
		{in: "s3://data/", bucket: "data", key: ""},
		{in: "s3://data", bucket: "data", key: ""},
		{in: "s3://my-bucket.v2/train/part-*.parquet", bucket: "my-bucket.v2", key: "train/part-*.parquet"},
		{in: "s3://AKIAXXXX:wJalrXUtnFEMI@data/train/", err: ErrCredentialURL},
		{in: "s3://data/x.parquet?X-Amz-Credential=AKIA%2F&X-Amz-Signature=deadbeef", err: ErrCredentialURL},
		{in: "s3://data/x.parquet?versionId=3", err: ErrBadURL},
		{in: "s3://Data_Bucket/x", err: ErrBadURL},
		{in: "s3:///x", err: ErrBadURL},
		{in: "/local/path", err: ErrBadURL},
	} {
		u, err := ParseS3URL(tc.in)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%s: error %v, want %v", tc.in, err, tc.err)
			}
			for _, secret := range []string{"wJalrXUtnFEMI", "deadbeef"} {
				if err != nil && strings.Contains(err.Error(), secret) {
					t.Errorf("%s: error repeats the secret: %v", tc.in, err)
				}
			}
			continue
		}
		if err != nil || u.Bucket != tc.bucket || u.Key != tc.key {
			t.Errorf("%s: got %+v, %v; want bucket %q key %q", tc.in, u, err, tc.bucket, tc.key)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"s3://id:secret@data/a/b":       "s3://<redacted>@data/a/b",
		"s3://data/a?X-Amz-Signature=z": "s3://data/a?<redacted>",
		"http://u:p@127.0.0.1:9000":     "http://<redacted>@127.0.0.1:9000",
		"s3://data/":                    "s3://data/",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNewS3ClientRefusesEndpointWithCredentials(t *testing.T) {
	_, err := NewS3Client(context.Background(), S3Options{Config: testConfig("a", "b"), Endpoint: "http://id:topsecret@127.0.0.1:1"})
	if !errors.Is(err, ErrCredentialURL) || strings.Contains(err.Error(), "topsecret") {
		t.Fatalf("error %v, want ErrCredentialURL without the secret", err)
	}
}

func TestStoreString(t *testing.T) {
	e := newS3Env(t, S3Options{})
	st, err := e.c.Store("s3://data/train")
	if err != nil {
		t.Fatal(err)
	}
	if got := st.String(); got != "s3://data/train/" {
		t.Fatalf("String() = %q", got)
	}
	if _, err := e.c.Store("s3://data/train/*.parquet"); !errors.Is(err, ErrBadURL) {
		t.Fatalf("glob root: error %v, want ErrBadURL", err)
	}
}

func md5hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}
