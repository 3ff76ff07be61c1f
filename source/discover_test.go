package source

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/internal/testutil"
	"github.com/prepml/prep/plan"
)

func caseDir(id string) string { return filepath.Join("..", "testdata", "cases", id) }

func rowGroupsOf(src plan.Source) map[string][]int64 {
	m := map[string][]int64{}
	for _, f := range append(append([]plan.SourceFile(nil), src.Files...), src.EmptyFiles...) {
		m[f.Path] = f.RowGroups
	}
	return m
}

// TestDiscoverCaseB17EmptyFiles: two files with zero rows between two with
// data give the same plan as the two non-empty files alone, and are listed.
func TestDiscoverCaseB17EmptyFiles(t *testing.T) {
	dir := caseDir("B17-empty-files")
	all, err := Discover(context.Background(), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if n := all.NumSamples(); n != 150 {
		t.Fatalf("N = %d, want 150", n)
	}
	if got := paths(all.Files); !slices.Equal(got, []string{"part-0.parquet", "part-3.parquet"}) {
		t.Errorf("files %v", got)
	}
	if got := paths(all.EmptyFiles); !slices.Equal(got, []string{"part-1.parquet", "part-2.parquet"}) {
		t.Errorf("empty files %v", got)
	}
	for _, f := range all.EmptyFiles {
		// Size is the file's, FooterSHA256 the SHA-256 of the footer with
		// its trailing length and magic.
		b, err := os.ReadFile(filepath.Join(dir, f.Path))
		if err != nil {
			t.Fatal(err)
		}
		n := int(binary.LittleEndian.Uint32(b[len(b)-8:]))
		sum := sha256.Sum256(b[len(b)-8-n:])
		if len(f.RowGroups) != 0 || f.Size != int64(len(b)) || f.FooterSHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("empty file %+v: want no row groups, size %d, footer sha256 %x", f, len(b), sum)
		}
	}
	two, err := Discover(context.Background(), []string{filepath.Join(dir, "part-3.parquet"), filepath.Join(dir, "part-0.parquet")})
	if err != nil {
		t.Fatal(err)
	}
	if all.Fingerprint() != two.Fingerprint() {
		t.Errorf("empty files change the source fingerprint")
	}
	cfg := plan.Config{Seed: 3, Epochs: 2, GlobalBatch: 16, WorldSize: 2, Workers: 2, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad}
	pa, err := plan.New(all, cfg)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := plan.New(two, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if pa.Fingerprint != pb.Fingerprint || pa.Epochs[1].Digest != pb.Epochs[1].Digest {
		t.Errorf("empty files change the plan")
	}
	if f, rg, row, err := pa.Source.Locate(120); err != nil || pa.Source.Files[f].Path != "part-3.parquet" || rg != 0 || row != 20 {
		t.Errorf("Locate(120) = %d %d %d %v", f, rg, row, err)
	}
}

func paths(fs []plan.SourceFile) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Path)
	}
	return out
}

// TestDiscoverCaseB19CorruptFiles: each broken footer fails naming the
// file and the reason; with the good file in the same run, all problems
// are reported together and no source is returned.
func TestDiscoverCaseB19CorruptFiles(t *testing.T) {
	dir := caseDir("B19-corrupt-files")
	cases := []struct{ file, reason string }{
		{"cut_last_byte.parquet", `missing PAR1 magic at end of file (ends in "\x00PAR"`},
		{"cut_half.parquet", "missing PAR1 magic at end of file"},
		{"footer_len_ffffffff.parquet", "footer length 4294967295 beyond file size 1489"},
		{"zero_bytes.parquet", "file too small: 0 bytes"},
	}
	for _, c := range cases {
		_, err := Discover(context.Background(), []string{filepath.Join(dir, c.file)})
		if err == nil {
			t.Errorf("%s: accepted", c.file)
			continue
		}
		if !errors.Is(err, ErrFooter) || !strings.Contains(err.Error(), c.file) || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: error %q, want ErrFooter naming the file and %q", c.file, err, c.reason)
		}
		var ce *Error
		if !errors.As(err, &ce) || !strings.HasSuffix(ce.File, c.file) {
			t.Errorf("%s: no *Error naming the file: %#v", c.file, err)
		}
	}
	// The damaged page header is past the footer: discovery accepts the file
	// (convert reports it).
	src, err := Discover(context.Background(), []string{filepath.Join(dir, "bad_page_header_rg1_x.parquet")})
	if err != nil || !slices.Equal(src.Files[0].RowGroups, []int64{10, 10, 10}) {
		t.Errorf("bad page header file: %v %+v", err, src.Files)
	}
	// The whole folder: every broken footer reported at once.
	_, err = Discover(context.Background(), []string{dir})
	if err == nil {
		t.Fatal("folder with broken files accepted")
	}
	for _, c := range cases {
		if !strings.Contains(err.Error(), c.file) {
			t.Errorf("joined error does not name %s: %v", c.file, err)
		}
	}
	good, err := Discover(context.Background(), []string{filepath.Join(dir, "good.parquet")})
	if err != nil {
		t.Fatal(err)
	}
	f := good.Files[0]
	if f.Path != "good.parquet" || f.Size != 1489 || !slices.Equal(f.RowGroups, []int64{10, 10, 10}) || good.Root != mustAbs(t, dir) {
		t.Errorf("good.parquet: %+v root %s", f, good.Root)
	}
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestDiscoverCaseB27AndB29RowGroups checks row-group counts read from the
// footers against case.json.
func TestDiscoverCaseB27AndB29RowGroups(t *testing.T) {
	src, err := Discover(context.Background(), []string{filepath.Join(caseDir("B27-ranks-coverage"), "part-*.parquet")})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int64{"part-0.parquet": {16, 16, 8}, "part-1.parquet": {16, 16, 8}, "part-2.parquet": {16, 7}}
	if got := rowGroupsOf(src); fmt.Sprint(got) != fmt.Sprint(want) || src.NumSamples() != 103 {
		t.Errorf("B27 row groups %v, N %d", got, src.NumSamples())
	}
	src, err = Discover(context.Background(), []string{caseDir("B29-order-stability")})
	if err != nil {
		t.Fatal(err)
	}
	if src.NumSamples() != 1000 || len(src.Files) != 4 || !slices.Equal(src.Files[3].RowGroups, []int64{64, 64, 64, 58}) {
		t.Errorf("B29: N %d files %+v", src.NumSamples(), src.Files)
	}
}

// TestDiscoverFingerprintIgnoresMountAndOrder copies a data set to two
// places, lists it in different orders and by dir, glob or file, and
// expects one fingerprint.
func TestDiscoverFingerprintIgnoresMountAndOrder(t *testing.T) {
	var fps []string
	for i, layout := range []string{"a", "b/c"} {
		root := filepath.Join(t.TempDir(), layout)
		for _, name := range []string{"part-0.parquet", "part-1.parquet", "part-2.parquet"} {
			copyFile(t, filepath.Join(caseDir("B27-ranks-coverage"), name), filepath.Join(root, "data", name))
		}
		os.WriteFile(filepath.Join(root, "data", "_SUCCESS"), nil, 0o644)
		os.MkdirAll(filepath.Join(root, "data", "_temporary"), 0o755)
		copyFile(t, filepath.Join(caseDir("B27-ranks-coverage"), "five.parquet"), filepath.Join(root, "data", "_temporary", "x.parquet"))
		os.Chtimes(filepath.Join(root, "data", "part-1.parquet"), time.Unix(int64(i), 0), time.Unix(int64(i), 0))
		d := filepath.Join(root, "data")
		for _, args := range [][]string{
			{d},
			{filepath.Join(d, "*.parquet")},
			{filepath.Join(d, "part-2.parquet"), filepath.Join(d, "part-0.parquet"), filepath.Join(d, "part-1.parquet")},
			{d, filepath.Join(d, "part-1.parquet")},
		} {
			src, err := Discover(context.Background(), args)
			if err != nil {
				t.Fatal(err)
			}
			if src.Root != d || len(src.Files) != 3 || src.Files[0].Path != "part-0.parquet" {
				t.Fatalf("%v: root %s files %v", args, src.Root, paths(src.Files))
			}
			fps = append(fps, src.Fingerprint())
		}
	}
	for _, fp := range fps {
		if fp != fps[0] {
			t.Fatalf("fingerprints differ: %v", fps)
		}
	}
	if _, err := Discover(context.Background(), []string{filepath.Join(t.TempDir(), "*.parquet")}); !errors.Is(err, ErrNoInput) {
		t.Errorf("empty glob: %v, want ErrNoInput", err)
	}
	if _, err := Discover(context.Background(), []string{t.TempDir()}); !errors.Is(err, ErrNoInput) {
		t.Errorf("empty dir: %v, want ErrNoInput", err)
	}
	if _, err := Discover(context.Background(), []string{"/nonexistent/x.parquet"}); err == nil || !strings.Contains(err.Error(), "/nonexistent/x.parquet") {
		t.Errorf("missing file: %v", err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDiscoverCaseB26ManySmallFiles builds 5,000 files of 3 rows each in
// part=K/ folders and discovers them under an open-file limit of 256,
// sampling the number of open descriptors meanwhile.
func TestDiscoverCaseB26ManySmallFiles(t *testing.T) {
	nFiles := 5000
	if testing.Short() {
		nFiles = 500
	}
	file := pqfixture.New().Int64("id", 0, 5000, 10000).Bytes(t)
	root := t.TempDir()
	for k := 0; k < nFiles; k++ {
		d := filepath.Join(root, fmt.Sprintf("part=%d", k))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "data_0.parquet"), file, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	testutil.LowerFDLimit(t, 256)

	base := countFDs()
	var peak atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if n := int64(countFDs()); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	src, err := Discover(context.Background(), []string{root})
	close(stop)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if len(src.Files) != nFiles || src.NumSamples() != uint64(3*nFiles) {
		t.Fatalf("%d files, N %d", len(src.Files), src.NumSamples())
	}
	if extra := peak.Load() - int64(base); extra > discoverParallel+4 {
		t.Errorf("up to %d descriptors open beyond the %d at start", extra, base)
	}
	// Sorted by path byte-wise: part=0, part=1, part=10, ...
	if src.Files[2].Path != "part=10/data_0.parquet" {
		t.Errorf("third file %s", src.Files[2].Path)
	}
}

func countFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}

// BenchmarkDiscoverSource10k reads the footers of 10,000 small files (the
// work of prep plan before the plan is derived).
func BenchmarkDiscoverSource10k(b *testing.B) {
	good, err := os.ReadFile(filepath.Join(caseDir("B29-order-stability"), "part-0.parquet"))
	if err != nil {
		b.Fatal(err)
	}
	root := b.TempDir()
	for k := 0; k < 10000; k++ {
		d := filepath.Join(root, fmt.Sprintf("d%03d", k/100))
		os.MkdirAll(d, 0o755)
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("part-%05d.parquet", k)), good, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		src, err := Discover(context.Background(), []string{root})
		if err != nil || len(src.Files) != 10000 {
			b.Fatal(err, len(src.Files))
		}
	}
	b.ReportMetric(float64(b.N)*10000/b.Elapsed().Seconds(), "files/s")
}

// nestedRow has top-level columns a, s (a struct of two leaves) and d (a
// list: one leaf, d.list.element).
type nestedRow struct {
	A int64 `parquet:"a"`
	S struct {
		B int32 `parquet:"b"`
		C int32 `parquet:"c"`
	} `parquet:"s"`
	D []int32 `parquet:"d,list"`
}

// TestDiscoverWhereTopColumns: DiscoverWhere returns the top-level columns
// of each file it takes, by path relative to the source root (a file with
// zero rows included, a pruned one absent): a struct's and a list's
// leaves give their top-level name once, in schema order.
func TestDiscoverWhereTopColumns(t *testing.T) {
	dir := t.TempDir()
	write := func(rel string, rows int) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		os.MkdirAll(filepath.Dir(p), 0o755)
		pqfixture.Of(make([]nestedRow, rows)...).WriteFile(t, p)
	}
	write("k=1/a.parquet", 3)
	write("k=2/b.parquet", 0)
	os.MkdirAll(filepath.Join(dir, "k=3"), 0o755)
	os.WriteFile(filepath.Join(dir, "k=3", "junk.parquet"), []byte("not parquet"), 0o644)
	src, cols, err := DiscoverWhere(context.Background(), []string{dir}, func(files []string) ([]bool, error) {
		keep := make([]bool, len(files))
		for i, f := range files {
			keep[i] = !strings.Contains(f, "k=3")
		}
		return keep, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := TopColumns{"k=1/a.parquet": {"a", "s", "d"}, "k=2/b.parquet": {"a", "s", "d"}}
	if len(src.Files) != 1 || len(src.EmptyFiles) != 1 || fmt.Sprint(cols) != fmt.Sprint(want) {
		t.Fatalf("source %+v, columns %v; want %v", src, cols, want)
	}
}

// TestDiscoverPaths: local paths are discovered locally (no client);
// mixed paths, a URL with credentials and a client that cannot be made are
// refused before any request with their sentinels; s3:// URLs are
// discovered through a new client that is returned, also when nothing is
// found (fs.ErrNotExist and ErrNoInput).
func TestDiscoverPaths(t *testing.T) {
	e := newS3Env(t, S3Options{})
	e.put(t, "d/a.parquet", rowsParquet(t, 5, 1))
	ctx := context.Background()
	b27 := caseDir("B27-ranks-coverage")
	local, c, err := DiscoverPaths(ctx, []string{b27}, e.options())
	if want, _ := Discover(ctx, []string{b27}); err != nil || c != nil || local.Fingerprint() != want.Fingerprint() {
		t.Fatalf("local: %v, client %v", err, c)
	}
	for _, tc := range []struct {
		paths []string
		o     S3Options
		want  []error
	}{
		{[]string{b27, "s3://data/d/"}, e.options(), []error{ErrMixedRoots}},
		{[]string{"s3://AKIAX:hunter2secret@data/d/"}, e.options(), []error{ErrCredentialURL}},
		{[]string{"s3://data/d/", "s3://x/d?y=1"}, e.options(), []error{ErrBadURL}},
		{[]string{"s3://data/d/"}, S3Options{Config: e.c.o.Config, Endpoint: "ftp://127.0.0.1:1"}, []error{ErrClientConfig, ErrBadURL}},
	} {
		_, c, err := DiscoverPaths(ctx, tc.paths, tc.o)
		for _, w := range tc.want {
			if !errors.Is(err, w) || c != nil || strings.Contains(fmt.Sprint(err), "hunter2secret") {
				t.Errorf("%v: %v (client %v), want %v", tc.paths, err, c, w)
			}
		}
	}
	if n := e.srv.Counts(); n.Gets+n.Lists+n.Heads != 0 {
		t.Fatalf("requests before refusing: %+v", n)
	}
	src, c, err := DiscoverPaths(ctx, []string{"s3://data/d/"}, e.options())
	if err != nil || c == nil || src.Root != "s3://data/d/" || len(src.Files) != 1 || c.Stats().Requests != 2 {
		t.Fatalf("s3: %+v, %v (client %v)", src, err, c)
	}
	_, c, err = DiscoverPaths(ctx, []string{"s3://data/none/"}, e.options())
	if !errors.Is(err, ErrNoInput) || !errors.Is(err, fs.ErrNotExist) || c == nil {
		t.Fatalf("nothing found: %v (client %v)", err, c)
	}
}

// magicLayout is a directory as Spark, Hive, Impala and hand-made jobs
// leave one: Parquet files under several names (rows given), files that
// are not Parquet (rows -1: reported as skipped), and entries ignored
// without a report (rows 0: hidden, markers, _temporary/, .crc).
var magicLayout = []struct {
	name string
	rows int
}{
	{"a.parquet", 5}, {"b.PARQUET", 6}, {"c.pq", 7}, {"000000_0", 8}, {"sub/5a4b_data.0.parq", 9},
	{"README.md", -1}, {"sub/notes.json", -1}, {"sub/empty", -1},
	{"_SUCCESS", 0}, {".a.parquet.crc", 0}, {"part-0.crc", 0}, {"_temporary/0/x.parquet", 0}, {".hidden/y", 0},
}

// magicBytes is the content of a magicLayout entry: a Parquet file of its
// rows, or text (one entry empty) for the rest.
func magicBytes(t testing.TB, i int) []byte {
	switch e := magicLayout[i]; {
	case e.rows > 0:
		return rowsParquet(t, e.rows, int64(i))
	case e.name == "sub/empty":
		return nil
	case e.rows < 0:
		return []byte("not parquet, though it ends in PAR")
	}
	return []byte("PAR1 marker or checksum")
}

// TestDiscoverTakesParquetByMagic: a directory walk takes every regular
// non-hidden file named *.parquet or ending in the PAR1 magic (c.pq,
// Hive's 000000_0, Impala's *_data.0.parq), reports the other regular
// files in Source.Skipped and ignores hidden, _-prefixed and .crc
// entries; with no Parquet file at all the error says how many files were
// present and names them.
func TestDiscoverTakesParquetByMagic(t *testing.T) {
	dir := t.TempDir()
	wantRows := map[string]int64{}
	var wantSkipped []string
	for i, e := range magicLayout {
		p := filepath.Join(dir, filepath.FromSlash(e.name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, magicBytes(t, i), 0o644); err != nil {
			t.Fatal(err)
		}
		switch {
		case e.rows > 0:
			wantRows[e.name] = int64(e.rows)
		case e.rows < 0:
			wantSkipped = append(wantSkipped, p)
		}
	}
	slices.Sort(wantSkipped)
	src, err := Discover(context.Background(), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, f := range src.Files {
		got[f.Path] = int64(f.Rows())
	}
	if fmt.Sprint(got) != fmt.Sprint(wantRows) || !slices.Equal(src.Skipped, wantSkipped) {
		t.Errorf("files %v, skipped %v\nwant %v, %v", got, src.Skipped, wantRows, wantSkipped)
	}
	// Only non-Parquet files: the error counts and names them.
	only := t.TempDir()
	for _, n := range []string{"000000_0.txt", "notes", "_SUCCESS"} {
		os.WriteFile(filepath.Join(only, n), []byte("text"), 0o644)
	}
	_, err = Discover(context.Background(), []string{only})
	want := fmt.Sprintf("%s: 2 files present, none Parquet (not named *.parquet, and not ending in the PAR1 magic): %s, %s: no parquet files found", only, filepath.Join(only, "000000_0.txt"), filepath.Join(only, "notes"))
	if !errors.Is(err, ErrNoInput) || err.Error() != want {
		t.Errorf("only text: %v\nwant %s", err, want)
	}
}
