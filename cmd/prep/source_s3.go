package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/prepml/prep/source"
)

// s3Flags are the object-store settings of the commands that read a
// source: plan, convert and verify.
type s3Flags struct {
	ioConcurrency int
}

func addIOFlags(cmd *cobra.Command, o *s3Flags) {
	cmd.Flags().IntVar(&o.ioConcurrency, "io-concurrency", source.DefaultIOConcurrency,
		"object-store requests in flight at once, for s3:// sources (1-1024)")
}

func (o *s3Flags) check() error {
	if o.ioConcurrency < 1 || o.ioConcurrency > 1024 {
		return usagef("--io-concurrency %d: want 1 to 1024", o.ioConcurrency)
	}
	return nil
}

// readAheadShare is the part of --memory-limit given to object-store
// read-ahead (fetched column chunks not yet decoded): a quarter, at most
// source.DefaultReadAheadBytes. The decoder gets the rest.
func readAheadShare(memoryLimit int64) int64 {
	return min(memoryLimit/4, source.DefaultReadAheadBytes)
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
	c, err := source.NewS3Client(ctx, source.S3Options{Concurrency: o.ioConcurrency, ReadAheadBytes: readAhead})
	if err != nil {
		return nil, err
	}
	st, err := c.Store(root)
	if err != nil {
		return nil, usagef("%v", err)
	}
	return &s3Source{client: c, store: st}, nil
}

// stats returns the traffic so far (nil for a local source).
func (s *s3Source) stats() *source.S3Stats {
	if s == nil {
		return nil
	}
	st := s.client.Stats()
	return &st
}

// watchFetch shows the bytes fetched on the bar that label returns until
// the returned stop is called: the object-store side of a run's progress.
func (s *s3Source) watchFetch(set func(fetched string)) (stop func()) {
	if s == nil || set == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				st := s.client.Stats()
				set(fmt.Sprintf("fetched %s in %d requests", formatBytes(st.BytesFetched), st.Requests))
			}
		}
	}()
	return func() { close(done); wg.Wait() }
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
