package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// lockFileName is the output directory's advisory lock, shared by every
// command that writes a shard set (convert, gc).
const lockFileName = ".prep.lock"

// lockedError reports that another run holds the output lock (exit 3).
type lockedError struct {
	dir    string
	holder string // the holder's record from the lock file, when readable
}

func (e *lockedError) Error() string {
	if e.holder == "" {
		return fmt.Sprintf("output directory %s is locked by another prep run", e.dir)
	}
	return fmt.Sprintf("output directory %s is locked by another prep run (%s)", e.dir, e.holder)
}

// ExitCode is 3: another run holds the lock.
func (e *lockedError) ExitCode() int { return exitLocked }

// lockOutputDir takes the exclusive, non-blocking flock on dir/.prep.lock and
// records this process's pid and host in it. The lock dies with the process,
// so a killed run's lock is free for the next one. It returns the release
// function, or a *lockedError (exit 3) naming the holder.
func lockOutputDir(dir string) (func(), error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &lockedError{dir: dir, holder: strings.TrimSpace(string(holder))}
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	host, _ := os.Hostname()
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(fmt.Sprintf("pid %d host %s\n", os.Getpid(), host)), 0)
	return func() { f.Close() }, nil
}
