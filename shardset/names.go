// Package shardset manages a shard-set directory: the names in it
// (shardfmt/FORMAT.md, "Shard set and manifest"), the lock that keeps two runs apart, the
// manifest and the plan copy, the lookup of the shard of one (epoch, rank)
// with every check a reader needs, the write transaction convert commits
// shards through, and the strays gc and verify look for.
//
// Nothing in this package follows a symbolic link inside a shard set: the
// directory is opened once as an os.Root (so no name can resolve outside
// it), and every name the package acts on is checked, component by
// component, not to be a symbolic link (ErrUnsafe) before it is opened,
// replaced or removed. The directory itself may be reached through a link.
package shardset

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/prepml/prep/shardfmt"
)

// Names in a shard-set directory. Every other name is ShardPath(epoch,
// rank), its epoch directory, or a temporary file of one of them.
const (
	// LockName is the lock file convert and gc hold while they write
	// (package dirlock): "pid host\n". Removed when the lock is released.
	LockName = ".prep.lock"
	// TempDirName is the directory holding a convert run's staging
	// (TempDirName/<pid>/spill.bin); removed at the end of every run, at the
	// start of the next and by gc.
	TempDirName = ".prep-tmp"
	// PlanName is the byte-exact copy of the plan file convert wrote the
	// set from; verify checks against it by default.
	PlanName = "plan.json"
	// ManifestName is the manifest (FORMAT.md, "manifest.json").
	ManifestName = shardfmt.ManifestName
	// TempInfix marks a file being written atomically:
	// "<final name>.tmp-<random>", renamed over the final name when done.
	TempInfix = ".tmp-"
)

// ShardPath returns the slash-separated path of the (epoch, rank) shard
// relative to the set's directory: "epoch-00003/rank-00012.shard" (numbers
// zero-padded to 5 digits; wider ones print in full).
func ShardPath(epoch, rank int) string { return shardfmt.ShardFileName(epoch, rank) }

// EpochDir returns the name of epoch's directory: "epoch-00003".
func EpochDir(epoch int) string { return fmt.Sprintf("epoch-%05d", epoch) }

// ParseEpochDir reports whether name is EpochDir(e) for some e >= 0, and
// which.
func ParseEpochDir(name string) (epoch int, ok bool) {
	num, found := strings.CutPrefix(name, "epoch-")
	if !found {
		return 0, false
	}
	e, err := strconv.Atoi(num)
	if err != nil || e < 0 || EpochDir(e) != name {
		return 0, false
	}
	return e, true
}

// ParseShardPath reports whether rel (slash-separated, relative to the
// set's directory) is ShardPath(epoch, rank) or a temporary file of one
// ("<name>.tmp-*", ".<name>.tmp*", "<name>.partial"), and if so which
// (epoch, rank). The canonical name is rebuilt from the numbers found and
// compared, so nothing but the canonical spelling matches.
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
	if len(nums) < 2 || ShardPath(nums[0], nums[1]) != cand {
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

// IsTempName reports whether a file name looks like an unfinished write or a
// lock: "*.tmp", "*.tmp-*", "*.tmp.*", ".*tmp*", "*.partial", "*.lock".
func IsTempName(name string) bool {
	lower := strings.ToLower(name)
	switch {
	case strings.HasSuffix(lower, ".tmp"), strings.Contains(lower, ".tmp-"), strings.Contains(lower, ".tmp."),
		strings.HasPrefix(lower, ".") && strings.Contains(lower, "tmp"),
		strings.HasSuffix(lower, ".partial"), strings.HasSuffix(lower, ".lock"), lower == "lock":
		return true
	}
	return false
}
