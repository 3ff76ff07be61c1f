package verify

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/prepml/prep/shardfmt"
)

// Open shard files and the deep check by parts.
//
// A shard compared by parts (deeppart.go) waits, its integrity checked,
// until the last part of the set has been compared. Keeping each one's
// file open until then would hold one descriptor per shard of the set (a
// set of 100 epochs x 64 ranks holds 6,400), past RLIMIT_NOFILE where the
// hard limit is a few thousand. So at most maxOpenShards shard files are
// open at once: Jobs for the shards being checked or compared, and
// maxOpenShards - Jobs shards (the first to finish their integrity
// check) held open to the end. Every other shard compared by parts is
// closed after its integrity check and reopened, only when a comparison
// needs to read it, for each of the set's passes over its shards (each
// part, and the last pass over empty batches), closed again at the
// pass's end. Its Reader stays: it reads the file through a shardFile,
// its tables validated once.
//
// A reopened file must be the one checked: the same file (os.SameFile:
// device and inode on unix) of the same size. Otherwise the shard is not
// compared any further: one finding for the shard, io_error when the
// name now holds another file (replaced, say by a rerun of convert),
// size_mismatch when the file checked has another size (truncated or
// grown), io_error when it can no longer be opened; the findings of the
// passes before stand, none of its batches is counted as compared (the
// rest of their slots never are). A shard held open never sees
// such a change, as before: it reads the file it checked. Its findings
// are otherwise those of a shard held open, in the same order.

// maxOpenShardsCap bounds maxOpenShards.
const maxOpenShardsCap = 256

// openShardsCap, when positive, replaces maxOpenShards' bound (tests).
var openShardsCap int

// shardFileHook, when set, is called after each shard file verify opens
// for a shard's check (open true) and after each close (open false),
// with the shard's manifest path (tests).
var shardFileHook func(name string, open bool)

// maxOpenShards returns how many shard files verify keeps open at once:
// min(256, a quarter of the RLIMIT_NOFILE soft limit) where the process
// has one (unix), 256 elsewhere; never fewer than jobs (the shards
// checked at once each hold their file).
func maxOpenShards(jobs int) int {
	n := openShardsCap
	if n <= 0 {
		n = maxOpenShardsCap
		if soft, ok := fileLimit(); ok {
			n = int(min(uint64(n), soft/4))
		}
	}
	return max(n, jobs)
}

// errShardClosed is returned by a shardFile read while it is closed: a
// read of a shard released between passes (a bug, never a finding of a
// correct run).
var errShardClosed = errors.New("shard file closed between passes of the deep check")

// shardFile is the file of one shard as its Reader reads it (an
// io.ReaderAt with pread). A shard compared by parts beyond the open
// files verify keeps is released after its integrity check and acquired
// again for each pass that reads it. A shardFile is used by one goroutine
// at a time.
type shardFile struct {
	c    *checker
	name string      // the manifest path
	info os.FileInfo // the file checked
	f    *os.File    // nil while released
	keep bool        // held open to the end: release does nothing
	dead bool        // a reopen failed: never opened again
}

// ReadAt implements io.ReaderAt over the open file.
func (s *shardFile) ReadAt(p []byte, off int64) (int, error) {
	if s.f == nil {
		return 0, errShardClosed
	}
	return s.f.ReadAt(p, off)
}

var _ io.ReaderAt = (*shardFile)(nil)

// openShardFile opens the shard of manifest entry e as openShard does
// (through the set, never mapped), reading through a shardFile that the
// deep check by parts may release and acquire again.
func (c *checker) openShardFile(e shardfmt.ShardEntry) (*shardfmt.Reader, *shardFile, error) {
	f, err := c.set.OpenFile(e.Path)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("opening shard: %w", err)
	}
	s := &shardFile{c: c, name: e.Path, info: st, f: f}
	s.opened()
	r, err := shardfmt.OpenReaderAt(s, st.Size(), c.set.Path(e.Path))
	if err != nil {
		s.close()
		return nil, nil, err
	}
	return r, s, nil
}

// openMappedShard opens the shard of manifest entry e as openShard does,
// mapped read-only (ReadMmap; read with pread where the platform cannot
// map). Its shardFile holds no file: the Reader owns it.
func (c *checker) openMappedShard(e shardfmt.ShardEntry) (*shardfmt.Reader, *shardFile, error) {
	f, err := c.set.OpenFile(e.Path)
	if err != nil {
		return nil, nil, err
	}
	r, err := shardfmt.OpenFile(f, c.set.Path(e.Path), true)
	if err != nil {
		return nil, nil, err
	}
	if mappedShardHook != nil {
		mappedShardHook(e.Path)
	}
	return r, &shardFile{c: c, name: e.Path}, nil
}

// mappedShardHook, when set, is called with the manifest path of each shard
// openMappedShard has opened, before anything of it is checked (tests).
var mappedShardHook func(name string)

func (s *shardFile) opened() {
	if shardFileHook != nil {
		shardFileHook(s.name, true)
	}
}

// close closes the file, if open.
func (s *shardFile) close() {
	if s.f == nil {
		return
	}
	_ = s.f.Close()
	s.f = nil
	if shardFileHook != nil {
		shardFileHook(s.name, false)
	}
}

// release closes the file of a shard not held open.
func (s *shardFile) release() {
	if !s.keep {
		s.close()
	}
}

// acquire opens the file again if it is released, checking it is the
// one checked. It returns the finding why it cannot be read: the shard
// is then dead (acquire returns ok false without a finding from then on).
func (s *shardFile) acquire() (f Finding, ok bool) {
	if s.f != nil {
		return Finding{}, true
	}
	if s.dead {
		return Finding{}, false
	}
	s.dead = true
	const stop = ": its values were no longer compared"
	file, err := s.c.set.OpenFile(s.name)
	if err != nil {
		return Finding{Kind: KindIOError, Message: "reopening shard during verification: " + err.Error() + stop}, false
	}
	st, err := file.Stat()
	switch {
	case err != nil:
		_ = file.Close()
		return Finding{Kind: KindIOError, Message: "reopening shard during verification: " + err.Error() + stop}, false
	case !os.SameFile(s.info, st):
		_ = file.Close()
		return Finding{Kind: KindIOError, Message: "shard was replaced during verification (its name holds another file than the one checked)" + stop}, false
	case st.Size() != s.info.Size():
		_ = file.Close()
		return Finding{Kind: KindSizeMismatch, What: "size", Expected: fmt.Sprint(s.info.Size()), Actual: fmt.Sprint(st.Size()),
			Message: "shard changed size during verification" + stop}, false
	}
	s.dead = false
	s.f = file
	s.opened()
	return Finding{}, true
}
