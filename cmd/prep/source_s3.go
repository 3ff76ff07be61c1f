package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/source"
)

// s3Flags are the object-store settings of the commands that read a
// source: plan, convert and verify.
type s3Flags struct {
	ioConcurrency int
	retryBudget   time.Duration
}

// maxRetryBudget is the largest --s3-retry-budget accepted.
const maxRetryBudget = 24 * time.Hour

func addIOFlags(cmd *cobra.Command, o *s3Flags) {
	cmd.Flags().IntVar(&o.ioConcurrency, "io-concurrency", source.DefaultIOConcurrency,
		"object-store requests in flight at once, for s3:// sources (1-1024)")
	cmd.Flags().DurationVar(&o.retryBudget, "s3-retry-budget", source.DefaultRetryBudget,
		"how long one s3:// request keeps retrying 5xx, throttling, resets, stalls and truncated bodies, with jittered exponential backoff, before the command fails (1s to 24h)")
}

func (o *s3Flags) check() error {
	if o.ioConcurrency < 1 || o.ioConcurrency > 1024 {
		return usagef("--io-concurrency %d: want 1 to 1024", o.ioConcurrency)
	}
	if o.retryBudget < time.Second || o.retryBudget > maxRetryBudget {
		return usagef("--s3-retry-budget %s: want 1s to 24h", o.retryBudget)
	}
	return nil
}

// options returns the client options the flags set.
func (o *s3Flags) options() source.S3Options {
	return source.S3Options{Concurrency: o.ioConcurrency, RetryBudget: o.retryBudget}
}

// readAheadShare is the part of --memory-limit given to object-store
// read-ahead (fetched column chunks not yet decoded): a quarter, at most
// source.DefaultReadAheadBytes. The decoder gets the rest.
func readAheadShare(memoryLimit int64) int64 {
	return feature.NewBudget(memoryLimit).ReadAhead()
}

// s3Source is an object-store source opened for one command: the client
// (for its counters) and, when a command reads a plan's files, the store.
type s3Source struct {
	client *source.S3Client
	store  *source.S3Store
}

// openS3 returns the store of root (an s3:// URL) over a new client with
// the standard AWS credential chain, or nil when root is local. Errors wrap
// source.ErrBadURL or source.ErrCredentialURL and are usage errors.
func openS3(ctx context.Context, root string, o *s3Flags, readAhead int64) (*s3Source, error) {
	if !source.IsS3URL(root) {
		return nil, nil
	}
	c, err := source.NewS3Client(ctx, o.storeOptions(readAhead))
	if err != nil {
		return nil, err
	}
	st, err := c.Store(root)
	if err != nil {
		return nil, usagef("%v", err)
	}
	return &s3Source{client: c, store: st}, nil
}

// close closes what the store opened ahead and no reader took.
func (s *s3Source) close() {
	if s != nil && s.store != nil {
		s.store.Close()
	}
}

// stats returns the traffic so far (nil for a local source).
func (s *s3Source) stats() *source.S3Stats {
	if s == nil {
		return nil
	}
	st := s.client.Stats()
	return &st
}

// fetchLabel describes the bytes fetched so far, for a progress bar.
func (s *s3Source) fetchLabel() string {
	st := s.client.Stats()
	return fmt.Sprintf("fetched %s in %d requests", formatBytes(st.BytesFetched), st.Requests)
}

// sourceLine renders object-store traffic for a text summary.
func sourceLine(st *source.S3Stats) string {
	if st == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "source: fetched %s (%d bytes) for %s needed, in %d requests, %d retries",
		formatBytes(st.BytesFetched), st.BytesFetched, formatBytes(st.BytesNeeded), st.Requests, st.Retries)
	if st.BytesNeeded > 0 {
		fmt.Fprintf(&b, " (%.3fx)", float64(st.BytesFetched)/float64(st.BytesNeeded))
	}
	return b.String()
}

// discoverSources reads the plan source that paths (--source) name
// (source.DiscoverPaths). It returns the object-store source it opened
// (nil for local paths) for its counters. Mixed local and s3:// paths, a
// URL that carries credentials or is malformed, and an object-store client
// that cannot be configured are usage errors.
func discoverSources(ctx context.Context, paths []string, o *s3Flags) (plan.Source, *s3Source, error) {
	src, c, err := source.DiscoverPaths(ctx, paths, o.options())
	var s *s3Source
	if c != nil {
		s = &s3Source{client: c}
	}
	switch {
	case err == nil:
	case errors.Is(err, source.ErrClientConfig):
		err = usagef("%v", err)
	case errors.Is(err, source.ErrMixedRoots), errors.Is(err, source.ErrBadURL), errors.Is(err, source.ErrCredentialURL):
		err = usagef("--source: %v", err)
	}
	return src, s, err
}

// planStore returns the Store a command reads the plan's files from
// (source.OpenPlanStore: root is --source-root, "" for the plan's own
// root) and sets p.Source.Root to its resolved root. The object-store
// source is nil for a local root. Bad roots are usage errors.
func planStore(ctx context.Context, p *plan.Plan, root string, o *s3Flags, readAhead int64) (source.Store, *s3Source, error) {
	ps, err := source.OpenPlanStore(ctx, p.Source, root, o.storeOptions(readAhead))
	if err != nil {
		return nil, nil, storeError(err, root)
	}
	p.Source.Root = ps.Root
	var remote *s3Source
	if ps.S3 != nil {
		remote = &s3Source{client: ps.S3.Client(), store: ps.S3}
	}
	return ps.Store, remote, nil
}

// storeOptions returns the client options the flags set, with readAhead
// bytes of read-ahead.
func (o *s3Flags) storeOptions(readAhead int64) source.S3Options {
	so := o.options()
	so.ReadAheadBytes = readAhead
	return so
}

// storeError makes a root that cannot be a Store (source.ErrBadRoot) a
// usage error, naming --source-root when root (the flag's value) is set.
func storeError(err error, root string) error {
	switch {
	case !errors.Is(err, source.ErrBadRoot):
		return err
	case root != "":
		return usagef("--source-root: %v", err)
	}
	return usagef("%v", err)
}

// storeCache resolves the Store of a plan root once per root
// (source.PlanStores), for the several readers of one command (verify's
// fingerprint check and each shard's deep source), so they share one
// client and its counters.
type storeCache struct {
	ctx       context.Context
	io        *s3Flags
	readAhead int64

	once   sync.Once
	stores *source.PlanStores
}

// close closes the object stores opened.
func (c *storeCache) close() {
	if c.stores != nil {
		c.stores.Close()
	}
}

// store returns the Store of p's files under root (as planStore, without
// changing p).
func (c *storeCache) store(p *plan.Plan, root string) (source.Store, error) {
	c.once.Do(func() { c.stores = source.NewPlanStores(c.io.storeOptions(c.readAhead)) })
	st, err := c.stores.Store(c.ctx, p.Source, root)
	if err != nil {
		return nil, storeError(err, root)
	}
	return st, nil
}
