package selection

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/prepml/prep/internal/s3test"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/source"
)

// hiveLayout is the layout of the hive tests: four files of 100 rows
// (filterRow, ids continuing across files in path order).
var hiveLayout = []string{
	"date=2026-11-01/region=eu/p.parquet",
	"date=2026-11-01/region=us/p.parquet",
	"date=2026-11-02/region=eu/p.parquet",
	"date=2026-11-02/region=us/p.parquet",
}

// writeHive writes files (relative paths, 100 rows each) under a new
// directory dir/ds and returns it.
func writeHive(t *testing.T, files []string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ds")
	for i, rel := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFilterFile(t, p, 100, 100*i)
	}
	return dir
}

// discoverHive runs HiveDir and Discover over spec.
func discoverHive(t *testing.T, spec source.SourceSpec, o source.S3Options) (*Hive, plan.Source, *source.S3Client, error) {
	t.Helper()
	h, err := HiveDir(spec)
	if err != nil || h == nil {
		t.Fatalf("HiveDir(%v): %v, %v", spec.Paths, h, err)
	}
	src, c, err := h.Discover(context.Background(), spec, o)
	return h, src, c, err
}

// TestHiveDir: one local directory or one s3:// directory URL is a hive
// candidate; a file, two paths, a glob or an object key is not, and
// declaring partition types on one of those is refused (ErrHiveSource).
func TestHiveDir(t *testing.T) {
	dir := writeHive(t, hiveLayout[:1])
	for _, c := range []struct {
		paths  []string
		remote bool
		hive   bool
	}{
		{[]string{dir}, false, true},
		{[]string{"s3://bucket/ds/"}, true, true},
		{[]string{"s3://bucket"}, true, true},
		{[]string{"s3://bucket/ds"}, false, false}, // a key, not a directory
		{[]string{"s3://bucket/ds/*.parquet"}, false, false},
		{[]string{filepath.Join(dir, hiveLayout[0])}, false, false},
		{[]string{dir, dir}, false, false},
	} {
		h, err := HiveDir(source.SourceSpec{Paths: c.paths})
		if err != nil || (h != nil) != c.hive || (h != nil && h.Remote() != c.remote) {
			t.Errorf("%v: %+v, %v", c.paths, h, err)
		}
		if c.hive {
			continue
		}
		_, err = HiveDir(source.SourceSpec{Paths: c.paths, Partitions: []source.PartitionDecl{{Key: "date", Type: "date"}}})
		if !errors.Is(err, ErrHiveSource) || !strings.Contains(err.Error(), "partitions are declared (date), but the path is not one directory of key=value levels") {
			t.Errorf("%v declared: %v", c.paths, err)
		}
	}
	var nilHive *Hive
	if cols, values := nilHive.Partitions(); nilHive.PartitionKeys() != nil || cols != nil || values != nil {
		t.Error("a nil Hive has partitions")
	}
}

// TestHiveDiscoverLocal: a filter on the partition columns prunes files
// before their footers are read (the pruned partition holds a file that
// is not Parquet); the source is rooted at the directory with each path
// holding its levels, the keys are typed (date inferred DATE, region
// declared string) and each kept file's values are given in key order.
func TestHiveDiscoverLocal(t *testing.T) {
	dir := writeHive(t, hiveLayout)
	os.MkdirAll(filepath.Join(dir, "date=2026-11-03", "region=eu"), 0o755)
	os.WriteFile(filepath.Join(dir, "date=2026-11-03", "region=eu", "junk.parquet"), []byte("not parquet"), 0o644)
	spec := source.SourceSpec{Name: "ev", Paths: []string{dir}, Filter: "region = 'eu' AND date < DATE '2026-11-03' AND id >= 0",
		Partitions: []source.PartitionDecl{{Key: "region", Type: "string"}}}
	h, src, c, err := discoverHive(t, spec, source.S3Options{})
	if err != nil || c != nil {
		t.Fatalf("discover: %v (client %v)", err, c)
	}
	var paths []string
	for _, f := range src.Files {
		paths = append(paths, f.Path)
	}
	if src.Root != dir || !reflect.DeepEqual(paths, []string{hiveLayout[0], hiveLayout[2]}) {
		t.Fatalf("source root %s files %v", src.Root, paths)
	}
	if got := fmt.Sprint(h.PartitionKeys()); got != "[{date date} {region string}]" {
		t.Errorf("partition keys %s", got)
	}
	cols, values := h.Partitions()
	if len(cols) != 2 || cols[0].Type != Date || cols[1].Type != String {
		t.Fatalf("partition columns %+v", cols)
	}
	v := values(src.Root, hiveLayout[2])
	if d, _ := ParseDate("2026-11-02"); len(v) != 2 || v[0].I != d || v[1].S != "eu" {
		t.Errorf("values of %s: %+v", hiveLayout[2], v)
	}
	// Without the filter the junk file is read and refused, naming it.
	spec.Filter = ""
	_, _, _, err = discoverHive(t, spec, source.S3Options{})
	if err == nil || errors.Is(err, ErrHiveSource) || !strings.Contains(err.Error(), "junk.parquet") {
		t.Errorf("unfiltered: %v", err)
	}
}

// TestHiveDiscoverRefused: layout errors, declared types a value does not
// parse as, a filter pruning every partition and partition key conflicts
// are refused with ErrHiveSource and the message naming the file, key or
// filter, and saying which footers the conflict check read.
func TestHiveDiscoverRefused(t *testing.T) {
	idLayout := []string{"id=3/a.parquet", "id=7/b.parquet"} // every file has a column id
	for _, c := range []struct {
		files         []string
		filter, decl  string
		want          string
		wantConflict  bool
		wantNotHiveEr bool
	}{
		{[]string{"region=eu/a.parquet", "zone=us/b.parquet"}, "", "", "zone=us/b.parquet has partition keys zone, but region=eu/a.parquet has region: every file needs the same key=value levels", false, false},
		{[]string{"region=eu/a.parquet", "us/b.parquet"}, "", "", `us/b.parquet is outside the partition layout: level "us" is not key=value`, false, false},
		{[]string{"region=eu/a.parquet"}, "", "region: int", `region=eu/a.parquet: partition region=eu: "eu" is not a decimal integer (int64), as key region is declared int`, false, false},
		{[]string{"region=eu/a.parquet"}, "", "day: date", "declared partition key day is not a level of the layout (its keys: region)", false, false},
		{[]string{"a.parquet"}, "", "day: date", "partitions are declared (day), but no file under ", false, false},
		{[]string{"region=eu/a.parquet"}, "region = 'us'", "", `filter "region = 'us'" prunes every partition: nothing to draw from`, false, false},
		{[]string{"region=eu/a.parquet"}, "region = 1", "", "filter: type mismatch", false, false},
		{idLayout, "", "", "partition key conflict: id=3/a.parquet has a top-level column id and a partition level id=...; rename one (checked every file's footer: 2 files)", true, false},
		{idLayout, "id > 5", "", "partition key conflict: id=7/b.parquet has a top-level column id and a partition level id=...; rename one (checked the 1 file the filter keeps; 1 file pruned unread)", true, false},
		{idLayout, "id > 10", "", `partition key conflict: id=3/a.parquet has a top-level column id and a partition level id=...; rename one (checked the directory's first file, as the filter "id > 10" prunes every partition)`, true, false},
	} {
		dir := writeHive(t, c.files)
		spec := source.SourceSpec{Name: "ev", Paths: []string{dir}, Filter: c.filter}
		if k, ty, ok := strings.Cut(c.decl, ": "); ok {
			spec.Partitions = []source.PartitionDecl{{Key: k, Type: ty}}
		}
		_, _, _, err := discoverHive(t, spec, source.S3Options{})
		if err == nil || !errors.Is(err, ErrHiveSource) || !strings.Contains(err.Error(), c.want) || errors.Is(err, ErrPartitionConflict) != c.wantConflict {
			t.Errorf("%v %q %q: %v, want %q", c.files, c.filter, c.decl, err, c.want)
		}
	}
}

// hiveS3 is an S3 server holding a data set under s3://bucket/ds/, a proxy
// in front of it recording each request, and the options of a client
// speaking to the proxy.
type hiveS3 struct {
	bucket string
	o      source.S3Options
	mu     sync.Mutex
	reqs   []string // "METHOD /bucket/key" per request
}

// newHiveS3 uploads files (relative paths under ds/, 100 rows each, as
// writeHive) to the in-process server, or to the real one `make test-s3`
// starts (SeaweedFS), in bucket.
func newHiveS3(t *testing.T, bucket string, files []string) *hiveS3 {
	t.Helper()
	var target s3test.Target
	if ext := s3test.NewExternal(); ext != nil {
		target = ext
	} else {
		srv := s3test.NewServer()
		t.Cleanup(srv.Close)
		target = srv
	}
	if err := target.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	dir := writeHive(t, files)
	for _, rel := range files {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := target.Put(bucket, "ds/"+rel, data); err != nil {
			t.Fatal(err)
		}
	}
	px, err := s3test.NewProxy(target.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	e := &hiveS3{bucket: bucket, o: source.S3Options{Endpoint: px.URL, Config: &aws.Config{Region: s3test.Region,
		Credentials: credentials.NewStaticCredentialsProvider(target.AccessKey(), target.SecretKey(), "")}}}
	px.SetFault(func(r *http.Request, _ int64) s3test.Fault {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.reqs = append(e.reqs, r.Method+" "+r.URL.Path)
		return s3test.Pass
	})
	return e
}

// objectRequests returns the requests of each object (by path under ds/)
// and the count of the others (listings).
func (e *hiveS3) objectRequests() (map[string][]string, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	per, other := map[string][]string{}, 0
	for _, q := range e.reqs {
		method, path, _ := strings.Cut(q, " ")
		if rel, ok := strings.CutPrefix(path, "/"+e.bucket+"/ds/"); ok && rel != "" {
			per[rel] = append(per[rel], method)
			continue
		}
		other++
	}
	e.reqs = nil
	return per, other
}

// TestHiveDiscoverS3OneRequestPerObject: discovering an s3:// directory of
// hive partitions costs one GET per object discovery takes (its footer,
// from which the partition key check also reads the columns) and none of
// a pruned object, with and without a filter; a key conflict is found
// from those same requests. The partition key check used to read every
// kept object's footer again: two GETs per object.
func TestHiveDiscoverS3OneRequestPerObject(t *testing.T) {
	e := newHiveS3(t, "prep-hive-requests", hiveLayout)
	dir := "s3://" + e.bucket + "/ds/"
	wantEach := func(what string, objs []string) {
		t.Helper()
		per, _ := e.objectRequests()
		want := map[string][]string{}
		for _, o := range objs {
			want[o] = []string{http.MethodGet}
		}
		if !reflect.DeepEqual(per, want) {
			t.Errorf("%s: requests per object %v, want one GET of each of %v", what, per, objs)
		}
	}
	_, src, c, err := discoverHive(t, source.SourceSpec{Name: "ev", Paths: []string{dir}}, e.o)
	if err != nil || c == nil || src.Root != dir || len(src.Files) != 4 {
		t.Fatalf("unfiltered: %+v, %v", src, err)
	}
	wantEach("unfiltered", hiveLayout)
	_, src, _, err = discoverHive(t, source.SourceSpec{Name: "ev", Paths: []string{dir}, Filter: "region = 'eu' AND id > 3"}, e.o)
	if err != nil || len(src.Files) != 2 || src.Files[0].Path != hiveLayout[0] || src.Files[1].Path != hiveLayout[2] {
		t.Fatalf("filtered: %+v, %v", src, err)
	}
	wantEach("filtered", []string{hiveLayout[0], hiveLayout[2]})

	conflict := newHiveS3(t, "prep-hive-conflict", []string{"id=1/a.parquet", "id=2/b.parquet"})
	cdir := "s3://" + conflict.bucket + "/ds/"
	e = conflict
	for _, c := range []struct {
		filter, want string
		read         []string
	}{
		{"", "partition key conflict: id=1/a.parquet has a top-level column id and a partition level id=...; rename one (checked every file's footer: 2 files)", []string{"id=1/a.parquet", "id=2/b.parquet"}},
		{"id > 1", "partition key conflict: id=2/b.parquet has a top-level column id and a partition level id=...; rename one (checked the 1 file the filter keeps; 1 file pruned unread)", []string{"id=2/b.parquet"}},
	} {
		_, _, _, err := discoverHive(t, source.SourceSpec{Name: "ev", Paths: []string{cdir}, Filter: c.filter}, e.o)
		if !errors.Is(err, ErrPartitionConflict) || !errors.Is(err, ErrHiveSource) || err.Error() != c.want {
			t.Errorf("filter %q: %v, want %q", c.filter, err, c.want)
		}
		wantEach(fmt.Sprintf("conflict, filter %q", c.filter), c.read)
	}
}

// TestHiveDiscoverS3Refused: a layout error is refused from the listing
// alone (no object read), and a directory with no object says there is no
// input.
func TestHiveDiscoverS3Refused(t *testing.T) {
	e := newHiveS3(t, "prep-hive-refused", []string{"region=eu/a.parquet", "zone=us/b.parquet"})
	_, _, _, err := discoverHive(t, source.SourceSpec{Name: "ev", Paths: []string{"s3://" + e.bucket + "/ds/"}, Filter: "id > 1"}, e.o)
	if !errors.Is(err, ErrHiveSource) || !strings.Contains(err.Error(), "zone=us/b.parquet has partition keys zone, but region=eu/a.parquet has region") {
		t.Errorf("layout: %v", err)
	}
	if per, _ := e.objectRequests(); len(per) != 0 {
		t.Errorf("objects read for a refused layout: %v", per)
	}
	_, _, _, err = discoverHive(t, source.SourceSpec{Name: "ev", Paths: []string{"s3://" + e.bucket + "/none/"}}, e.o)
	if !errors.Is(err, source.ErrNoInput) || errors.Is(err, ErrHiveSource) {
		t.Errorf("empty directory: %v", err)
	}
}
