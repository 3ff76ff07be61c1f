package source

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/prepml/prep/plan"
)

// TestParseSourcesFile reads the documented example exactly: names, paths
// (a string or a list), weights as written, filters, declared partition
// types in the order written, epoch samples.
func TestParseSourcesFile(t *testing.T) {
	sf, err := ParseSourcesFile("s.yaml", []byte(`sources:
  - name: web
    path: s3://corpus/web/
    weight: 0.7
    filter: "lang = 'en' AND quality >= 0.5"
  - name: code
    path: [s3://corpus/code/a/, "s3://corpus/code/b/*.parquet"]
    weight: 0.30
  - name: math
    path: s3://corpus/math/
    partitions:
      date: date
      shard: int
      region: string
epoch_samples: 10000000
`))
	if err != nil {
		t.Fatal(err)
	}
	want := &SourcesFile{Path: "s.yaml", EpochSamples: 10000000, Sources: []SourceSpec{
		{Name: "web", Paths: []string{"s3://corpus/web/"}, Weight: "0.7", Filter: "lang = 'en' AND quality >= 0.5", Line: 2},
		{Name: "code", Paths: []string{"s3://corpus/code/a/", "s3://corpus/code/b/*.parquet"}, Weight: "0.30", Line: 6},
		{Name: "math", Paths: []string{"s3://corpus/math/"}, Line: 9, Partitions: []PartitionDecl{{"date", "date", 12}, {"shard", "int", 13}, {"region", "string", 14}}},
	}}
	if !reflect.DeepEqual(sf, want) {
		t.Errorf("got %+v\nwant %+v", sf, want)
	}
}

// TestParseSourcesFilePacking reads a packing block: every option as
// written, and the defaults (split chunk, scope across, pad 0, no EOD,
// the default window) when only column and length are given.
func TestParseSourcesFilePacking(t *testing.T) {
	head := "sources:\n  - name: a\n    path: x/\n"
	sf, err := ParseSourcesFile("s.yaml", []byte(head+"packing:\n  column: tokens\n  length: 2048\n  split: none\n  eod: 2\n  pad: -1\n  window: 64\n  scope: per_source\n"))
	if err != nil {
		t.Fatal(err)
	}
	eod := int64(2)
	want := &plan.PackOptions{Column: "tokens", Length: 2048, Split: plan.SplitNone, EOD: &eod, Pad: -1, Window: 64, Scope: plan.ScopePerSource}
	if !reflect.DeepEqual(sf.Packing, want) {
		t.Errorf("got %+v, want %+v", sf.Packing, want)
	}
	sf, err = ParseSourcesFile("s.yaml", []byte(head+"packing: {column: tokens, length: 512}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want = &plan.PackOptions{Column: "tokens", Length: 512, Split: plan.SplitChunk, Window: plan.DefaultPackWindow, Scope: plan.ScopeAcross}
	if !reflect.DeepEqual(sf.Packing, want) {
		t.Errorf("defaults: got %+v, want %+v", sf.Packing, want)
	}
	if sf, err = ParseSourcesFile("s.yaml", []byte(head)); err != nil || sf.Packing != nil {
		t.Errorf("no packing block: %+v %v", sf, err)
	}
	for _, c := range []struct{ yaml, want string }{
		{"packing:\n  column: tokens\n", "s.yaml:5: packing: no length"},
		{"packing:\n  column: tokens\n  length: 0\n", "s.yaml:6: packing: length 0 not in [1, 16777216]"},
		{"packing:\n  column: tokens\n  length: 2k\n", `s.yaml:6: packing: length "2k" is not a whole number`},
		{"packing:\n  column: tokens\n  length: 8\n  window: 0\n", "s.yaml:7: packing: window 0 not in"},
		{"packing:\n  column: tokens\n  length: 8\n  eod: x\n", `s.yaml:7: packing: eod "x"`},
		{"packing:\n  column: tokens\n  length: 8\n  split: cut\n", `unknown split "cut"`},
		{"packing:\n  column: tokens\n  length: 8\n  scope: mixed\n", `unknown scope "mixed"`},
		{"packing:\n  length: 8\n", "no token column"},
		{"packing:\n  column: tokens\n  lenght: 8\n", `s.yaml:6: unknown key "lenght" in packing (keys: column, length, split, eod, pad, window, scope)`},
		{"packing: tokens\n", "packing must be a mapping"},
	} {
		_, err := ParseSourcesFile("s.yaml", []byte(head+c.yaml))
		if !errors.Is(err, ErrSourcesFile) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want ErrSourcesFile with %q", c.yaml, err, c.want)
		}
	}
}

// TestParseSourcesFileRelativePaths: a relative path (file, directory or
// glob) is joined to the sources file's directory, whatever the working
// directory; absolute paths and s3:// URLs are kept as written.
func TestParseSourcesFileRelativePaths(t *testing.T) {
	sf, err := ParseSourcesFile(filepath.Join("conf", "mix", "s.yaml"), []byte("sources:\n  - name: a\n    path: [a.parquet, ../data/, 'parts/*.parquet', /abs/x.parquet]\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join("conf", "mix", "a.parquet"), filepath.Join("conf", "data"), filepath.Join("conf", "mix", "parts", "*.parquet"), "/abs/x.parquet"}
	if got := sf.Sources[0].Paths; !reflect.DeepEqual(got, want) {
		t.Errorf("paths %q, want %q", got, want)
	}
	sf, err = ParseSourcesFile("/etc/prep/s.yaml", []byte("sources:\n  - name: a\n    path: s3://b/x/\n  - name: c\n    path: s3://b/y/\n"))
	if err != nil || sf.Sources[0].Paths[0] != "s3://b/x/" {
		t.Errorf("s3 path: %v %v", sf, err)
	}
}

// TestParseSourcesFileRefused: every bad sources file is refused naming
// the file, line, source and what is wrong.
func TestParseSourcesFileRefused(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"sources:\n  - name: a\n    path: x/\n    weight: 0\n", "s.yaml:4: source a: weight 0 must be greater than 0"},
		{"sources:\n  - name: a\n    path: x/\n    weight: -1\n", "s.yaml:4: source a: weight -1 must be greater than 0"},
		{"sources:\n  - name: a\n    path: x/\n    weight: -0.5\n", "s.yaml:4: source a: weight -0.5 must be greater than 0"},
		{"sources:\n  - name: a\n    path: x/\n    weight: lots\n", `weight "lots"`},
		{"sources:\n  - name: a\n    path: x/\n  - name: a\n    path: y/\n", "s.yaml:4: source a is given twice (first at line 2)"},
		{"sources:\n  - name: a\n", "s.yaml:2: source a has no path"},
		{"sources:\n  - path: x/\n", "s.yaml:2: source 0 has no name"},
		{"sources:\n  - name: a b\n    path: x/\n", "source a b: the name must be"},
		{"sources:\n  - name: a\n    paths: x/\n", `s.yaml:3: unknown key "paths" in a source (keys: name, path, weight, filter, partitions): bad sources file`},
		{"sources:\n  - name: a\n    path: x/\n    partitions:\n      day: datetime\n", `s.yaml:5: source a: partition key day: type "datetime": want int, date, timestamp or string`},
		{"sources:\n  - name: a\n    path: x/\n    partitions: [day]\n", `s.yaml:4: source a: partitions must map each key to its type`},
		{"sources:\n  - name: a\n    path: x/\n    partitions:\n      day: date\n      day: int\n", `source a: partition key day is declared twice (first at line 5)`},
		{"sources:\n  - name: a\n    path: x/\n    partitions:\n      a=b: int\n", `s.yaml:5: source a: partition key "a=b"`},
		{"sources: []\n", "no sources"},
		{"sources:\n  - name: a\n    path: x/\nepoch_samples: 0\n", `s.yaml:4: epoch_samples "0" must be a whole number`},
		{"sources:\n  - name: a\n    path: x/\n  - name: b\n    path: s3://b/x/\n", "cannot be mixed"},
		{"sources:\n  - name: a\n    path: {x: 1}\n", "path must be a string or a list"},
		{"sources:\n  - name: a\n    path: x/\n    filter: \"\"\n", `s.yaml:4: source a: filter is empty: give a row filter ("lang = 'en'"), or leave the key out to take every row`},
		{"sources:\n  - name: a\n    path: x/\n  - name: b\n    path: y/\n    filter: \" \\t \"\n", `s.yaml:6: source b: filter is empty`},
		{"sources:\n  - name: a\n    path: x/\n    filter:\n    weight: 1\n", `s.yaml:4: source a: filter is empty`},
		{"sources:\n  - name: a\n    path: x/\n    filter: [lang]\n", `s.yaml:4: source a: filter must be a string`},
	} {
		_, err := ParseSourcesFile("s.yaml", []byte(c.yaml))
		if !errors.Is(err, ErrSourcesFile) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want ErrSourcesFile with %q", c.yaml, err, c.want)
		}
	}
}

// TestCombine rebases local and s3 sources onto their common root and
// refuses a file given to two sources, and two buckets.
func TestCombine(t *testing.T) {
	f := func(p string, rows ...int64) plan.SourceFile {
		return plan.SourceFile{Path: p, Size: 100, FooterSHA256: strings.Repeat("a", 64), RowGroups: append([]int64{}, rows...)}
	}
	web := plan.Source{Root: "/data/web", Files: []plan.SourceFile{f("b.parquet", 3), f("a.parquet", 2)}, EmptyFiles: []plan.SourceFile{f("z.parquet")}}
	code := plan.Source{Root: "/data/code/py", Files: []plan.SourceFile{f("x/c.parquet", 4)}}
	src, files, err := Combine([]string{"web", "code"}, []plan.Source{web, code})
	if err != nil {
		t.Fatal(err)
	}
	if src.Root != "/data" || !reflect.DeepEqual(files, [][]string{{"web/a.parquet", "web/b.parquet", "web/z.parquet"}, {"code/py/x/c.parquet"}}) {
		t.Errorf("root %s files %v", src.Root, files)
	}
	var paths []string
	for _, sf := range src.Files {
		paths = append(paths, sf.Path)
	}
	if !reflect.DeepEqual(paths, []string{"code/py/x/c.parquet", "web/a.parquet", "web/b.parquet"}) || len(src.EmptyFiles) != 1 || src.NumSamples() != 9 {
		t.Errorf("combined files %v, empty %v, %d rows", paths, src.EmptyFiles, src.NumSamples())
	}
	// One root given twice: refused, naming both sources and the file.
	if _, _, err := Combine([]string{"web", "web2"}, []plan.Source{web, web}); !errors.Is(err, ErrSourcesFile) || !strings.Contains(err.Error(), "file b.parquet is in both source web and source web2") {
		t.Errorf("same source twice: %v", err)
	}
	s3a := plan.Source{Root: "s3://corpus/web/en/", Files: []plan.SourceFile{f("p.parquet", 1)}}
	s3b := plan.Source{Root: "s3://corpus/web/fr/x/", Files: []plan.SourceFile{f("q.parquet", 1)}}
	src, files, err = Combine([]string{"en", "fr"}, []plan.Source{s3a, s3b})
	if err != nil || src.Root != "s3://corpus/web/" || !reflect.DeepEqual(files, [][]string{{"en/p.parquet"}, {"fr/x/q.parquet"}}) {
		t.Errorf("s3: root %s files %v err %v", src.Root, files, err)
	}
	s3c := plan.Source{Root: "s3://other/web/", Files: []plan.SourceFile{f("q.parquet", 1)}}
	if _, _, err := Combine([]string{"en", "other"}, []plan.Source{s3a, s3c}); !errors.Is(err, ErrSourcesFile) || !strings.Contains(err.Error(), "different stores") {
		t.Errorf("two buckets: %v", err)
	}
}
