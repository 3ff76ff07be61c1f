package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
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

// s3Source is an object-store source opened for one command.
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
	so := o.options()
	so.ReadAheadBytes = readAhead
	c, err := source.NewS3Client(ctx, so)
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

// discoverSources reads the plan source that paths name: local files,
// directories and globs (source.Discover), or s3:// URLs
// (source.S3Client.DiscoverS3), never both in one plan. It returns the
// object-store source it opened (nil for local paths) for its counters. A
// URL that carries credentials or is malformed is a usage error.
func discoverSources(ctx context.Context, paths []string, o *s3Flags) (plan.Source, *s3Source, error) {
	remote := 0
	for _, p := range paths {
		if source.IsS3URL(p) {
			remote++
		}
	}
	if remote == 0 {
		src, err := source.Discover(ctx, paths)
		return src, nil, err
	}
	if remote != len(paths) {
		return plan.Source{}, nil, usagef("--source: local paths and s3:// URLs cannot be mixed in one plan (one plan reads one root)")
	}
	for _, p := range paths {
		if _, err := source.ParseS3URL(p); err != nil {
			return plan.Source{}, nil, usagef("--source: %v", err)
		}
	}
	c, err := source.NewS3Client(ctx, o.options())
	if err != nil {
		return plan.Source{}, nil, usagef("%v", err)
	}
	src, err := c.DiscoverS3(ctx, paths)
	s := &s3Source{client: c}
	if err != nil {
		if errors.Is(err, source.ErrBadURL) || errors.Is(err, source.ErrCredentialURL) {
			return plan.Source{}, s, usagef("--source: %v", err)
		}
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w: %w", err, source.ErrNoInput)
		}
		return plan.Source{}, s, err
	}
	return src, s, nil
}

// planStore returns the Store a command reads the plan's files from and
// sets p.Source.Root to its root (see resolveStore).
func planStore(ctx context.Context, p *plan.Plan, root string, o *s3Flags, readAhead int64) (source.Store, *s3Source, error) {
	st, remote, resolved, err := resolveStore(ctx, p, root, o, readAhead)
	if err != nil {
		return nil, nil, err
	}
	p.Source.Root = resolved
	return st, remote, nil
}

// resolveStore returns the Store of the plan's files and its root: root
// is --source-root ("" for the plan's own root), a local directory or an
// s3:// URL. An s3:// root gets an S3Store over a client of its own
// (returned for its counters), pinned to the ETags the plan recorded when
// it is the plan's own root; through another root each object is pinned to
// the version its first read sees, after its size and footer hash matched
// the plan. Bad roots are usage errors.
func resolveStore(ctx context.Context, p *plan.Plan, root string, o *s3Flags, readAhead int64) (source.Store, *s3Source, string, error) {
	planRoot := p.Source.Root
	switch {
	case root == "":
		root = planRoot
	case !source.IsS3URL(root):
		abs, err := filepath.Abs(root)
		if err != nil {
			return nil, nil, "", usagef("--source-root: %v", err)
		}
		root = abs
	}
	if !source.IsS3URL(root) {
		st, err := source.NewLocal(root)
		if err != nil {
			return nil, nil, "", usagef("--source-root: %v", err)
		}
		return st, nil, root, nil
	}
	s, err := openS3(ctx, root, o, readAhead)
	if err != nil {
		return nil, nil, "", err
	}
	if s.store.String() == strings.TrimSuffix(planRoot, "/")+"/" {
		pins := map[string]string{}
		for _, f := range p.Source.Files {
			if f.ETag != "" {
				pins[f.Path] = f.ETag
			}
		}
		s.store.Pin(pins)
	}
	// Readers open the plan's files one after the other: fetch every
	// footer ahead, Concurrency at a time, so each open costs no round trip.
	s.store.Preopen(ctx, p.Source.Files)
	return s.store, s, s.store.String(), nil
}

// storeCache resolves the Store of a plan root once per root, for the
// several readers of one command (verify's fingerprint check and each
// shard's deep source), so they share one client and its counters.
type storeCache struct {
	ctx       context.Context
	io        *s3Flags
	readAhead int64

	mu     sync.Mutex
	stores map[string]source.Store
	remote []*s3Source
}

// close closes the object stores opened.
func (c *storeCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.remote {
		r.close()
	}
}

// store returns the Store of p's files under root (as resolveStore).
func (c *storeCache) store(p *plan.Plan, root string) (source.Store, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.stores[root]; ok {
		return st, nil
	}
	st, remote, _, err := resolveStore(c.ctx, p, root, c.io, c.readAhead)
	if err != nil {
		return nil, err
	}
	if c.stores == nil {
		c.stores = map[string]source.Store{}
	}
	c.stores[root] = st
	if remote != nil {
		c.remote = append(c.remote, remote)
	}
	return st, nil
}
