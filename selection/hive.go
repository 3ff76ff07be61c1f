package selection

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/source"
)

// ErrHiveSource is wrapped by each error of a hive source (HiveDir,
// Hive.Discover) that its input causes rather than the reading of it: a
// declaration on a path that is not one directory, a malformed URL, an
// object-store client that cannot be configured, a layout error (a file
// outside the key=value levels, other keys than the first file's), a
// declared type a value does not parse as, a filter error on the
// partition columns, a filter pruning every partition, and a partition
// key conflict (which wraps ErrPartitionConflict too). prep reports these
// as usage errors. The message is the cause's.
var ErrHiveSource = errors.New("bad hive source")

// hiveError marks err as ErrHiveSource without changing its message.
type hiveError struct{ err error }

func (e hiveError) Error() string        { return e.err.Error() }
func (e hiveError) Unwrap() error        { return e.err }
func (e hiveError) Is(target error) bool { return target == ErrHiveSource }

// hivef is an ErrHiveSource error formatted as fmt.Errorf formats.
func hivef(format string, a ...any) error { return hiveError{fmt.Errorf(format, a...)} }

// Hive is a source of a sources file given as one directory, local or an
// s3:// prefix, whose key=value directory levels are hive partitions
// (source.HiveLayout, SELECTION.md). Discover fills it in; a Hive is used
// for one discovery.
type Hive struct {
	// dir is the partitioned directory: an absolute local path, or an
	// s3:// URL ending in '/'.
	dir    string
	remote bool
	cols   []Column           // partition columns, typed over every file; nil: not partitioned
	values map[string][]Value // file location (local path or s3:// URL) -> its partition values
	pruned int                // files pruned by the filter before their footers were read
	first  string             // the first file of the directory, relative to dir
}

// HiveDir returns the Hive of spec when its path is one local directory or
// one s3:// directory URL (the bucket, or a prefix ending in '/', without
// glob characters), else nil. A source declaring partition types must be
// one of those: otherwise the error wraps ErrHiveSource. Only a local
// path is looked at (os.Stat); nothing is requested.
func HiveDir(spec source.SourceSpec) (*Hive, error) {
	var h *Hive
	if len(spec.Paths) == 1 {
		p := spec.Paths[0]
		if source.IsS3URL(p) {
			if u, err := source.ParseS3URL(p); err == nil && (u.Key == "" || strings.HasSuffix(u.Key, "/")) && !strings.ContainsAny(u.Key, "*?[") {
				h = &Hive{dir: u.String(), remote: true}
			}
		} else if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			abs, err := filepath.Abs(p)
			if err != nil {
				return nil, err
			}
			h = &Hive{dir: abs}
		}
	}
	if h == nil && len(spec.Partitions) > 0 {
		return nil, hivef("partitions are declared (%s), but the path is not one directory of key=value levels: give the partitioned directory (an s3:// one ending in '/')", spec.Partitions[0].Key)
	}
	return h, nil
}

// Remote reports whether the directory is an s3:// prefix.
func (h *Hive) Remote() bool { return h.remote }

// PartitionKeys returns the partition keys and types the plan records
// (plan.MixSource.Partitions), in level order; nil for a nil Hive or one
// not partitioned (no key=value level).
func (h *Hive) PartitionKeys() []plan.PartitionKey {
	if h == nil {
		return nil
	}
	var out []plan.PartitionKey
	for _, c := range h.cols {
		out = append(out, plan.PartitionKey{Key: c.Name, Type: PartitionTypeName(c.Type)})
	}
	return out
}

// Partitions returns the partition columns (nil for a nil Hive or one not
// partitioned) and the function giving the partition values of the file
// at path (plan.SourceFile.Path) under root (plan.Source.Root), in the
// columns' order: what Select takes as File.Partition and its part.
func (h *Hive) Partitions() ([]Column, func(root, path string) []Value) {
	if h == nil || h.cols == nil {
		return nil, nil
	}
	return h.cols, func(root, path string) []Value { return h.values[h.location(root, path)] }
}

// location is where the file at path (relative to the plan source's root)
// is: the key of values.
func (h *Hive) location(root, path string) string {
	if h.remote {
		return strings.TrimSuffix(root, "/") + "/" + path
	}
	return filepath.Join(root, filepath.FromSlash(path))
}

// Discover lists the directory, reads its partition layout and types
// (PartitionColumns, with spec's declared types) and, when spec has a
// filter, prunes the files whose partition values cannot satisfy it before
// any footer is read (PrunePartitions; source.DiscoverWhere,
// source.S3Client.DiscoverS3Where: the whole listing first). An s3://
// directory without a filter is discovered as any other (footers read
// while the listing goes on) and its layout read from the objects found.
//
// A partitioned source is returned rooted at the directory itself
// (whatever files the filter kept), so every file's path holds its
// key=value levels. Its files are checked for a top-level column named
// like a partition key (ErrPartitionConflict) from the footers discovery
// read: no footer is read again, and those of pruned files never.
//
// For an s3:// directory it returns the client it made with options o
// (for its counters), also on error once made; nil for a local one. Errors
// the input causes wrap ErrHiveSource; a file that cannot be read or is
// not Parquet gives discovery's error (*source.Error values naming it); an
// s3:// directory with no object wraps source.ErrNoInput.
func (h *Hive) Discover(ctx context.Context, spec source.SourceSpec, o source.S3Options) (plan.Source, *source.S3Client, error) {
	if !h.remote {
		src, cols, err := source.DiscoverWhere(ctx, spec.Paths, func(files []string) ([]bool, error) {
			return h.keep(spec, files)
		})
		if err != nil {
			st, lerr := source.NewLocal(h.dir)
			if lerr != nil {
				return src, nil, lerr
			}
			return src, nil, h.discoverError(ctx, st, spec, err)
		}
		src, err = h.finish(src, cols)
		return src, nil, err
	}
	c, err := source.NewS3Client(ctx, o)
	if err != nil {
		return plan.Source{}, nil, hiveError{err}
	}
	var (
		src  plan.Source
		cols source.TopColumns
	)
	if spec.Filter == "" {
		// Nothing to prune: footers are read while the listing goes on,
		// and the layout is read from the objects found.
		if src, cols, err = c.DiscoverS3Where(ctx, spec.Paths, nil); err == nil {
			var urls []string
			for _, f := range append(append([]plan.SourceFile(nil), src.Files...), src.EmptyFiles...) {
				urls = append(urls, h.location(src.Root, f.Path))
			}
			sort.Strings(urls)
			_, err = h.keep(spec, urls)
		}
	} else {
		src, cols, err = c.DiscoverS3Where(ctx, spec.Paths, func(urls []string) ([]bool, error) {
			return h.keep(spec, urls)
		})
	}
	if err == nil {
		src, err = h.finish(src, cols)
		return src, c, err
	}
	if errors.Is(err, source.ErrBadURL) || errors.Is(err, source.ErrCredentialURL) {
		return plan.Source{}, c, hiveError{err}
	}
	if errors.Is(err, fs.ErrNotExist) && h.pruned == 0 {
		err = fmt.Errorf("%w: %w", err, source.ErrNoInput)
	}
	st, serr := c.Store(h.dir)
	if serr != nil {
		return src, c, hiveError{serr}
	}
	defer st.Close()
	return src, c, h.discoverError(ctx, st, spec, err)
}

// finish roots a discovered source at the partitioned directory and checks
// its files' top-level columns (cols, keyed as src's paths) against the
// partition keys.
func (h *Hive) finish(src plan.Source, cols source.TopColumns) (plan.Source, error) {
	if h.cols == nil {
		return src, nil
	}
	byLoc := make(map[string][]string, len(cols))
	for p, cs := range cols {
		byLoc[h.location(src.Root, p)] = cs
	}
	src, err := h.rooted(src)
	if err != nil {
		return src, err
	}
	return src, h.checkKeys(src, byLoc)
}

// rooted returns src rooted at the partitioned directory itself when it
// is partitioned, whatever files the filter kept: every file's path then
// holds its key=value levels, from which convert reads its partition
// values (plan.MixSource.PartitionValues).
func (h *Hive) rooted(src plan.Source) (plan.Source, error) {
	if h.cols == nil {
		return src, nil
	}
	rebase := func(fs []plan.SourceFile) error {
		for i := range fs {
			if h.remote {
				loc := h.location(src.Root, fs[i].Path)
				if !strings.HasPrefix(loc, h.dir) {
					return fmt.Errorf("%s is not under %s", loc, h.dir)
				}
				fs[i].Path = strings.TrimPrefix(loc, h.dir)
				continue
			}
			rel, err := filepath.Rel(h.dir, h.location(src.Root, fs[i].Path))
			if err != nil {
				return err
			}
			fs[i].Path = filepath.ToSlash(rel)
		}
		return nil
	}
	if err := rebase(src.Files); err != nil {
		return plan.Source{}, err
	}
	if err := rebase(src.EmptyFiles); err != nil {
		return plan.Source{}, err
	}
	src.Root = h.dir
	if !h.remote {
		src.Root = filepath.Clean(h.dir)
	}
	return src, src.Normalize()
}

// discoverError is the error of a failed discovery. When the filter
// pruned every partition, the first file's footer is read from st (the
// partitioned directory's store) first: a column named like a partition
// key is the more likely cause (the filter meant the column).
func (h *Hive) discoverError(ctx context.Context, st source.Store, spec source.SourceSpec, err error) error {
	if err == nil || errors.Is(err, ErrHiveSource) {
		return err
	}
	if (errors.Is(err, source.ErrNoInput) || errors.Is(err, fs.ErrNotExist)) && h.pruned > 0 {
		// Only a conflict replaces the message: the first file's footer
		// being unreadable is not what stopped the plan.
		if cerr := CheckPartitionKeys(ctx, st, []string{h.first}, h.keys()); errors.Is(cerr, ErrPartitionConflict) {
			return hivef("%w (checked the directory's first file, as the filter %q prunes every partition)", cerr, spec.Filter)
		}
		return hivef("filter %q prunes every partition: nothing to draw from", spec.Filter)
	}
	return err
}

// keys returns the partition keys, in level order.
func (h *Hive) keys() []string {
	var ks []string
	for _, c := range h.cols {
		ks = append(ks, c.Name)
	}
	return ks
}

// checkKeys refuses a partitioned source whose kept files (src rooted at
// the partitioned directory; cols their top-level columns by location)
// have a top-level column named like a partition key
// (CheckPartitionColumns): partition: KEY would read the directory level's
// value and column: KEY the file's. It says which footers it checked.
func (h *Hive) checkKeys(src plan.Source, cols map[string][]string) error {
	var files []string
	for _, f := range append(append([]plan.SourceFile(nil), src.Files...), src.EmptyFiles...) {
		files = append(files, f.Path)
	}
	sort.Strings(files)
	fileCols := make([][]string, len(files))
	for i, f := range files {
		fileCols[i] = cols[h.location(src.Root, f)]
	}
	err := CheckPartitionColumns(files, fileCols, h.keys())
	if err == nil {
		return nil
	}
	if h.pruned > 0 {
		return hivef("%w (checked the %s the filter keeps; %s pruned unread)", err, fileCount(len(files)), fileCount(h.pruned))
	}
	return hivef("%w (checked every file's footer: %s)", err, fileCount(len(files)))
}

// fileCount renders n files: "1 file", "2 files".
func fileCount(n int) string {
	if n == 1 {
		return "1 file"
	}
	return fmt.Sprintf("%d files", n)
}

// keep types the partitions of files (local paths or s3:// URLs under
// h.dir, sorted) and says which the filter keeps. Layout errors, a
// declared type a value does not parse as, and filter errors on the
// partition columns wrap ErrHiveSource.
func (h *Hive) keep(spec source.SourceSpec, files []string) ([]bool, error) {
	keep := make([]bool, len(files))
	for i := range keep {
		keep[i] = true
	}
	rels := make([]string, len(files))
	for i, f := range files {
		if h.remote {
			rels[i] = strings.TrimPrefix(f, h.dir)
			continue
		}
		rel, err := filepath.Rel(h.dir, f)
		if err != nil {
			return nil, err
		}
		rels[i] = filepath.ToSlash(rel)
	}
	keys, vals, err := source.HiveLayout(rels)
	if err != nil {
		return nil, hivef("%s: %w", h.dir, err)
	}
	if len(rels) > 0 {
		h.first = rels[0]
	}
	if keys == nil {
		if len(spec.Partitions) > 0 {
			return nil, hivef("partitions are declared (%s), but no file under %s sits below a key=value directory level", spec.Partitions[0].Key, h.dir)
		}
		return keep, nil
	}
	declared := map[string]Type{}
	for _, d := range spec.Partitions {
		declared[d.Key], _ = PartitionType(d.Type)
	}
	cols, typed, err := PartitionColumns(keys, rels, vals, writtenValues(rels), declared)
	if err != nil {
		return nil, hiveError{err}
	}
	h.cols, h.values = cols, map[string][]Value{}
	for i, f := range files {
		h.values[f] = typed[i]
	}
	if spec.Filter == "" {
		return keep, nil
	}
	keep, err = PrunePartitions(spec.Filter, cols, typed)
	if err != nil {
		return nil, hivef("filter: %w", err)
	}
	for _, k := range keep {
		if !k {
			h.pruned++
		}
	}
	return keep, nil
}

// writtenValues is each file's partition values as its relative path rels[f]
// spells them, before unescaping: the value of each key=value directory
// level, in level order (the layout source.HiveLayout checked).
func writtenValues(rels []string) [][]string {
	out := make([][]string, len(rels))
	for f, rel := range rels {
		dir := path.Dir(rel)
		if dir == "." {
			continue
		}
		for _, l := range strings.Split(dir, "/") {
			_, v, _ := strings.Cut(l, "=")
			out[f] = append(out[f], v)
		}
	}
	return out
}
