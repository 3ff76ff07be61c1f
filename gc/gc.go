// Package gc deletes the shards of epochs a node no longer needs, so that a
// node's disk holds a sliding window of epochs while training consumes them
// (convert --epochs 3-4, then gc --keep-from-epoch 3).
//
// # Crash safety
//
// Run removes the entries from the manifest first, with one atomic manifest
// rewrite (shardfmt.WriteManifest: temporary file, fsync, rename, fsync of the
// directory), and only then deletes the shard files and the epoch directories
// left empty. A crash at any point therefore leaves a manifest that lists only
// shards that still exist and are complete: before the rewrite nothing has
// changed; after it, some unlisted shard files of old epochs may remain on
// disk. Those strays, and unfinished temporary shard files ("<shard>.tmp-*")
// of old epochs left by a killed convert, are found and deleted by the next
// Run. So is the temporary directory of a killed convert (TempDirName: its
// staging spill file can be as large as the decoded input), which no live
// convert can be using while the caller holds the directory's lock.
//
// Run does not lock the directory: the caller holds the output directory's
// lock (the same one convert takes) for the duration of the call, so no
// convert can write or commit a shard meanwhile.
package gc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/prepml/prep/shardfmt"
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
// (convert.TempDirName), removed by Run.
const TempDirName = ".prep-tmp"

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
	// DryRun reports what would be deleted and changes nothing.
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
}

// Run deletes, from the shard set in dir, every shard of an epoch below
// opts.KeepFromEpoch: first from the manifest, then from disk. See the package
// documentation for the crash-safety argument. The caller must hold the
// output directory's lock.
func Run(dir string, opts Options) (*Result, error) {
	if opts.KeepFromEpoch < 0 {
		return nil, fmt.Errorf("%w: keep-from epoch %d is negative", ErrInvalid, opts.KeepFromEpoch)
	}
	res := &Result{Dir: dir, KeepFromEpoch: opts.KeepFromEpoch, DryRun: opts.DryRun, Removed: []Shard{}, RemovedDirs: []string{}, KeptEpochs: []int{}}
	manPath := filepath.Join(dir, shardfmt.ManifestName)
	m, err := shardfmt.ReadManifest(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &Error{Op: "reading manifest", Path: manPath, Err: ErrNoManifest}
	}
	if err != nil {
		return nil, &Error{Op: "reading manifest", Path: manPath, Err: err}
	}

	var kept []shardfmt.ShardEntry
	listed := map[string]bool{}
	for _, s := range m.Shards {
		listed[s.Path] = true
		if s.Epoch >= opts.KeepFromEpoch {
			kept = append(kept, s)
			continue
		}
		res.Removed = append(res.Removed, Shard{Path: s.Path, Epoch: s.Epoch, Rank: s.Rank, Listed: true})
	}
	strays, err := findStrays(dir, listed, opts.KeepFromEpoch)
	if err != nil {
		return nil, err
	}
	res.Removed = append(res.Removed, strays...)
	slices.SortFunc(res.Removed, func(a, b Shard) int { return strings.Compare(a.Path, b.Path) })
	for i := range res.Removed {
		if fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(res.Removed[i].Path))); err == nil {
			res.Removed[i].Size = fi.Size()
			res.FreedBytes += fi.Size()
		}
	}
	tmp := filepath.Join(dir, TempDirName)
	res.TempBytes = treeBytes(tmp)
	res.FreedBytes += res.TempBytes
	res.Kept = len(kept)
	for _, s := range kept {
		if !slices.Contains(res.KeptEpochs, s.Epoch) {
			res.KeptEpochs = append(res.KeptEpochs, s.Epoch)
		}
	}
	slices.Sort(res.KeptEpochs)
	if opts.DryRun {
		res.RemovedDirs = emptyDirsAfter(dir, res.Removed)
		for _, d := range emptyOldEpochDirs(dir, opts.KeepFromEpoch) {
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
		if err := shardfmt.WriteManifest(dir, m); err != nil {
			return nil, &Error{Op: "writing manifest", Path: manPath, Err: err}
		}
	}
	// 2. The files go.
	for _, s := range res.Removed {
		p := filepath.Join(dir, filepath.FromSlash(s.Path))
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return res, &Error{Op: "removing shard", Path: p, Err: err}
		}
	}
	if err := os.RemoveAll(tmp); err != nil {
		return res, &Error{Op: "removing temporary files", Path: tmp, Err: err}
	}
	// 3. Epoch directories left empty, deepest first; then those of old
	// epochs a killed gc emptied and did not remove.
	for _, d := range parentDirs(res.Removed) {
		p := filepath.Join(dir, filepath.FromSlash(d))
		if err := os.Remove(p); err == nil {
			res.RemovedDirs = append(res.RemovedDirs, d)
		}
	}
	for _, d := range emptyOldEpochDirs(dir, opts.KeepFromEpoch) {
		if err := os.Remove(filepath.Join(dir, d)); err == nil {
			res.RemovedDirs = append(res.RemovedDirs, d)
		}
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return res, nil
}

// treeBytes returns the bytes removing the regular files under dir frees
// (diskBytes: a punched-out spill file counts its remaining blocks), 0 when
// dir does not exist.
func treeBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += diskBytes(fi)
			}
		}
		return nil
	})
	return n
}

// findStrays walks dir for files the manifest does not list that are shard
// files (or temporary shard files) of an epoch below keep.
func findStrays(dir string, listed map[string]bool, keep int) ([]Shard, error) {
	var out []Shard
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return &Error{Op: "listing", Path: path, Err: err}
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if listed[rel] {
			return nil
		}
		e, r, ok := ParseShardPath(rel)
		if ok && e < keep {
			out = append(out, Shard{Path: rel, Epoch: e, Rank: r})
		}
		return nil
	})
	return out, err
}

// ParseShardPath reports whether rel ('/'-separated, relative to the shard set
// directory) is the canonical path of a shard, shardfmt.ShardFileName(epoch,
// rank), or a temporary file of one ("<name>.tmp-*", ".<name>.tmp*",
// "<name>.partial"), and if so which (epoch, rank). It is independent of the
// naming scheme: the first two decimal numbers in rel are taken as epoch
// and rank and the canonical name is rebuilt from them and compared.
func ParseShardPath(rel string) (epoch, rank int, ok bool) {
	dirPart, base := "", rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		dirPart, base = rel[:i+1], rel[i+1:]
	}
	if i := strings.Index(base, ".tmp"); i >= 0 {
		base = strings.TrimPrefix(base[:i], ".")
	}
	base = strings.TrimSuffix(base, ".partial")
	cand := dirPart + base
	nums := leadingInts(cand, 2)
	if len(nums) < 2 {
		return 0, 0, false
	}
	if filepath.ToSlash(shardfmt.ShardFileName(nums[0], nums[1])) != cand {
		return 0, 0, false
	}
	return nums[0], nums[1], true
}

// leadingInts returns up to n decimal numbers found in s, in order.
func leadingInts(s string, n int) []int {
	var out []int
	for i := 0; i < len(s) && len(out) < n; {
		if s[i] < '0' || s[i] > '9' {
			i++
			continue
		}
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		v, err := strconv.Atoi(s[i:j])
		if err != nil {
			return out
		}
		out = append(out, v)
		i = j
	}
	return out
}

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

// emptyOldEpochDirs returns the empty epoch directories of dir (named as
// shardfmt.ShardFileName names them; real directories, not symbolic links)
// of epochs below keep.
func emptyOldEpochDirs(dir string, keep int) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		nums := leadingInts(e.Name(), 1)
		if !e.IsDir() || len(nums) != 1 || nums[0] >= keep || e.Name() != pathDir(shardfmt.ShardFileName(nums[0], 0)) {
			continue
		}
		if sub, err := os.ReadDir(filepath.Join(dir, e.Name())); err == nil && len(sub) == 0 {
			out = append(out, e.Name())
		}
	}
	return out
}

// emptyDirsAfter predicts which parent directories would be empty once the
// removed files are gone (for a dry run).
func emptyDirsAfter(dir string, removed []Shard) []string {
	gone := map[string]bool{}
	for _, s := range removed {
		gone[s.Path] = true
	}
	out := []string{}
	for _, d := range parentDirs(removed) {
		ents, err := os.ReadDir(filepath.Join(dir, filepath.FromSlash(d)))
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
