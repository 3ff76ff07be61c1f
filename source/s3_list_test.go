package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/pqread"
)

type listRow struct {
	ID int64   `parquet:"id"`
	X  float32 `parquet:"x"`
}

// rowsParquet returns a real Parquet file of rows rows (row groups of 10).
func rowsParquet(t testing.TB, rows int, seed int64) []byte {
	t.Helper()
	rs := make([]listRow, rows)
	for i := range rs {
		rs[i] = listRow{ID: seed*1000 + int64(i), X: float32(i) / 3}
	}
	return pqfixture.Of(rs...).RowGroupRows(10).Bytes(t)
}

func keys(es []S3Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Key)
	}
	return out
}

func TestListForms(t *testing.T) {
	e := newS3Env(t, S3Options{})
	for _, k := range []string{
		"t/a.parquet", "t/b.PARQUET", "t/_SUCCESS", "t/notes.txt", "t/_temporary/x.parquet", "t/.hidden.parquet",
		"t/day=1/c.parquet", "t/day=2/d.parquet", "t/day=2/e.json", "u/f.parquet", "tt/g.parquet",
	} {
		e.put(t, k, []byte("x"))
	}
	for _, tc := range []struct {
		src  string
		want []string
	}{
		// A directory lists every object but hidden, _-prefixed and .crc
		// ones; DiscoverS3 then decides which are Parquet.
		{"s3://data/t/", []string{"t/a.parquet", "t/b.PARQUET", "t/day=1/c.parquet", "t/day=2/d.parquet", "t/day=2/e.json", "t/notes.txt"}},
		{"s3://data/t", []string{"t/a.parquet", "t/b.PARQUET", "t/day=1/c.parquet", "t/day=2/d.parquet", "t/day=2/e.json", "t/notes.txt"}},
		{"s3://data/t/a.parquet", []string{"t/a.parquet"}},
		{"s3://data/t/notes.txt", []string{"t/notes.txt"}},
		{"s3://data/t/day=*/*.parquet", []string{"t/day=1/c.parquet", "t/day=2/d.parquet"}},
		{"s3://data/t/day=*", []string{"t/day=1/c.parquet", "t/day=2/d.parquet", "t/day=2/e.json"}},
		// A glob takes what it matches, as filepath.Glob does locally.
		{"s3://data/t/*.parquet", []string{"t/.hidden.parquet", "t/a.parquet"}},
		{"s3://data/", []string{"t/a.parquet", "t/b.PARQUET", "t/day=1/c.parquet", "t/day=2/d.parquet", "t/day=2/e.json", "t/notes.txt", "tt/g.parquet", "u/f.parquet"}},
	} {
		got, err := e.c.List(context.Background(), tc.src)
		if err != nil {
			t.Errorf("%s: %v", tc.src, err)
			continue
		}
		if !reflect.DeepEqual(keys(got), tc.want) {
			t.Errorf("%s: %v, want %v", tc.src, keys(got), tc.want)
		}
	}
	for _, src := range []string{"s3://data/nothing/", "s3://data/t/z*.parquet", "s3://data/t/none.parquet"} {
		if _, err := e.c.List(context.Background(), src); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: error %v, want fs.ErrNotExist", src, err)
		}
	}
	if _, err := e.c.List(context.Background(), "s3://nobucket/"); !errors.Is(err, ErrNoBucket) {
		t.Errorf("no bucket: error %v", err)
	}
	e.srv.Deny("data/u/")
	if _, err := e.c.List(context.Background(), "s3://data/u/"); !errors.Is(err, ErrAccessDenied) {
		t.Errorf("denied: error %v", err)
	}
}

// TestDiscoverS3MatchesLocal: the S3 discovery of files gives the same
// plan source files (path, size, footer hash, row groups) as reading local
// copies, at one request per file plus the listing.
func TestDiscoverS3MatchesLocal(t *testing.T) {
	e := newS3Env(t, S3Options{})
	dir := t.TempDir()
	const n = 40
	e.files = map[string][]byte{}
	for i := range n {
		data := rowsParquet(t, 5+i%23, int64(i))
		key := fmt.Sprintf("ds/part=%d/f-%02d.parquet", i%3, i)
		e.files[key[len("ds/"):]] = data
		e.put(t, key, data)
		p := filepath.Join(dir, filepath.FromSlash(key[len("ds/"):]))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := e.c.DiscoverS3(context.Background(), []string{"s3://data/ds/"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Root != "s3://data/ds/" || len(got.Files) != n {
		t.Fatalf("root %s, %d files", got.Root, len(got.Files))
	}
	for _, f := range got.Files {
		if want := `"` + md5hex(e.files[f.Path]) + `"`; f.ETag != want {
			t.Errorf("%s: etag %s, want %s", f.Path, f.ETag, want)
		}
		fd, err := os.Open(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil {
			t.Fatal(err)
		}
		ft, err := pqread.ReadFooter(fd, 0)
		fd.Close()
		if err != nil {
			t.Fatal(err)
		}
		rgs, _ := ft.RowGroupRows()
		if f.Size != ft.Size || f.FooterSHA256 != ft.SHA256() || !reflect.DeepEqual(f.RowGroups, rgs) {
			t.Errorf("%s: S3 %d %s %v, local %d %s %v", f.Path, f.Size, f.FooterSHA256, f.RowGroups, ft.Size, ft.SHA256(), rgs)
		}
	}
	c := e.srv.Counts()
	if c.Lists != 1 || c.Gets != n {
		t.Fatalf("counts %+v, want 1 LIST and %d GETs", c, n)
	}
}

func TestDiscoverS3ReportsBadFiles(t *testing.T) {
	e := newS3Env(t, S3Options{})
	e.put(t, "m/good.parquet", rowsParquet(t, 3, 1))
	e.put(t, "m/short.parquet", []byte("PAR1"))
	e.put(t, "m/nomagic.parquet", bytes.Repeat([]byte{7}, 100))
	_, err := e.c.DiscoverS3(context.Background(), []string{"s3://data/m/"})
	if !errors.Is(err, pqread.ErrCorrupt) {
		t.Fatalf("error %v, want ErrCorrupt", err)
	}
	msg := err.Error()
	for _, sub := range []string{"s3://data/m/nomagic.parquet: corrupt parquet data: missing PAR1 magic at end of file", "s3://data/m/short.parquet: corrupt parquet data: file too small: 4 bytes"} {
		if !bytes.Contains([]byte(msg), []byte(sub)) {
			t.Errorf("error %q lacks %q", msg, sub)
		}
	}
}

// TestDiscoverS3RefusesFootersConvertRefuses pins the gap where discovery
// over an object store checked only a footer's tail: the footers plan once
// accepted and convert refuses (an unknown physical type, a column chunk
// outside the data region, a schema nested too deep, more rows than the
// object can hold) are refused from S3 as from a local copy, naming the
// object, and a good object beside them is not reported.
func TestDiscoverS3RefusesFootersConvertRefuses(t *testing.T) {
	good := smallParquet(t)
	deep := func(fm *format.FileMetaData) {
		leaf := fm.Schema[1]
		fm.Schema = fm.Schema[:1]
		fm.Schema[0].NumChildren = thrift.New[int32](1)
		for i := 0; i < 100; i++ {
			fm.Schema = append(fm.Schema, format.SchemaElement{Name: "g", RepetitionType: thrift.New(format.Optional), NumChildren: thrift.New[int32](1)})
		}
		fm.Schema = append(fm.Schema, leaf)
	}
	bad := map[string]func(*format.FileMetaData){
		"type.parquet": func(fm *format.FileMetaData) {
			fm.Schema[1].Type = thrift.New(format.Type(-7))
			fm.RowGroups[0].Columns[0].MetaData.Type = format.Type(-7)
		},
		"range.parquet": func(fm *format.FileMetaData) {
			fm.RowGroups[0].Columns[0].MetaData.DataPageOffset = 1 << 40
			fm.RowGroups[0].Columns[0].MetaData.DictionaryPageOffset = 0
		},
		"deep.parquet": deep,
		"rows.parquet": func(fm *format.FileMetaData) { fm.NumRows, fm.RowGroups[0].NumRows = 1<<62, 1<<62 },
	}
	e := newS3Env(t, S3Options{})
	e.put(t, "v/good.parquet", good)
	for name, edit := range bad {
		e.put(t, "v/"+name, rewriteFooter(t, good, edit))
	}
	_, err := e.c.DiscoverS3(context.Background(), []string{"s3://data/v/"})
	if !errors.Is(err, ErrFooter) {
		t.Fatalf("error %v, want ErrFooter", err)
	}
	msg := err.Error()
	for name := range bad {
		if !strings.Contains(msg, "s3://data/v/"+name+": ") {
			t.Errorf("error %q does not report %s", msg, name)
		}
	}
	if strings.Contains(msg, "good.parquet") {
		t.Errorf("error %q reports the good object", msg)
	}
}

// TestDiscoverS3WhereKeeps: keep sees every listed object's URL, sorted;
// the objects it drops are never requested (one LIST, one GET per kept
// object) and are not in the source; dropping all is fs.ErrNotExist; an
// error of keep is returned as is. The top-level columns of each kept
// object come back with the source, from the same GET; with keep nil every
// object is taken, with its columns, at one GET each.
func TestDiscoverS3WhereKeeps(t *testing.T) {
	e := newS3Env(t, S3Options{})
	for i := range 6 {
		e.put(t, fmt.Sprintf("h/k=%d/f.parquet", i), rowsParquet(t, 3+i, int64(i)))
	}
	var seen []string
	src, cols, err := e.c.DiscoverS3Where(context.Background(), []string{"s3://data/h/"}, func(urls []string) ([]bool, error) {
		seen = urls
		keep := make([]bool, len(urls))
		keep[1], keep[4] = true, true
		return keep, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"s3://data/h/k=0/f.parquet", "s3://data/h/k=1/f.parquet", "s3://data/h/k=2/f.parquet", "s3://data/h/k=3/f.parquet", "s3://data/h/k=4/f.parquet", "s3://data/h/k=5/f.parquet"}
	if !reflect.DeepEqual(seen, want) {
		t.Errorf("keep saw %v", seen)
	}
	if src.Root != "s3://data/h/" || len(src.Files) != 2 || src.Files[0].Path != "k=1/f.parquet" || src.Files[1].Path != "k=4/f.parquet" || src.Files[1].Rows() != 7 {
		t.Errorf("source %+v", src)
	}
	if c := e.srv.Counts(); c.Lists != 1 || c.Gets != 2 {
		t.Errorf("counts %+v, want 1 LIST and 2 GETs", c)
	}
	if want := (TopColumns{"k=1/f.parquet": {"id", "x"}, "k=4/f.parquet": {"id", "x"}}); !reflect.DeepEqual(cols, want) {
		t.Errorf("columns %v, want %v", cols, want)
	}
	all, cols, err := e.c.DiscoverS3Where(context.Background(), []string{"s3://data/h/"}, nil)
	if err != nil || len(all.Files) != 6 || len(cols) != 6 || !reflect.DeepEqual(cols["k=5/f.parquet"], []string{"id", "x"}) {
		t.Errorf("keep nil: %d files, columns %v, %v", len(all.Files), cols, err)
	}
	if c := e.srv.Counts(); c.Lists != 2 || c.Gets != 2+6 {
		t.Errorf("counts %+v, want 2 LISTs and 8 GETs", c)
	}
	_, _, err = e.c.DiscoverS3Where(context.Background(), []string{"s3://data/h/"}, func(urls []string) ([]bool, error) { return make([]bool, len(urls)), nil })
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "every object pruned by the filter") {
		t.Errorf("all dropped: %v", err)
	}
	bad := errors.New("no")
	if _, _, err = e.c.DiscoverS3Where(context.Background(), []string{"s3://data/h/"}, func([]string) ([]bool, error) { return nil, bad }); err != bad {
		t.Errorf("keep's error: %v", err)
	}
}

// TestDiscoverS3TakesParquetByMagic: an s3:// directory is discovered as a
// local walk of the same layout (magicLayout): the objects not named
// *.parquet cost no more than their one tail GET, which is the magic
// check; the non-Parquet ones are reported in Source.Skipped. With a keep
// function (hive pruning), the objects not named *.parquet are checked
// before keep sees the listing, so it never sees a non-Parquet object.
func TestDiscoverS3TakesParquetByMagic(t *testing.T) {
	e := newS3Env(t, S3Options{})
	dir := t.TempDir()
	listed := 0
	for i, m := range magicLayout {
		e.put(t, "m/"+m.name, magicBytes(t, i))
		p := filepath.Join(dir, filepath.FromSlash(m.name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, magicBytes(t, i), 0o644)
		if m.rows != 0 {
			listed++
		}
	}
	local, err := Discover(context.Background(), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	src, err := e.c.DiscoverS3(context.Background(), []string{"s3://data/m/"})
	if err != nil {
		t.Fatal(err)
	}
	if src.Fingerprint() != local.Fingerprint() || len(src.Skipped) != len(local.Skipped) {
		t.Errorf("s3 %+v\nlocal %+v", src, local)
	}
	for i, s := range src.Skipped {
		if want := "s3://data/m/" + filepath.ToSlash(strings.TrimPrefix(local.Skipped[i], dir+string(filepath.Separator))); s != want {
			t.Errorf("skipped %s, want %s", s, want)
		}
	}
	if c := e.srv.Counts(); c.Lists != 1 || c.Gets != int64(listed) {
		t.Errorf("counts %+v, want 1 LIST and %d GETs (one per listed object)", c, listed)
	}
	var seen []string
	src, _, err = e.c.DiscoverS3Where(context.Background(), []string{"s3://data/m/"}, func(urls []string) ([]bool, error) {
		seen = urls
		keep := make([]bool, len(urls))
		for i := range keep {
			keep[i] = true
		}
		return keep, nil
	})
	if err != nil || src.Fingerprint() != local.Fingerprint() || len(seen) != len(local.Files) || len(src.Skipped) != len(local.Skipped) {
		t.Errorf("with keep: %v saw %v, %+v", err, seen, src)
	}
	e.put(t, "t/notes.txt", []byte("text"))
	_, err = e.c.DiscoverS3(context.Background(), []string{"s3://data/t/"})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "s3://data/t/: 1 files present, none Parquet (not named *.parquet, and not ending in the PAR1 magic): s3://data/t/notes.txt") {
		t.Errorf("only text: %v", err)
	}
	// Named, not walked: taken whatever its name, so its footer is refused.
	if _, err = e.c.DiscoverS3(context.Background(), []string{"s3://data/t/notes.txt"}); !errors.Is(err, pqread.ErrCorrupt) {
		t.Errorf("named text object: %v", err)
	}
}
