// Package dirlock is an advisory, crash-safe lock on an output directory: a
// lock file (conventionally DIR/.prep.lock) held with flock(2) and holding
// the owner's pid and host name, so that two runs never write one directory
// at the same time and a second run can name the first.
//
// The kernel drops a flock when its holder dies, so a lock file left behind
// by a killed run is "stale": it exists but nobody holds it. Acquire takes it
// over and reports the previous owner in Lock.Stale.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrHeld is wrapped by *HeldError.
var ErrHeld = errors.New("output directory is locked by another run")

// Owner identifies the process that holds (or held) a lock.
type Owner struct {
	PID  int
	Host string
}

func (o Owner) String() string {
	if o.PID == 0 && o.Host == "" {
		return "unknown owner"
	}
	return fmt.Sprintf("pid %d on host %s", o.PID, o.Host)
}

// HeldError is returned by Acquire when another process holds the lock. Its
// ExitCode is 3, the prep exit code for "another run holds the output
// directory's lock".
type HeldError struct {
	Path   string // lock file
	Holder Owner  // as written in the lock file by the holder
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s: %v: held by %s", e.Path, ErrHeld, e.Holder)
}

// Unwrap returns ErrHeld.
func (e *HeldError) Unwrap() error { return ErrHeld }

// ExitCode returns 3.
func (e *HeldError) ExitCode() int { return 3 }

// Lock is a held directory lock.
type Lock struct {
	Path string
	// Stale is the owner recorded in a lock file that existed but was not
	// held (its run died); nil when the file was new or empty.
	Stale *Owner
	f     *os.File
}

// ErrNotRegular is wrapped by the errors of Acquire and ReadOwner when the
// lock path is a symbolic link or anything else that is not a regular file:
// it is refused, never followed, so a planted link cannot make a run write
// (or read) its target.
var ErrNotRegular = errors.New("lock path is not a regular file")

// openNoFollow opens path with flag and O_NOFOLLOW, and checks that it is a
// regular file. A symbolic link (ELOOP) and any other type wrap
// ErrNotRegular. O_NONBLOCK keeps a planted FIFO from blocking the open.
func openNoFollow(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0o644)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s: %w: it is a symbolic link (remove it)", path, ErrNotRegular)
	}
	if errors.Is(err, syscall.EISDIR) {
		return nil, fmt.Errorf("%s: %w: it is a directory (remove it)", path, ErrNotRegular)
	}
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: %w (%s; remove it)", path, ErrNotRegular, st.Mode().Type())
	}
	return f, nil
}

// Acquire takes the lock file at path without blocking. It returns a
// *HeldError when another process holds it, and an error wrapping
// ErrNotRegular when path is a symbolic link (never followed) or not a
// regular file. On success it writes "pid host\n" into the file.
func Acquire(path string) (*Lock, error) {
	for attempt := 0; attempt < 10; attempt++ {
		f, err := openNoFollow(path, os.O_RDWR|os.O_CREATE)
		if err != nil {
			return nil, fmt.Errorf("opening lock file: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			owner := readHolder(f)
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, &HeldError{Path: path, Holder: owner}
			}
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		// The holder we raced with may have removed the file after we opened
		// it: then we hold a lock on an unlinked inode. Check and retry.
		var fst, pst syscall.Stat_t
		if err := syscall.Fstat(int(f.Fd()), &fst); err != nil {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if err := syscall.Lstat(path, &pst); err != nil || fst.Ino != pst.Ino || fst.Dev != pst.Dev {
			f.Close()
			continue
		}
		l := &Lock{Path: path, f: f}
		if o := readOwner(f); o.PID != 0 || o.Host != "" {
			l.Stale = &o
		}
		// One write replaces the owner, then the file is cut to its length:
		// a concurrent reader sees the old owner or the new one (followed
		// briefly by the old tail, which readOwner ignores), never nothing.
		host, _ := os.Hostname()
		me := fmt.Sprintf("%d %s\n", os.Getpid(), host)
		if _, err := f.WriteAt([]byte(me), 0); err != nil {
			l.Release()
			return nil, fmt.Errorf("writing lock file: %w", err)
		}
		if err := f.Truncate(int64(len(me))); err != nil {
			l.Release()
			return nil, fmt.Errorf("writing lock file: %w", err)
		}
		return l, nil
	}
	return nil, fmt.Errorf("locking %s: lock file keeps being replaced", path)
}

// holderWait bounds how long readHolder waits for a new holder to record
// itself: the holder takes the flock first and writes its pid and host just
// after.
const holderWait = 200 * time.Millisecond

// readHolder reads the owner of a lock that another process holds. Right
// after taking the flock the holder has not yet written itself: the file is
// empty (new) or names the dead owner of a stale lock. readHolder re-reads
// until it names a process that is alive (or on another host), for at most
// holderWait, and then returns what the file says.
func readHolder(f *os.File) Owner {
	host, _ := os.Hostname()
	deadline := time.Now().Add(holderWait)
	for {
		o := readOwner(f)
		settled := o.PID > 0 && (o.Host != host || syscall.Kill(o.PID, 0) != syscall.ESRCH)
		if settled || time.Now().After(deadline) {
			return o
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// ReadOwner returns the owner a lock file at path names (its first two
// fields: pid and host), without taking the lock. A file that names no owner
// gives the zero Owner; errors are those of opening the file (a symbolic
// link is not followed: ErrNotRegular).
func ReadOwner(path string) (Owner, error) {
	f, err := openNoFollow(path, os.O_RDONLY)
	if err != nil {
		return Owner{}, err
	}
	defer f.Close()
	return readOwner(f), nil
}

func readOwner(f *os.File) Owner {
	b := make([]byte, 512)
	n, _ := f.ReadAt(b, 0)
	fields := strings.Fields(string(b[:n]))
	var o Owner
	if len(fields) > 0 {
		o.PID, _ = strconv.Atoi(fields[0])
	}
	if len(fields) > 1 {
		o.Host = fields[1]
	}
	return o
}

// Release removes the lock file and drops the lock. It is safe to call more
// than once.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := os.Remove(l.Path)
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}
