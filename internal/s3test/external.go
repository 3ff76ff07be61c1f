package s3test

import (
	"bytes"
	"context"
	"errors"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// EndpointEnv names the environment variable that points the opt-in
// real-server tests (`make test-s3`) at an S3 server on 127.0.0.1; its
// credentials are AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
const EndpointEnv = "PREP_S3_TEST_ENDPOINT"

// Target is an S3 server tests can upload to: the in-process Server or a
// real one (External).
type Target interface {
	// Endpoint returns the server's base URL (http://127.0.0.1:port).
	Endpoint() string
	// CreateBucket creates a bucket (an existing one is fine).
	CreateBucket(name string) error
	// Put stores or replaces an object and returns its ETag.
	Put(bucket, key string, data []byte) (string, error)
	// AccessKey and SecretKey are the credentials the server accepts.
	AccessKey() string
	SecretKey() string
}

// Endpoint returns the server's URL.
func (s *Server) Endpoint() string { return s.URL }

// AccessKey returns the accepted access key id.
func (s *Server) AccessKey() string { return AccessKey }

// SecretKey returns the accepted secret.
func (s *Server) SecretKey() string { return SecretKey }

// External is a real S3 server reached with the SDK.
type External struct {
	URL       string
	id, key   string
	client    *s3.Client
	createdOK map[string]bool
}

// NewExternal returns the server named by $PREP_S3_TEST_ENDPOINT with the
// credentials in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or nil when
// the variable is unset.
func NewExternal() *External {
	ep := os.Getenv(EndpointEnv)
	if ep == "" {
		return nil
	}
	id, key := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	cfg := aws.Config{Region: Region, Credentials: credentials.NewStaticCredentialsProvider(id, key, "")}
	c := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(ep)
		o.UsePathStyle = true
	})
	return &External{URL: ep, id: id, key: key, client: c, createdOK: map[string]bool{}}
}

// Endpoint returns the server's URL.
func (e *External) Endpoint() string { return e.URL }

// AccessKey returns the access key id in use.
func (e *External) AccessKey() string { return e.id }

// SecretKey returns the secret in use.
func (e *External) SecretKey() string { return e.key }

// CreateBucket creates a bucket; one that exists already is fine.
func (e *External) CreateBucket(name string) error {
	_, err := e.client.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: &name})
	var owned *types.BucketAlreadyOwnedByYou
	var exists *types.BucketAlreadyExists
	if errors.As(err, &owned) || errors.As(err, &exists) {
		return nil
	}
	return err
}

// Put uploads an object and returns its ETag.
func (e *External) Put(bucket, key string, data []byte) (string, error) {
	out, err := e.client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(data)})
	if err != nil {
		return "", err
	}
	return aws.ToString(out.ETag), nil
}
