package source

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	workers "github.com/prepml/prep/internal/pool"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/pqread"
)

// S3Entry is one listed object.
type S3Entry struct {
	Key  string // full key in the bucket
	Size int64  // bytes, as listed
	ETag string // as listed, quotes included
	// walked: listed from a directory (a prefix ending in '/', or below
	// a glob's match), not named: then it is taken only when it is
	// Parquet (IsParquetName or the magic), as a local walk takes files.
	walked bool
}

// List expands one s3:// source into the objects it names, sorted by key:
//
//   - s3://bucket/ or s3://bucket/prefix/ (ending in '/'): every object
//     below the prefix, skipping any key with a component below the prefix
//     starting with '.' or '_' (Spark and Hive markers such as _SUCCESS,
//     _temporary/) and *.crc checksum objects; DiscoverS3 then takes those
//     named *.parquet and, of the others, those ending in the PAR1 magic,
//     and reports the rest (plan.Source.Skipped), as a local walk does;
//   - a key containing *, ? or [: a glob (path.Match syntax, '*' does not
//     cross '/'); a key with as many components as the pattern is taken
//     when it matches, whatever its name; a longer key is taken when its
//     leading components match and it would be taken from that prefix as a
//     directory;
//   - any other key: that object, or, when none has that exact key, the
//     directory key/.
//
// Listing costs one request per 1,000 keys. A source naming nothing
// returns an error wrapping fs.ErrNotExist; others wrap ErrNoBucket,
// ErrAccessDenied, ErrBadCredentials or ErrRetriesExhausted.
func (c *S3Client) List(ctx context.Context, source string) ([]S3Entry, error) {
	var out []S3Entry
	if err := c.listEach(ctx, source, func(e S3Entry) { out = append(out, e) }); err != nil {
		return nil, err
	}
	return out, nil
}

// listEach calls fn for each object List returns, in key order, as the
// pages arrive (for a plain key: once the listing tells a key from a
// directory).
func (c *S3Client) listEach(ctx context.Context, source string, fn func(S3Entry)) error {
	u, err := ParseS3URL(source)
	if err != nil {
		return err
	}
	key := u.Key
	n := 0
	count := func(e S3Entry) { n++; fn(e) }
	switch {
	case key == "" || strings.HasSuffix(key, "/"):
		err := c.list(ctx, u.Bucket, key, func(e S3Entry) {
			if inDir(e.Key[len(key):]) {
				e.walked = true
				count(e)
			}
		})
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%s: no object below it (hidden, _-prefixed and .crc objects aside): %w", source, fs.ErrNotExist)
		}
		return nil
	case strings.ContainsAny(key, "*?["):
		if _, err := path.Match(key, ""); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrBadURL, source, err)
		}
		lit := key[:strings.IndexAny(key, "*?[")]
		nseg := strings.Count(key, "/") + 1
		err := c.list(ctx, u.Bucket, lit, func(e S3Entry) {
			segs := strings.SplitN(e.Key, "/", nseg+1)
			if len(segs) < nseg {
				return
			}
			head := strings.Join(segs[:nseg], "/")
			if ok, _ := path.Match(key, head); !ok {
				return
			}
			if len(segs) == nseg {
				count(e)
			} else if inDir(e.Key[len(head)+1:]) {
				e.walked = true
				count(e)
			}
		})
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%s: no object matches: %w", source, fs.ErrNotExist)
		}
		return nil
	default:
		var exact, below []S3Entry
		err := c.list(ctx, u.Bucket, key, func(e S3Entry) {
			switch {
			case e.Key == key:
				exact = append(exact, e)
			case strings.HasPrefix(e.Key, key+"/") && inDir(e.Key[len(key)+1:]):
				e.walked = true
				below = append(below, e)
			}
		})
		if err != nil {
			return err
		}
		if len(exact) == 0 {
			exact = below
		}
		if len(exact) == 0 {
			return fmt.Errorf("%s: no such key: %w", source, fs.ErrNotExist)
		}
		for _, e := range exact {
			fn(e)
		}
		return nil
	}
}

// inDir reports whether rel, a key relative to a listed directory, is
// listed from it: no component empty or ignored (ignoredName: starting
// with '.' or '_', or a *.crc name). Whether it is Parquet is DiscoverS3's
// question (IsParquetName, then the magic).
func inDir(rel string) bool {
	for _, s := range strings.Split(rel, "/") {
		if s == "" || ignoredName(s) {
			return false
		}
	}
	return true
}

// list calls fn for every object whose key starts with prefix, in key
// order, one ListObjectsV2 request per page (retried like reads).
func (c *S3Client) list(ctx context.Context, bucket, prefix string, fn func(S3Entry)) error {
	u := "s3://" + bucket + "/" + prefix
	var token *string
	for {
		in := &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix, ContinuationToken: token}
		var out *s3.ListObjectsV2Output
		err := c.retry(ctx, func(ctx context.Context) error {
			select {
			case c.sem <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			}
			defer func() { <-c.sem }()
			c.n.requests.Add(1)
			var err error
			out, err = c.api.ListObjectsV2(ctx, in)
			return err
		})
		if err != nil {
			return fmt.Errorf("listing %s: %w", u, err)
		}
		for _, o := range out.Contents {
			if o.Key == nil || strings.HasSuffix(*o.Key, "/") {
				continue
			}
			e := S3Entry{Key: *o.Key}
			if o.Size != nil {
				e.Size = *o.Size
			}
			if o.ETag != nil {
				e.ETag = *o.ETag
			}
			fn(e)
		}
		if out.IsTruncated == nil || !*out.IsTruncated || out.NextContinuationToken == nil {
			return nil
		}
		token = out.NextContinuationToken
	}
}

// retry runs attempt until it succeeds, fails for good, or its retryable
// failures spent the retry budget (retryWait); the error wraps the
// sentinel classify finds, and ErrRetriesExhausted with the attempts and
// the time spent when the budget ran out.
func (c *S3Client) retry(ctx context.Context, attempt func(context.Context) error) error {
	start := c.now()
	for i := 1; ; i++ {
		err := attempt(ctx)
		if err == nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		kind, again := classify(err)
		if kind != nil {
			if errors.Is(kind, fs.ErrNotExist) {
				kind = ErrNoBucket // a listing's 404 is the bucket's
			}
			err = fmt.Errorf("%w (%s)", kind, describe(err))
		} else {
			err = errors.New(describe(err))
		}
		if !again {
			return err
		}
		if werr := c.retryWait(ctx, start, i); werr != nil {
			if errors.Is(werr, ErrRetriesExhausted) {
				return fmt.Errorf("%w after %d attempts in %s, last: %w", werr, i, seconds(c.now().Sub(start)), err)
			}
			return werr
		}
	}
}

// DiscoverS3 lists sources (each an s3:// URL as List takes; all in one
// bucket) and reads every object's footer with one suffix-range GET (two
// when a footer exceeds DefaultFooterGuess), Concurrency at a time while
// later pages are still being listed: about one request per file. It
// checks what the tail holds (the "PAR1" magic, the footer length inside
// the object; the leading magic too when the whole object fits the first
// request), validates the footer as a local discovery does (pqread's
// checks of schema, physical types, row counts and column chunk ranges,
// and MaxRows) and returns size, footer SHA-256 and row-group row counts per
// file, exactly as a local discovery of a copy of the same files would,
// and each file's ETag (plan.SourceFile.ETag). Source.Root is the deepest
// s3:// "directory" holding every object.
// Every object is checked; bad ones are reported together (errors.Join,
// sorted by key).
func (c *S3Client) DiscoverS3(ctx context.Context, sources []string) (plan.Source, error) {
	src, _, err := c.discoverS3(ctx, sources, nil, false)
	return src, err
}

// DiscoverS3Where is DiscoverS3 that first asks keep (if not nil) which of
// the listed objects (their s3:// URLs, sorted) to take: the others are
// never opened (no GET or HEAD of them) and are not part of the source.
// With keep, every page is listed before any footer is read. Used to prune
// hive partitions by a filter before any footer is read. An error of keep
// is returned as is; keeping no object is an error wrapping fs.ErrNotExist.
// With keep nil it discovers as DiscoverS3 does (footers read while the
// listing goes on). It also returns the top-level columns of every object
// taken (TopColumns, keyed by path relative to the source's root), read
// from the footers discovery reads anyway, so that a caller checking them
// (a hive source's partition keys) sends no request again.
func (c *S3Client) DiscoverS3Where(ctx context.Context, sources []string, keep func(urls []string) ([]bool, error)) (plan.Source, TopColumns, error) {
	return c.discoverS3(ctx, sources, keep, true)
}

// discoverS3 is DiscoverS3Where; the top-level columns are collected only
// when withCols is set (nil otherwise).
func (c *S3Client) discoverS3(ctx context.Context, sources []string, keep func(urls []string) ([]bool, error), withCols bool) (plan.Source, TopColumns, error) {
	bucket := ""
	for _, s := range sources {
		u, err := ParseS3URL(s)
		if err != nil {
			return plan.Source{}, nil, err
		}
		if bucket != "" && u.Bucket != bucket {
			return plan.Source{}, nil, fmt.Errorf("%w: sources in two buckets (%s and %s): one plan reads one bucket", ErrBadURL, bucket, u.Bucket)
		}
		bucket = u.Bucket
	}
	// Footers are read while later pages are still being listed: the
	// objects are opened by full key (a store at the bucket's root) and
	// named relative to the common root once every key is known.
	st := &S3Store{c: c, bucket: bucket}
	type found struct {
		e    S3Entry
		f    plan.SourceFile
		etag string
		cols []string
		skip bool // not Parquet: neither named *.parquet nor ending in PAR1
		err  error
	}
	var (
		mu  sync.Mutex
		all []*found
		wg  sync.WaitGroup
	)
	next := make(chan *found)
	for w := 0; w < c.o.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range next {
				r.f, r.etag, r.cols, r.skip, r.err = st.footerInfo(ctx, r.e.Key, r.e, withCols)
			}
		}()
	}
	seen := map[string]bool{}
	var lerr error
	emit := func(e S3Entry) {
		r := &found{e: e}
		mu.Lock()
		all = append(all, r)
		mu.Unlock()
		next <- r
	}
	var listed []S3Entry
	for _, s := range sources {
		lerr = c.listEach(ctx, s, func(e S3Entry) {
			if seen[e.Key] {
				return
			}
			seen[e.Key] = true
			if keep != nil {
				listed = append(listed, e)
				return
			}
			emit(e)
		})
		if lerr != nil {
			break
		}
	}
	var skipped []string
	if keep != nil && lerr == nil {
		// The objects not named *.parquet are checked for the magic before
		// the layout sees them (one GET each; a Parquet one is opened again
		// when taken).
		listed, skipped, lerr = st.magicFilter(ctx, listed)
	}
	if keep != nil && lerr == nil {
		sort.Slice(listed, func(i, j int) bool { return listed[i].Key < listed[j].Key })
		urls := make([]string, len(listed))
		for i, e := range listed {
			urls[i] = "s3://" + bucket + "/" + e.Key
		}
		var ok []bool
		if ok, lerr = keep(urls); lerr == nil {
			for i, e := range listed {
				if ok[i] {
					emit(e)
				}
			}
			if len(all) == 0 {
				lerr = fmt.Errorf("%s: every object pruned by the filter: %w", strings.Join(sources, ", "), fs.ErrNotExist)
			}
		}
	}
	close(next)
	wg.Wait()
	if lerr != nil {
		return plan.Source{}, nil, lerr
	}
	taken := all[:0]
	for _, r := range all {
		if r.skip && r.err == nil {
			skipped = append(skipped, "s3://"+bucket+"/"+r.e.Key)
			continue
		}
		taken = append(taken, r)
	}
	all = taken
	sort.Strings(skipped)
	if len(all) == 0 {
		return plan.Source{}, nil, fmt.Errorf("%s%s: %w", strings.Join(sources, ", "), skippedNote(skipped), fs.ErrNotExist)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].e.Key < all[j].e.Key })
	entries := make([]S3Entry, len(all))
	for i, r := range all {
		entries[i] = r.e
	}
	dir := commonKeyDir(entries)
	files := make([]plan.SourceFile, len(all))
	errs := make([]error, len(all))
	for i, r := range all {
		files[i], errs[i] = r.f, r.err
		files[i].Path = r.e.Key[len(dir):]
		files[i].ETag = r.etag
	}
	if err := errors.Join(errs...); err != nil {
		return plan.Source{}, nil, err
	}
	var tc TopColumns
	if withCols {
		tc = make(TopColumns, len(all))
		for i, r := range all {
			tc[files[i].Path] = r.cols
		}
	}
	src := plan.Source{Root: (&S3Store{bucket: bucket, prefix: dir}).String(), Files: files, Skipped: skipped}
	if err := src.Normalize(); err != nil {
		return plan.Source{}, nil, err
	}
	return src, tc, nil
}

// commonKeyDir returns the longest "dir/" prefix holding every key ("" for
// the bucket's root).
func commonKeyDir(es []S3Entry) string {
	if len(es) == 0 {
		return ""
	}
	dir := es[0].Key[:strings.LastIndex(es[0].Key, "/")+1]
	for _, e := range es[1:] {
		for !strings.HasPrefix(e.Key, dir) {
			dir = dir[:strings.LastIndex(strings.TrimSuffix(dir, "/"), "/")+1]
		}
	}
	return dir
}

// magicFilter returns the entries named *.parquet and those others whose
// objects end in the Parquet magic (one suffix GET each, Concurrency at a
// time), and the s3:// URLs of the rest.
func (s *S3Store) magicFilter(ctx context.Context, es []S3Entry) ([]S3Entry, []string, error) {
	skip := make([]bool, len(es))
	err := workers.ForEach(ctx, len(es), s.c.o.Concurrency, func(i int) error {
		if !es[i].walked || IsParquetName(es[i].Key) {
			return nil
		}
		obj, err := s.OpenVersion(ctx, es[i].Key, es[i].ETag)
		if err != nil {
			return err
		}
		defer obj.Close()
		skip[i] = !parquetMagic(obj.(*s3Object).tail)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	var kept []S3Entry
	var skipped []string
	for i, e := range es {
		if skip[i] {
			skipped = append(skipped, "s3://"+s.bucket+"/"+e.Key)
		} else {
			kept = append(kept, e)
		}
	}
	return kept, skipped, nil
}

// footerInfo opens one listed object (pinned to its listed ETag), checks
// its tail and returns size, footer hash and row groups, its ETag and,
// when withCols is set, its top-level columns (TopColumns). An object
// listed from a directory (S3Entry.walked), not named *.parquet, whose tail does not end in the Parquet magic is not
// Parquet: skip is true and nothing else is returned (its one GET, the
// tail's, is the check).
func (s *S3Store) footerInfo(ctx context.Context, name string, e S3Entry, withCols bool) (sf plan.SourceFile, etag string, cols []string, skip bool, err error) {
	obj, err := s.OpenVersion(ctx, name, e.ETag)
	if err != nil {
		return sf, "", nil, false, err
	}
	defer obj.Close()
	o := obj.(*s3Object)
	if e.walked && !IsParquetName(name) && !parquetMagic(o.tail) {
		return sf, "", nil, true, nil
	}
	ft, err := o.footer(pqreadMaxFooter)
	if err != nil {
		return sf, "", nil, false, fmt.Errorf("%s: %w", o.url(), err)
	}
	// The same validation as a local file's (schema, physical types, row
	// counts, every column chunk inside the data region), from the bytes
	// already read.
	pf, err := openFooter(obj, ft, pqread.Limits{})
	if err != nil {
		var se *Error
		if errors.As(err, &se) {
			err = se.Err
		}
		return sf, "", nil, false, fmt.Errorf("%s: %w", o.url(), err)
	}
	defer pf.Close()
	sf.Size, sf.FooterSHA256, sf.RowGroups = pf.Size(), pf.FooterSHA256(), pf.RowGroups()
	if withCols {
		cols = topColumns(pf.Columns())
	}
	return sf, o.etag, cols, false, nil
}

// pqreadMaxFooter is the largest footer discovery reads (as for local
// files).
const pqreadMaxFooter = 1 << 30

// footer returns the object's footer from the tail read at open (reading
// more when the footer is longer), with pqread.ReadFooter's checks and
// errors (wrapping pqread.ErrCorrupt, ErrUnsupported or ErrLimit). The
// leading "PAR1" is checked when the tail read at open covers it.
func (o *s3Object) footer(maxFooter int64) (*pqread.Footer, error) {
	const minFile = 12
	ft := &pqread.Footer{Size: o.size}
	if o.size < minFile {
		return nil, fmt.Errorf("%w: file too small: %d bytes, a Parquet file has at least %d", pqread.ErrCorrupt, o.size, minFile)
	}
	if _, err := o.ReadAt(ft.Trailer[:], o.size-trailerBytes); err != nil {
		return nil, fmt.Errorf("reading footer length: %w", err)
	}
	tail := ft.Trailer[4:]
	switch {
	case bytes.Equal(tail, []byte("PARE")):
		return nil, fmt.Errorf("%w: encrypted footer (PARE magic)", pqread.ErrUnsupported)
	case !bytes.Equal(tail, []byte("PAR1")):
		return nil, fmt.Errorf("%w: missing PAR1 magic at end of file (ends in %q; truncated?)", pqread.ErrCorrupt, tail)
	}
	if o.tailOff == 0 && !bytes.Equal(o.tail[:4], []byte("PAR1")) {
		return nil, fmt.Errorf("%w: missing PAR1 magic at start of file (starts with %q)", pqread.ErrCorrupt, o.tail[:4])
	}
	n := int64(binary.LittleEndian.Uint32(ft.Trailer[:4]))
	if n == 0 || n > o.size-minFile {
		return nil, fmt.Errorf("%w: footer length %d beyond file size %d", pqread.ErrCorrupt, n, o.size)
	}
	if maxFooter > 0 && n > maxFooter {
		return nil, fmt.Errorf("%w: footer of %d bytes exceeds the limit of %d", pqread.ErrLimit, n, maxFooter)
	}
	ft.Offset = o.size - trailerBytes - n
	ft.Meta = make([]byte, n)
	if _, err := o.ReadAt(ft.Meta, ft.Offset); err != nil {
		return nil, fmt.Errorf("reading footer: %w", err)
	}
	return ft, nil
}
