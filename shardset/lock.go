package shardset

import (
	"path/filepath"

	"github.com/prepml/prep/internal/dirlock"
)

// HeldError is returned by Lock (and Begin) when another process holds the
// directory's lock; its ExitCode is 3.
type HeldError = dirlock.HeldError

// DirLock is a held lock on a shard-set directory; Release drops it and
// removes the lock file.
type DirLock = dirlock.Lock

// Lock takes the lock of the shard-set directory dir (dir/LockName) without
// waiting, as convert and gc do before writing. It returns a *HeldError
// when another run holds it, and an error wrapping dirlock.ErrNotRegular
// when the lock name is a symbolic link (never followed: its target is
// neither read nor written) or not a regular file. The directory must
// exist.
func Lock(dir string) (*DirLock, error) {
	return dirlock.Acquire(filepath.Join(dir, LockName))
}

// Owner is the process that holds (or held) a directory's lock: its pid and
// host name, as the lock file records them.
type Owner = dirlock.Owner
