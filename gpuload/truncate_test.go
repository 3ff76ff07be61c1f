package gpuload

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/prepml/prep/gpuload/internal/testshards"
	"github.com/prepml/prep/shardfmt"
)

// A shard cut short while a Loader reads it gives an error at the first
// step it can no longer read, never a SIGBUS crash: not on the pread path
// (the failed read's error report looks up the batch table), and not when
// verifying mapped blocks.
func TestShardTruncatedWhileReading(t *testing.T) {
	c := testshards.Config{Epochs: 1, Ranks: 1, BatchSize: 4, Steps: 40}
	for _, opts := range []Options{
		{Prefetch: 1},
		{Prefetch: 1, VerifyChecksums: true},
		{Prefetch: 1, VerifyChecksums: true, MapBlocks: true},
	} {
		dir := writeSet(t, c)
		l := openLoader(t, dir, 0, 0, opts)
		b := mustNext(t, l)
		b.Release()
		truncateAndReadOn(t, l, dir, c.Steps, opts)
		l.Close()
	}
}

// truncateAndReadOn cuts the only shard of the set in dir to 4 KiB under l,
// which has delivered step 0 of steps, and reads on: the first step l can no
// longer read must fail with a located ErrSize or ErrCorrupt, before the
// last step.
func truncateAndReadOn(t *testing.T, l *Loader, dir string, steps int, opts Options) {
	t.Helper()
	if err := os.Truncate(filepath.Join(dir, filepath.FromSlash(shardfmt.ShardFileName(0, 0))), 4096); err != nil {
		t.Fatal(err)
	}
	read := 1
	for ; read < steps; read++ {
		b, err := l.Next()
		if err != nil {
			var le *Error
			if !errors.As(err, &le) || le.Step != read || !(errors.Is(err, shardfmt.ErrSize) || errors.Is(err, ErrCorrupt)) {
				t.Errorf("%+v: step %d: %v, want a located ErrSize or ErrCorrupt", opts, read, err)
			}
			break
		}
		b.Release()
	}
	if read == steps {
		t.Errorf("%+v: every step read after truncation", opts)
	}
}
