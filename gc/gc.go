// Package gc deletes the shards of epochs a node no longer needs, so that a
// node's disk holds a sliding window of epochs while training consumes them
// (convert --epochs 3-4, then gc --keep-from-epoch 3).
//
// # Crash safety
//
// Run removes the entries from the manifest first, with one atomic manifest
// rewrite (temporary file, fsync, rename, fsync of the directory), and only
// then deletes the shard files and the epoch directories
// left empty. A crash at any point therefore leaves a manifest that lists only
// shards that still exist and are complete: before the rewrite nothing has
// changed; after it, some unlisted shard files of old epochs may remain on
// disk. Those strays, and unfinished temporary shard files ("<shard>.tmp-*")
// of old epochs left by a killed convert, are found and deleted by the next
// Run. So is the temporary directory of a killed convert (TempDirName: its
// staging spill file can be as large as the decoded input), which no live
// convert can be using while gc holds the directory's lock, and so are the
// temporary files of the manifest and plan copy ("manifest.json.tmp-*") a
// killed gc or convert left.
//
// Run takes the directory's lock (shardset.Lock, the one convert takes) for
// the duration of the call, so no convert can write or commit a shard
// meanwhile.
//
// # Symbolic links
//
// Every name is resolved through the set's directory (package shardset) and
// no symbolic link inside the set is followed: a link at a shard's name is
// removed itself, and a set whose epoch directory to be cleaned is a link is
// refused (shardset.ErrUnsafe) before anything changes, so gc never deletes
// a file outside the set.
package gc

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/prepml/prep/internal/atomicfile"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/shardset"
)

// Sentinel errors.
var (
	// ErrNoManifest is returned when the directory holds no manifest, so
	// it is not a shard set (or one never committed); nothing is deleted.
	ErrNoManifest = errors.New("no manifest: not a shard set")
	// ErrInvalid is returned for invalid options, such as a negative epoch.
	ErrInvalid = errors.New("invalid gc options")
)

// TempDirName is convert's temporary directory under a shard set
// (shardset.TempDirName), removed by Run.
const TempDirName = shardset.TempDirName

// Error locates a failure of Run: the operation, the path it concerned and
// the cause.
type Error struct {
	Op   string // "reading manifest", "writing manifest", "removing shard", ...
	Path string
	Err  error
}

// Error returns "OP PATH: cause".
func (e *Error) Error() string { return e.Op + " " + e.Path + ": " + e.Err.Error() }

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Options tune Run.
type Options struct {
	// KeepFromEpoch is the first epoch kept: shards of epochs below it are
	// deleted. Must be >= 0.
	KeepFromEpoch int
	// DryRun reports what would be deleted and changes nothing. On a
	// read-only file system a dry run reports without the lock.
	DryRun bool
}

// Shard is one deleted (or, in a dry run, deletable) shard.
type Shard struct {
	Path   string `json:"path"` // relative to the shard set directory, '/'-separated
	Epoch  int    `json:"epoch"`
	Rank   int    `json:"rank"`
	Size   int64  `json:"size"`   // bytes on disk (0 when the file was already gone)
	Listed bool   `json:"listed"` // it was in the manifest; false for a stray or temporary file
}

// Result is what Run did (or would do, in a dry run).
type Result struct {
	Dir           string   `json:"dir"`
	KeepFromEpoch int      `json:"keep_from_epoch"`
	DryRun        bool     `json:"dry_run"`
	Removed       []Shard  `json:"removed"`      // in path order
	RemovedDirs   []string `json:"removed_dirs"` // empty epoch directories, relative
	TempBytes     int64    `json:"temp_bytes"`   // bytes removing TempDirName frees (left by killed converts)
	FreedBytes    int64    `json:"freed_bytes"`  // shards, strays and temporary files
	Kept          int      `json:"kept"`         // shards still listed in the manifest
	KeptEpochs    []int    `json:"kept_epochs"`  // distinct epochs still listed, ascending
	// TempFiles are the unfinished atomic writes of the manifest and plan
	// copy ("manifest.json.tmp-*", "plan.json.tmp-*") left by killed runs,
	// removed (their bytes are in FreedBytes).
	TempFiles []string `json:"temp_files,omitempty"`
	// StaleLock names the owner of a lock left by a killed run that Run took
	// over ("" when there was none); Stale is the same, structured.
	StaleLock string          `json:"stale_lock,omitempty"`
	Stale     *shardset.Owner `json:"-"`
}

// Run deletes, from the shard set in dir, every shard of an epoch below
// opts.KeepFromEpoch: first from the manifest, then from disk, holding the
// directory's lock (a *shardset.HeldError when another run holds it). See
// the package documentation for the crash-safety argument. Errors are
// *Error; ErrNoManifest, ErrInvalid and shardset.ErrUnsafe are wrapped where
// they apply.
func Run(dir string, opts Options) (*Result, error) {
	if opts.KeepFromEpoch < 0 {
		return nil, fmt.Errorf("%w: keep-from epoch %d is negative", ErrInvalid, opts.KeepFromEpoch)
	}
	res := &Result{Dir: dir, KeepFromEpoch: opts.KeepFromEpoch, DryRun: opts.DryRun, Removed: []Shard{}, RemovedDirs: []string{}, KeptEpochs: []int{}}
	manPath := filepath.Join(dir, shardset.ManifestName)
	set, err := shardset.OpenDir(dir)
	if err != nil {
		return nil, &Error{Op: "opening", Path: dir, Err: err}
	}
	defer set.Close()
	lock, err := shardset.Lock(dir)
	if opts.DryRun && errors.Is(err, syscall.EROFS) {
		// Nothing can change a set on a read-only file system, and a dry
		// run changes nothing: report without the lock.
		lock, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	if lock != nil {
		defer lock.Release()
		if lock.Stale != nil {
			res.StaleLock, res.Stale = lock.Stale.String(), lock.Stale
		}
	}
	m, err := set.ReadManifest()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &Error{Op: "reading manifest", Path: manPath, Err: ErrNoManifest}
	}
	if err != nil {
		return nil, &Error{Op: "reading manifest", Path: manPath, Err: err}
	}

	var kept []shardfmt.ShardEntry
	for _, s := range m.Shards {
		if s.Epoch >= opts.KeepFromEpoch {
			kept = append(kept, s)
			continue
		}
		res.Removed = append(res.Removed, Shard{Path: s.Path, Epoch: s.Epoch, Rank: s.Rank, Listed: true})
	}
	var walkErr error
	for _, st := range set.Strays(func(p string, err error) {
		if walkErr == nil {
			walkErr = &Error{Op: "listing", Path: filepath.Join(dir, filepath.FromSlash(p)), Err: err}
		}
	}) {
		switch {
		case st.Kind == shardset.StrayShard || st.Kind == shardset.StrayTemp && st.Epoch >= 0:
			if st.Epoch < opts.KeepFromEpoch {
				res.Removed = append(res.Removed, Shard{Path: st.Path, Epoch: st.Epoch, Rank: st.Rank})
			}
		case st.AtomicTemp():
			res.TempFiles = append(res.TempFiles, st.Path)
			res.FreedBytes += st.Size
		}
	}
	if walkErr != nil {
		return nil, walkErr
	}
	slices.SortFunc(res.Removed, func(a, b Shard) int { return strings.Compare(a.Path, b.Path) })
	// Nothing is followed: a removal through a linked epoch directory is
	// refused before the manifest changes.
	for i := range res.Removed {
		fi, err := set.CheckName(res.Removed[i].Path)
		if errors.Is(err, shardset.ErrUnsafe) && !isLinkItself(set, res.Removed[i].Path) {
			return nil, &Error{Op: "checking", Path: filepath.Join(dir, filepath.FromSlash(res.Removed[i].Path)), Err: err}
		}
		if err == nil {
			res.Removed[i].Size = fi.Size()
			res.FreedBytes += fi.Size()
		}
	}
	res.TempBytes = treeBytes(set)
	res.FreedBytes += res.TempBytes
	res.Kept = len(kept)
	for _, s := range kept {
		if !slices.Contains(res.KeptEpochs, s.Epoch) {
			res.KeptEpochs = append(res.KeptEpochs, s.Epoch)
		}
	}
	slices.Sort(res.KeptEpochs)
	if opts.DryRun {
		res.RemovedDirs = emptyDirsAfter(set, res.Removed)
		for _, d := range emptyOldEpochDirs(set, opts.KeepFromEpoch) {
			if !slices.Contains(res.RemovedDirs, d) {
				res.RemovedDirs = append(res.RemovedDirs, d)
			}
		}
		return res, nil
	}

	// 1. The manifest stops listing the old shards.
	if len(kept) != len(m.Shards) {
		m.Shards = kept
		if m.Shards == nil {
			m.Shards = []shardfmt.ShardEntry{}
		}
		if err := set.WriteManifest(m); err != nil {
			return nil, &Error{Op: "writing manifest", Path: manPath, Err: err}
		}
	}
	// 2. The files go (a link at a shard's name is removed itself).
	for _, s := range res.Removed {
		if err := set.Remove(s.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return res, &Error{Op: "removing shard", Path: filepath.Join(dir, filepath.FromSlash(s.Path)), Err: err}
		}
	}
	for _, p := range res.TempFiles {
		if err := set.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return res, &Error{Op: "removing temporary file", Path: filepath.Join(dir, filepath.FromSlash(p)), Err: err}
		}
	}
	if err := set.RemoveAll(TempDirName); err != nil {
		return res, &Error{Op: "removing temporary files", Path: filepath.Join(dir, TempDirName), Err: err}
	}
	// 3. Epoch directories left empty, deepest first; then those of old
	// epochs a killed gc emptied and did not remove.
	for _, d := range parentDirs(res.Removed) {
		if fi, err := set.CheckName(d); err == nil && fi.IsDir() && set.Remove(d) == nil {
			res.RemovedDirs = append(res.RemovedDirs, d)
		}
	}
	for _, d := range emptyOldEpochDirs(set, opts.KeepFromEpoch) {
		if err := set.Remove(d); err == nil {
			res.RemovedDirs = append(res.RemovedDirs, d)
		}
	}
	_ = atomicfile.SyncDirIn(set.Root(), ".")
	return res, nil
}

// isLinkItself reports whether name's directory is reached without a link,
// so that name is a link itself (removed, not followed).
func isLinkItself(set *shardset.Set, name string) bool {
	d := pathDir(name)
	if d == "" {
		return true
	}
	fi, err := set.CheckName(d)
	return err == nil && fi.IsDir()
}

// treeBytes returns the bytes removing the regular files under the set's
// TempDirName frees (diskBytes: a punched-out spill file counts its remaining
// blocks; a plain file there counts itself), 0 when it does not exist or is a
// link (removed itself).
func treeBytes(set *shardset.Set) int64 {
	fi, err := set.CheckName(TempDirName)
	switch {
	case err != nil:
		return 0
	case fi.Mode().IsRegular():
		return diskBytes(fi)
	case !fi.IsDir():
		return 0
	}
	var n int64
	fs.WalkDir(set.Root().FS(), TempDirName, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += diskBytes(fi)
			}
		}
		return nil
	})
	return n
}

// ParseShardPath reports whether rel ('/'-separated, relative to the shard set
// directory) is the canonical path of a shard or a temporary file of one,
// and if so which (epoch, rank): shardset.ParseShardPath.
func ParseShardPath(rel string) (epoch, rank int, ok bool) { return shardset.ParseShardPath(rel) }

// parentDirs returns the distinct directories (relative, not ".") holding
// the removed files and their ancestors, deepest first.
func parentDirs(removed []Shard) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range removed {
		for d := pathDir(s.Path); d != ""; d = pathDir(d) {
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		if c := strings.Count(b, "/") - strings.Count(a, "/"); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return out
}

func pathDir(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// emptyOldEpochDirs returns the empty epoch directories of the set
// (shardset.EpochDir names; real directories, not symbolic links) of epochs
// below keep.
func emptyOldEpochDirs(set *shardset.Set, keep int) []string {
	ents, err := fs.ReadDir(set.Root().FS(), ".")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if ep, ok := shardset.ParseEpochDir(e.Name()); !ok || !e.IsDir() || ep >= keep {
			continue
		}
		if sub, err := fs.ReadDir(set.Root().FS(), e.Name()); err == nil && len(sub) == 0 {
			out = append(out, e.Name())
		}
	}
	return out
}

// emptyDirsAfter predicts which parent directories would be empty once the
// removed files are gone (for a dry run).
func emptyDirsAfter(set *shardset.Set, removed []Shard) []string {
	gone := map[string]bool{}
	for _, s := range removed {
		gone[s.Path] = true
	}
	out := []string{}
	for _, d := range parentDirs(removed) {
		if fi, err := set.CheckName(d); err != nil || !fi.IsDir() {
			continue
		}
		ents, err := fs.ReadDir(set.Root().FS(), d)
		if err != nil {
			continue
		}
		empty := true
		for _, e := range ents {
			if !gone[d+"/"+e.Name()] {
				empty = false
				break
			}
		}
		if empty {
			gone[d] = true
			out = append(out, d)
		}
	}
	return out
}
