package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"

	workers "github.com/prepml/prep/internal/pool" // pool is the descriptor pool (local.go)
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/pqread"
)

// discoverParallel is how many files' footers discovery reads at once.
const discoverParallel = 8

// Discover expands paths into the plan source:
//
//   - a regular file is taken as is, whatever its name;
//   - a directory is walked recursively for regular files: a name ending
//     in .parquet (any case) is taken; any other name is taken when the
//     file's last 4 bytes are the Parquet magic "PAR1" (or "PARE", which
//     discovery then refuses as encrypted), as Hive and MapReduce
//     (000000_0), Impala (*_data.0.parq) and other writers name their
//     files: one 4-byte read per such file (IsParquetName, the rule S3
//     listings follow too). Every other regular file is left out and
//     reported (Source.Skipped; an error saying how many files were
//     present when none is Parquet), never silently. Entries whose name
//     starts with "." or "_" (Spark and Hive temporary and marker files
//     such as _SUCCESS, _temporary/, .part-0.crc) and *.crc checksum files
//     are ignored;
//   - any other path containing *, ? or [ is a glob (filepath.Match syntax);
//     each match is taken as a file or walked as a directory.
//
// Symbolic links are followed when named directly or matched by a glob.
// A path reached twice is kept once; two paths of one file (a hard link, or
// a symbolic link met while walking a directory) are two source files,
// which prep plan reports. Source.Root is the deepest directory
// holding every file (absolute, symlinks not resolved); each SourceFile.Path
// is relative to it with '/' separators, so the source fingerprint does not
// depend on where the data set is mounted.
//
// Of each file only the footer is read, through a Local store over the
// root, and validated by pqread exactly as convert validates it (magics and
// footer length before allocating, thrift nesting, schema, physical types,
// row counts, every column chunk inside the data region), and its row count
// checked against what a file of its size can hold (MaxRows). At most 8
// files are read at once. Every file is checked; problems are returned
// together (errors.Join of *Error values naming the file relative to the
// root, wrapping ErrFooter or the I/O error, sorted by path) so that a run
// over many files writes nothing when any is bad. Files with zero rows are
// returned in Source.EmptyFiles. ctx stops the reading between files.
func Discover(ctx context.Context, paths []string) (plan.Source, error) {
	src, _, err := discoverLocal(ctx, paths, nil, false)
	return src, err
}

// TopColumns maps each file of a discovered source (its path relative to
// the source's root, as plan.SourceFile.Path records it; files with zero
// rows included) to its top-level column names: the first element of each
// leaf column's schema path, in schema order, each once (a struct s with
// leaves s.a and s.b gives s).
type TopColumns map[string][]string

// DiscoverWhere is Discover that first asks keep (if not nil) which of the
// files paths name (absolute, sorted) to take: the others' footers are
// never read and they are not part of the source. Used to prune hive
// partitions by a filter before any footer is read. It also returns the
// top-level columns of every file taken, read from the footers discovery
// reads anyway, so that a caller checking them (a hive source's partition
// keys) reads no footer again.
func DiscoverWhere(ctx context.Context, paths []string, keep func(files []string) ([]bool, error)) (plan.Source, TopColumns, error) {
	return discoverLocal(ctx, paths, keep, true)
}

// discoverLocal is DiscoverWhere; the top-level columns are collected only
// when withCols is set (nil otherwise).
func discoverLocal(ctx context.Context, paths []string, keep func(files []string) ([]bool, error), withCols bool) (plan.Source, TopColumns, error) {
	files, skipped, err := expandPaths(paths)
	if err != nil {
		return plan.Source{}, nil, err
	}
	if len(files) == 0 {
		return plan.Source{}, nil, fmt.Errorf("%s%s: %w", strings.Join(paths, ", "), skippedNote(skipped), ErrNoInput)
	}
	if keep != nil {
		ok, err := keep(files)
		if err != nil {
			return plan.Source{}, nil, err
		}
		var kept []string
		for i, f := range files {
			if ok[i] {
				kept = append(kept, f)
			}
		}
		if len(kept) == 0 {
			return plan.Source{}, nil, fmt.Errorf("%s: every file pruned by the filter: %w", strings.Join(paths, ", "), ErrNoInput)
		}
		files = kept
	}
	root := commonDir(files)
	st, err := NewLocal(root)
	if err != nil {
		return plan.Source{}, nil, err
	}
	results := make([]plan.SourceFile, len(files))
	cols := make([][]string, len(files))
	errs := make([]error, len(files))
	// Every file is read (its error kept at its index, reported with the
	// others); only cancellation stops the pool.
	_ = workers.ForEach(ctx, len(files), min(discoverParallel, max(2, runtime.GOMAXPROCS(0))), func(i int) error {
		rel, err := filepath.Rel(root, files[i])
		if err != nil {
			errs[i] = &Error{File: files[i], Err: err}
			return nil
		}
		results[i], cols[i], errs[i] = readInfo(ctx, st, filepath.ToSlash(rel), withCols)
		return nil
	})
	if err := ctx.Err(); err != nil {
		return plan.Source{}, nil, err
	}
	if err := errors.Join(errs...); err != nil {
		return plan.Source{}, nil, err
	}
	var tc TopColumns
	if withCols {
		tc = make(TopColumns, len(files))
		for i, f := range results {
			tc[f.Path] = cols[i]
		}
	}
	src := plan.Source{Root: root, Files: results, Skipped: skipped}
	if err := src.Normalize(); err != nil {
		return plan.Source{}, nil, err
	}
	return src, tc, nil
}

// IsParquetName reports whether a directory walk or listing takes the file
// called name (its last path element) without looking at its bytes: a name
// ending in .parquet, any case.
func IsParquetName(name string) bool {
	return strings.EqualFold(path.Ext(name), ".parquet")
}

// ignoredName reports whether a directory walk or listing ignores an entry
// called name without reporting it: hidden ('.'), Spark and Hive markers
// and temporary directories ('_': _SUCCESS, _temporary/, _committed_...),
// and Hadoop's *.crc checksum files.
func ignoredName(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || strings.EqualFold(path.Ext(name), ".crc")
}

// parquetMagic reports whether tail, a file's last bytes, ends in a
// Parquet magic: "PAR1", or "PARE" (an encrypted footer, which discovery
// then refuses by name).
func parquetMagic(tail []byte) bool {
	return len(tail) >= 4 && (string(tail[len(tail)-4:]) == "PAR1" || string(tail[len(tail)-4:]) == "PARE")
}

// hasParquetMagic reads the last 4 bytes of the local file at p.
func hasParquetMagic(p string) (bool, error) {
	f, err := os.Open(p)
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() < 4 {
		return false, err
	}
	var b [4]byte
	if _, err := f.ReadAt(b[:], st.Size()-4); err != nil {
		return false, err
	}
	return parquetMagic(b[:]), nil
}

// skippedNote is the part of a "no parquet files found" error saying what
// the walk or listing left out: "" when nothing; else how many files were
// present and the first names.
func skippedNote(skipped []string) string {
	if len(skipped) == 0 {
		return ""
	}
	names := skipped
	if len(names) > 5 {
		names = names[:5]
	}
	more := ""
	if len(skipped) > len(names) {
		more = fmt.Sprintf(", ... (%d more)", len(skipped)-len(names))
	}
	return fmt.Sprintf(": %d files present, none Parquet (not named *.parquet, and not ending in the PAR1 magic): %s%s", len(skipped), strings.Join(names, ", "), more)
}

// expandPaths returns the absolute, cleaned, de-duplicated and sorted list
// of files that paths name, and the regular files directory walks left
// out as not Parquet (absolute, sorted).
func expandPaths(paths []string) ([]string, []string, error) {
	seen := map[string]bool{}
	var out, skipped []string
	var errs []error
	add := func(p string) {
		abs, err := filepath.Abs(p)
		if err != nil {
			errs = append(errs, err)
			return
		}
		if !seen[abs] {
			seen[abs] = true
			out = append(out, abs)
		}
	}
	var visit func(p string, explicit bool)
	visit = func(p string, explicit bool) {
		st, err := os.Stat(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("source %s: %w", p, err))
			return
		}
		switch {
		case st.Mode().IsRegular():
			add(p)
		case st.IsDir():
			err := filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
				if err != nil {
					return fmt.Errorf("walking %s: %w", q, err)
				}
				name := d.Name()
				if q != p && ignoredName(name) {
					if d.IsDir() {
						return filepath.SkipDir
					}
					return nil
				}
				if d.IsDir() {
					return nil
				}
				if !d.Type().IsRegular() {
					if st, err := os.Stat(q); err != nil || !st.Mode().IsRegular() {
						return nil // only a symlink to a regular file is a file
					}
				}
				if IsParquetName(name) {
					add(q)
					return nil
				}
				ok, err := hasParquetMagic(q)
				if err != nil {
					return fmt.Errorf("reading %s: %w", q, err)
				}
				if ok {
					add(q)
				} else if abs, err := filepath.Abs(q); err == nil {
					skipped = append(skipped, abs)
				}
				return nil
			})
			if err != nil {
				errs = append(errs, err)
			}
		default:
			if explicit {
				errs = append(errs, fmt.Errorf("source %s: not a regular file or directory", p))
			}
		}
	}
	for _, p := range paths {
		if _, err := os.Lstat(p); err != nil && strings.ContainsAny(p, "*?[") {
			matches, gerr := filepath.Glob(p)
			if gerr != nil {
				errs = append(errs, fmt.Errorf("source %s: %w", p, gerr))
				continue
			}
			if len(matches) == 0 {
				errs = append(errs, fmt.Errorf("source %s: no file matches: %w", p, ErrNoInput))
			}
			for _, m := range matches {
				visit(m, false)
			}
			continue
		}
		visit(p, true)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	sort.Strings(out)
	sort.Strings(skipped)
	return out, slices.Compact(skipped), nil
}

// commonDir returns the deepest directory containing every absolute path.
func commonDir(files []string) string {
	dir := filepath.Dir(files[0])
	for _, f := range files[1:] {
		for !within(dir, f) {
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return dir
}

func within(dir, f string) bool {
	if dir == string(filepath.Separator) {
		return true
	}
	return strings.HasPrefix(f, dir+string(filepath.Separator))
}

// ReadInfo reads the footer of the named file of st, validates it (see
// Discover) and returns its plan record: path, size, footer SHA-256 and
// row-group row counts. Errors are *Error values naming the file.
func ReadInfo(ctx context.Context, st Store, name string) (plan.SourceFile, error) {
	f, _, err := readInfo(ctx, st, name, false)
	return f, err
}

// readInfo is ReadInfo that also returns the file's top-level column
// names (TopColumns) when withCols is set.
func readInfo(ctx context.Context, st Store, name string, withCols bool) (plan.SourceFile, []string, error) {
	obj, err := st.Open(ctx, name)
	if err != nil {
		return plan.SourceFile{}, nil, err
	}
	defer obj.Close()
	pf, err := openParquet(obj, pqread.Limits{})
	if err != nil {
		return plan.SourceFile{}, nil, err
	}
	defer pf.Close()
	var cols []string
	if withCols {
		cols = topColumns(pf.Columns())
	}
	return plan.SourceFile{Path: name, Size: pf.Size(), FooterSHA256: pf.FooterSHA256(), RowGroups: pf.RowGroups()}, cols, nil
}

// topColumns returns the first element of each leaf column's schema path,
// in schema order, each once.
func topColumns(leaves []pqread.ColumnInfo) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, c := range leaves {
		if len(c.Path) > 0 && !seen[c.Path[0]] {
			seen[c.Path[0]] = true
			out = append(out, c.Path[0])
		}
	}
	return out
}

// ErrMixedRoots is returned by DiscoverPaths for paths that mix local
// paths and s3:// URLs: one plan reads one root.
var ErrMixedRoots = errors.New("local paths and s3:// URLs cannot be mixed in one plan (one plan reads one root)")

// ErrClientConfig is wrapped by the error of an object-store client that
// cannot be made (NewS3Client: the AWS configuration does not load, or the
// endpoint is malformed or carries credentials). Its message is the
// cause's.
var ErrClientConfig = errors.New("object-store client configuration")

// clientError marks err as ErrClientConfig without changing its message.
type clientError struct{ err error }

func (e clientError) Error() string        { return e.err.Error() }
func (e clientError) Unwrap() error        { return e.err }
func (e clientError) Is(target error) bool { return target == ErrClientConfig }

// DiscoverPaths discovers the plan source paths name, as prep plan
// --source takes them: local files, directories and globs (Discover), or
// s3:// URLs (S3Client.DiscoverS3 over a new client with options o), never
// both. For URLs it returns the client (for its counters), also on error
// once made; nil for local paths.
//
// Errors, before any request: paths mixing both wrap ErrMixedRoots; a
// malformed URL or one carrying credentials wraps ErrBadURL or
// ErrCredentialURL; a client that cannot be made wraps ErrClientConfig.
// URLs under which nothing is found wrap both fs.ErrNotExist and
// ErrNoInput. Otherwise discovery's errors are returned as they are.
func DiscoverPaths(ctx context.Context, paths []string, o S3Options) (plan.Source, *S3Client, error) {
	remote := 0
	for _, p := range paths {
		if IsS3URL(p) {
			remote++
		}
	}
	if remote == 0 {
		src, err := Discover(ctx, paths)
		return src, nil, err
	}
	if remote != len(paths) {
		return plan.Source{}, nil, ErrMixedRoots
	}
	for _, p := range paths {
		if _, err := ParseS3URL(p); err != nil {
			return plan.Source{}, nil, err
		}
	}
	c, err := NewS3Client(ctx, o)
	if err != nil {
		return plan.Source{}, nil, clientError{err}
	}
	src, err := c.DiscoverS3(ctx, paths)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w: %w", err, ErrNoInput)
		}
		return plan.Source{}, c, err
	}
	return src, c, nil
}
