package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/selection"
	"github.com/prepml/prep/source"
)

// hiveSource is a source given as one directory, local or an s3:// prefix,
// whose key=value directory levels are hive partitions
// (source.HiveLayout, selection/SELECTION.md).
type hiveSource struct {
	// dir is the partitioned directory: an absolute local path, or an
	// s3:// URL ending in '/'.
	dir    string
	remote bool
	cols   []selection.Column           // partition columns, typed over every file; nil: not partitioned
	values map[string][]selection.Value // file location (local path or s3:// URL) -> its partition values
	pruned int                          // files pruned by the filter before their footers were read
	first  string                       // the first file of the directory, relative to dir
}

// hiveDir returns the hiveSource of spec when it is one local directory or
// one s3:// directory URL (the bucket, or a prefix ending in '/', without
// glob characters), else nil. A source declaring partition types must be
// one of those.
func hiveDir(spec source.SourceSpec) (*hiveSource, error) {
	var h *hiveSource
	if len(spec.Paths) == 1 {
		p := spec.Paths[0]
		if source.IsS3URL(p) {
			if u, err := source.ParseS3URL(p); err == nil && (u.Key == "" || strings.HasSuffix(u.Key, "/")) && !strings.ContainsAny(u.Key, "*?[") {
				h = &hiveSource{dir: u.String(), remote: true}
			}
		} else if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			abs, err := filepath.Abs(p)
			if err != nil {
				return nil, err
			}
			h = &hiveSource{dir: abs}
		}
	}
	if h == nil && len(spec.Partitions) > 0 {
		return nil, fmt.Errorf("partitions are declared (%s), but the path is not one directory of key=value levels: give the partitioned directory (an s3:// one ending in '/')", spec.Partitions[0].Key)
	}
	return h, nil
}

// partitionKeys returns the partition keys and types the plan records
// (plan.MixSource.Partitions); nil for a source without partitions (h nil
// or not partitioned).
func (h *hiveSource) partitionKeys() []plan.PartitionKey {
	if h == nil {
		return nil
	}
	var out []plan.PartitionKey
	for _, c := range h.cols {
		out = append(out, plan.PartitionKey{Key: c.Name, Type: selection.PartitionTypeName(c.Type)})
	}
	return out
}

// location is where the file at path (relative to the plan source's root)
// is: the key of values.
func (h *hiveSource) location(root, path string) string {
	if h.remote {
		return strings.TrimSuffix(root, "/") + "/" + path
	}
	return filepath.Join(root, filepath.FromSlash(path))
}

// discover lists the directory, reads its partition layout and, with a
// filter, prunes the files whose partition values cannot satisfy it before
// reading any footer (source.DiscoverWhere, source.S3Client.DiscoverS3Where:
// the whole listing first). An s3:// directory without a filter is
// discovered as any other (footers read while the listing goes on) and its
// layout read from the objects found. For an s3:// directory it returns
// the object-store source it opened.
func (h *hiveSource) discover(ctx context.Context, spec source.SourceSpec, o *s3Flags) (plan.Source, *s3Source, error) {
	if !h.remote {
		src, err := source.DiscoverWhere(ctx, spec.Paths, func(files []string) ([]bool, error) {
			return h.keep(spec, files)
		})
		st, lerr := source.NewLocal(h.dir)
		if lerr != nil {
			return src, nil, lerr
		}
		if err != nil {
			return src, nil, h.discoverError(ctx, st, spec, err)
		}
		if src, err = h.rooted(src); err != nil {
			return src, nil, err
		}
		return src, nil, h.checkKeys(ctx, st, src)
	}
	c, err := source.NewS3Client(ctx, o.options())
	if err != nil {
		return plan.Source{}, nil, usagef("%v", err)
	}
	s := &s3Source{client: c}
	var src plan.Source
	if spec.Filter == "" {
		// Nothing to prune: footers are read while the listing goes on
		// (DiscoverS3), and the layout is read from the objects found.
		if src, err = c.DiscoverS3(ctx, spec.Paths); err == nil {
			var urls []string
			for _, f := range append(append([]plan.SourceFile(nil), src.Files...), src.EmptyFiles...) {
				urls = append(urls, h.location(src.Root, f.Path))
			}
			sort.Strings(urls)
			_, err = h.keep(spec, urls)
		}
	} else {
		src, err = c.DiscoverS3Where(ctx, spec.Paths, func(urls []string) ([]bool, error) {
			return h.keep(spec, urls)
		})
	}
	if err != nil {
		if errors.Is(err, source.ErrBadURL) || errors.Is(err, source.ErrCredentialURL) {
			return plan.Source{}, s, usagef("%v", err)
		}
		if errors.Is(err, fs.ErrNotExist) && h.pruned == 0 {
			err = fmt.Errorf("%w: %w", err, source.ErrNoInput)
		}
	}
	st, serr := c.Store(h.dir)
	if serr != nil {
		return src, s, usagef("%v", serr)
	}
	defer st.Close()
	if err != nil {
		return src, s, h.discoverError(ctx, st, spec, err)
	}
	if src, err = h.rooted(src); err != nil {
		return src, s, err
	}
	return src, s, h.checkKeys(ctx, st, src)
}

// rooted returns src rooted at the partitioned directory itself when it
// is partitioned, whatever files the filter kept: every file's path then
// holds its key=value levels, from which convert reads its partition
// values (plan.MixSource.PartitionValues).
func (h *hiveSource) rooted(src plan.Source) (plan.Source, error) {
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
func (h *hiveSource) discoverError(ctx context.Context, st source.Store, spec source.SourceSpec, err error) error {
	if err == nil {
		return nil
	}
	var ue usageError
	if errors.As(err, &ue) {
		return err
	}
	if (errors.Is(err, source.ErrNoInput) || errors.Is(err, fs.ErrNotExist)) && h.pruned > 0 {
		// Only a conflict replaces the message: the first file's footer
		// being unreadable is not what stopped the plan.
		if cerr := selection.CheckPartitionKeys(ctx, st, []string{h.first}, h.keys()); errors.Is(cerr, selection.ErrPartitionConflict) {
			return usagef("%v (checked the directory's first file, as the filter %q prunes every partition)", cerr, spec.Filter)
		}
		return usagef("filter %q prunes every partition: nothing to draw from", spec.Filter)
	}
	return err
}

// keys returns the partition keys, in level order.
func (h *hiveSource) keys() []string {
	var ks []string
	for _, c := range h.cols {
		ks = append(ks, c.Name)
	}
	return ks
}

// checkKeys refuses a partitioned source whose kept files (src rooted at
// the partitioned directory; st its store) have a top-level column named
// like a partition key (selection.CheckPartitionKeys): partition: KEY
// would read the directory level's value and column: KEY the file's. It
// reads the footers of the files the filter keeps, not of pruned ones,
// and says which it checked.
func (h *hiveSource) checkKeys(ctx context.Context, st source.Store, src plan.Source) error {
	if h.cols == nil {
		return nil
	}
	var files []string
	for _, f := range append(append([]plan.SourceFile(nil), src.Files...), src.EmptyFiles...) {
		files = append(files, f.Path)
	}
	sort.Strings(files)
	err := selection.CheckPartitionKeys(ctx, st, files, h.keys())
	if !errors.Is(err, selection.ErrPartitionConflict) {
		return err
	}
	if h.pruned > 0 {
		return usagef("%v (checked the %s the filter keeps; %s pruned unread)", err, count(len(files), "file"), count(h.pruned, "file"))
	}
	return usagef("%v (checked every file's footer: %s)", err, count(len(files), "file"))
}

// keep types the partitions of files (local paths or s3:// URLs under
// h.dir, sorted) and says which the filter keeps. Layout errors, a
// declared type a value does not parse as, and filter errors on the
// partition columns are usage errors.
func (h *hiveSource) keep(spec source.SourceSpec, files []string) ([]bool, error) {
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
		return nil, usagef("%s: %v", h.dir, err)
	}
	if len(rels) > 0 {
		h.first = rels[0]
	}
	if keys == nil {
		if len(spec.Partitions) > 0 {
			return nil, usagef("partitions are declared (%s), but no file under %s sits below a key=value directory level", spec.Partitions[0].Key, h.dir)
		}
		return keep, nil
	}
	declared := map[string]selection.Type{}
	for _, d := range spec.Partitions {
		declared[d.Key], _ = selection.PartitionType(d.Type)
	}
	cols, typed, err := selection.PartitionColumns(keys, rels, vals, declared)
	if err != nil {
		return nil, usagef("%v", err)
	}
	h.cols, h.values = cols, map[string][]selection.Value{}
	for i, f := range files {
		h.values[f] = typed[i]
	}
	if spec.Filter == "" {
		return keep, nil
	}
	keep, err = selection.PrunePartitions(spec.Filter, cols, typed)
	if err != nil {
		return nil, usagef("filter: %v", err)
	}
	for _, k := range keep {
		if !k {
			h.pruned++
		}
	}
	return keep, nil
}
