package shardset

import (
	"io/fs"
	"path"
	"strings"
)

// StrayKind says what a stray name in a shard set is.
type StrayKind int

// Kinds of strays, as Strays classifies them.
const (
	// StrayShard is a shard file (ShardPath) the manifest does not list:
	// left by a killed gc, or by a convert killed between its manifest
	// rollback and the removal of its shards.
	StrayShard StrayKind = iota + 1
	// StrayTemp is an unfinished atomic write ("<name>.tmp-*" and the other
	// IsTempName forms) of a shard, the manifest or the plan copy, left by
	// a killed convert or gc.
	StrayTemp
	// StrayStaging is a file under TempDirName (a convert's staging).
	StrayStaging
	// StrayLock is the lock file (LockName) of a running or killed run.
	StrayLock
	// StrayLink is a symbolic link anywhere in the set; nothing under it is
	// listed, and nothing in this package follows it.
	StrayLink
	// StrayOther is any other file the manifest does not list.
	StrayOther
)

// String returns the kind's name ("shard", "temp", "staging", "lock",
// "link", "other").
func (k StrayKind) String() string {
	switch k {
	case StrayShard:
		return "shard"
	case StrayTemp:
		return "temp"
	case StrayStaging:
		return "staging"
	case StrayLock:
		return "lock"
	case StrayLink:
		return "link"
	case StrayOther:
		return "other"
	}
	return "unknown"
}

// Stray is a name in the set that the manifest does not list.
type Stray struct {
	Path string // slash-separated, relative to the set's directory
	Kind StrayKind
	// Epoch and Rank are the shard's for StrayShard and for a StrayTemp of
	// a shard (ParseShardPath); -1 otherwise.
	Epoch, Rank int
	Size        int64 // bytes (Lstat size: a link's own length)
}

// Strays walks the set's directory, never following a symbolic link, and
// returns in path order every file or link that is neither listed in the
// manifest last read nor manifest.json or plan.json itself. Directories are
// not strays; a directory that cannot be listed is reported through
// onError (nil: skipped) and the walk goes on.
func (s *Set) Strays(onError func(path string, err error)) []Stray {
	listed := map[string]bool{ManifestName: true, PlanName: true}
	if s.man != nil {
		for _, e := range s.man.Shards {
			listed[e.Path] = true
		}
	}
	var out []Stray
	fs.WalkDir(s.root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if onError != nil {
				onError(p, err)
			}
			return nil
		}
		if d.IsDir() || listed[p] {
			return nil
		}
		st := Stray{Path: p, Epoch: -1, Rank: -1}
		if fi, err := d.Info(); err == nil {
			st.Size = fi.Size()
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			st.Kind = StrayLink
		case strings.HasPrefix(p, TempDirName+"/"):
			st.Kind = StrayStaging
		case p == LockName:
			st.Kind = StrayLock
		default:
			e, r, ok := ParseShardPath(p)
			switch {
			case ok && p == ShardPath(e, r):
				st.Kind, st.Epoch, st.Rank = StrayShard, e, r
			case ok:
				st.Kind, st.Epoch, st.Rank = StrayTemp, e, r
			case IsTempName(path.Base(p)):
				st.Kind = StrayTemp
			default:
				st.Kind = StrayOther
			}
		}
		out = append(out, st)
		return nil
	})
	return out
}

// AtomicTemp reports whether st is the temporary file of an atomic write of
// a shard, the manifest or the plan copy ("<name>.tmp-*"), which only a run
// holding the directory's lock writes: with the lock held it is a leftover
// of a killed run.
func (st Stray) AtomicTemp() bool { return isAtomicTemp(st) }
