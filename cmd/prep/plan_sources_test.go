package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/prepml/prep/gpuload"
	"github.com/prepml/prep/internal/npy"
	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/plan"
)

// mixDirs copies B27's files into dir/data/web (part-0 and part-1, 80
// rows) and dir/data/code (part-2, 23 rows) and writes a sources file with
// the given body after the two source entries' paths.
func mixDirs(t *testing.T, web, code string, extra string) (sources string) {
	t.Helper()
	dir := t.TempDir()
	b27 := filepath.Join("..", "..", "testdata", "cases", "B27-ranks-coverage")
	for _, c := range [][2]string{{"web", "part-0.parquet"}, {"web", "part-1.parquet"}, {"code", "part-2.parquet"}} {
		data, err := os.ReadFile(filepath.Join(b27, c[1]))
		if err != nil {
			t.Fatal(err)
		}
		d := filepath.Join(dir, "data", c[0])
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, c[1]), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sources = filepath.Join(dir, "sources.yaml")
	body := fmt.Sprintf("sources:\n  - name: web\n    path: %s\n%s  - name: code\n    path: %s\n%s%s",
		filepath.Join(dir, "data", "web")+"/", web, filepath.Join(dir, "data", "code")+"/", code, extra)
	if err := os.WriteFile(sources, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return sources
}

// TestPlanSourcesEndToEnd: a 0.7/0.3 mixture of two directories (80 and
// 23 rows, 100 samples per epoch) plans with exact shares, plan show names
// each sample's source (ids 0..22 are code/part-2.parquet, the first file
// under the common root), every global batch of 10 holds 7 web and 3 code
// samples, convert writes it and verify --deep re-reads every value from
// the source, and export's sample ids are the plan's.
func TestPlanSourcesEndToEnd(t *testing.T) {
	sources := mixDirs(t, "    weight: 0.7\n", "    weight: 0.3\n", "epoch_samples: 100\n")
	dir := filepath.Dir(sources)
	pp := filepath.Join(dir, "plan.json")
	code, out, errs := runCLI("plan", "--sources", sources, "--seed", "4", "--epochs", "3", "--global-batch", "10", "--world-size", "2", "-o", pp, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var s planSummary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	if s.Samples != 103 || s.Files != 3 || s.StepsPerEpoch != 10 || s.Mixture == nil || s.Mixture.EpochSamples != 100 ||
		s.Mixture.Sources[0].SamplesPerEpoch != 70 || s.Mixture.Sources[1].SamplesPerEpoch != 30 ||
		s.Mixture.Sources[0].Rows != 80 || s.Mixture.Sources[1].Rows != 23 || s.Mixture.Sources[1].Weight != "0.3" {
		t.Fatalf("summary %s", out)
	}
	for e := 0; e < 3; e++ {
		var batches [10][]string
		for r := 0; r < 2; r++ {
			code, out, errs := runCLI("plan", "show", pp, "--epoch", fmt.Sprint(e), "--rank", fmt.Sprint(r), "--json")
			if code != 0 {
				t.Fatal(errs)
			}
			var sr shownRank
			if err := json.Unmarshal([]byte(out), &sr); err != nil {
				t.Fatal(err)
			}
			for _, b := range sr.Batches {
				for i, id := range b.Samples {
					want := "web"
					if id < 23 {
						want = "code"
					}
					if b.Sources[i] != want {
						t.Fatalf("epoch %d step %d: sample %d named %s, want %s", e, b.Step, id, b.Sources[i], want)
					}
				}
				batches[b.Step] = append(batches[b.Step], b.Sources...)
			}
		}
		for k, b := range batches {
			if n := strings.Count(strings.Join(b, " "), "code"); n != 3 || len(b) != 10 {
				t.Errorf("epoch %d step %d: %d code samples of %d, want 3 of 10", e, k, n, len(b))
			}
		}
	}
	code, out, _ = runCLI("plan", "show", pp, "--epoch", "0", "--rank", "1", "--limit", "1")
	if code != 0 || !strings.Contains(out, "@web") || !strings.Contains(out, "@code") {
		t.Errorf("plan show text: %q", out)
	}
	shards := filepath.Join(dir, "shards")
	if code, _, errs := runCLI("convert", "--plan", pp, "--tensor", "id=id:I64", "--tensor", "x=x:F32", "-o", shards, "-q"); code != 0 {
		t.Fatalf("convert: exit %d: %s", code, errs)
	}
	if code, out, errs := runCLI("verify", "--deep", shards); code != 0 {
		t.Fatalf("verify --deep: exit %d: %s %s", code, out, errs)
	}
	// Elastic: the set written for R=2 read at R=5 and R=1 gives exactly
	// the rank batches of the same mixture planned for that world size.
	for _, world := range []int{1, 5} {
		pw := filepath.Join(dir, fmt.Sprintf("plan-r%d.json", world))
		if code, _, errs := runCLI("plan", "--sources", sources, "--seed", "4", "--epochs", "3", "--global-batch", "10", "--world-size", fmt.Sprint(world), "-o", pw, "-q"); code != 0 {
			t.Fatal(errs)
		}
		q, err := plan.Load(pw)
		if err != nil {
			t.Fatal(err)
		}
		for e := 0; e < 3; e++ {
			for r := 0; r < world; r++ {
				el, err := gpuload.OpenElastic(shards, e, r, world, gpuload.Options{Prefetch: 1})
				if err != nil {
					t.Fatal(err)
				}
				for k := 0; k < q.Steps(); k++ {
					b, err := el.Next()
					if err != nil {
						t.Fatal(err)
					}
					want, _, _ := q.RankBatch(e, r, k, nil)
					if fmt.Sprint(b.SampleIDs) != fmt.Sprint(want) {
						t.Fatalf("world %d epoch %d rank %d step %d: elastic read %v, plan %v", world, e, r, k, b.SampleIDs, want)
					}
					b.Release()
				}
				el.Close()
			}
		}
	}
	exp := filepath.Join(dir, "exp")
	if code, _, errs := runCLI("export", shards, "--epoch", "2", "--rank", "1", "--step", "9", "-o", exp, "-q"); code != 0 {
		t.Fatal(errs)
	}
	code, out, _ = runCLI("plan", "show", pp, "--epoch", "2", "--rank", "1", "--from-step", "9", "--json")
	var sr shownRank
	if err := json.Unmarshal([]byte(out), &sr); code != 0 || err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(exp, "sample_ids.npy"))
	if err != nil {
		t.Fatal(err)
	}
	rd := bytes.NewReader(data)
	if _, err := npy.ReadHeader(rd); err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for rest := data[len(data)-rd.Len():]; len(rest) >= 8; rest = rest[8:] {
		ids = append(ids, binary.LittleEndian.Uint64(rest))
	}
	if fmt.Sprint(ids) != fmt.Sprint(sr.Batches[0].Samples) {
		t.Errorf("exported ids %v, plan %v", ids, sr.Batches[0].Samples)
	}
	data, err = os.ReadFile(filepath.Join(exp, "sample_sources.npy"))
	if err != nil {
		t.Fatal(err)
	}
	rd = bytes.NewReader(data)
	if _, err := npy.ReadHeader(rd); err != nil {
		t.Fatal(err)
	}
	var names []string
	for rest := data[len(data)-rd.Len():]; len(rest) >= 4; rest = rest[4:] {
		names = append(names, []string{"web", "code"}[binary.LittleEndian.Uint32(rest)])
	}
	if fmt.Sprint(names) != fmt.Sprint(sr.Batches[0].Sources) {
		t.Errorf("exported sources %v, plan show %v", names, sr.Batches[0].Sources)
	}
}

// TestPlanSourcesRefused: bad sources files are refused before anything is
// written, naming the source and what is wrong.
func TestPlanSourcesRefused(t *testing.T) {
	for _, c := range []struct {
		web, code, extra string
		want             string
	}{
		{"    weight: 0\n", "", "", "source web: weight 0 must be greater than 0"},
		{"    weight: 0.7\n", "    weight: -0.3\n", "", `source code: weight -0.3 must be greater than 0`},
		{"", "", "  - name: again\n    path: PLACEHOLDER\n", "is in both source code and source again"},
		{"    filter: \"lang = 'en'\"\n", "", "", "source web: filter: part-0.parquet: unknown column lang (the source has: id, x) at \"lang\" (offset 0)"},
		{"", "    filter: \"x = 'high'\"\n", "", "source code: filter: part-2.parquet: type mismatch: column x is FLOAT, 'high' is TEXT at \"=\" (offset 2)"},
		{"", "    filter: \"id > 1000\"\n", "", `source code: filter "id > 1000" selects no row`},
		{"", "", "  - name: web\n    path: x/\n", "source web is given twice"},
	} {
		sources := mixDirs(t, c.web, c.code, c.extra)
		dir := filepath.Dir(sources)
		if strings.Contains(c.extra, "PLACEHOLDER") {
			b, _ := os.ReadFile(sources)
			os.WriteFile(sources, []byte(strings.Replace(string(b), "PLACEHOLDER", filepath.Join(dir, "data", "code"), 1)), 0o644)
		}
		pp := filepath.Join(dir, "plan.json")
		code, _, errs := runCLI("plan", "--sources", sources, "--global-batch", "10", "-o", pp)
		if code == 0 || !strings.Contains(errs, c.want) {
			t.Errorf("exit %d, stderr %q, want %q", code, errs, c.want)
		}
		if _, err := os.Stat(pp); !os.IsNotExist(err) {
			t.Errorf("%s: plan file written", c.want)
		}
	}
	// --source and --sources together.
	if code, _, errs := runCLI("plan", "--sources", "a.yaml", "--source", "x", "--global-batch", "1"); code != 2 || !strings.Contains(errs, "sources") {
		t.Errorf("both flags: exit %d %s", code, errs)
	}
}

// TestPlanSourcesFilter: code filtered to B27 ids 85..95 and 100 (12 of
// its 23 rows; combined ids 5..15 and 20) draws only those rows; convert
// writes them and verify --deep re-reads them from the source; the
// exported id tensor of every code sample satisfies the filter.
func TestPlanSourcesFilter(t *testing.T) {
	sources := mixDirs(t, "    weight: 1\n", "    weight: 1\n    filter: id BETWEEN 85 AND 95 OR id = 100\n", "epoch_samples: 40\n")
	dir := filepath.Dir(sources)
	pp := filepath.Join(dir, "plan.json")
	code, out, errs := runCLI("plan", "--sources", sources, "--seed", "1", "--epochs", "2", "--global-batch", "8", "-o", pp, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var s planSummary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	if c := s.Mixture.Sources[1]; c.Rows != 12 || c.SamplesPerEpoch != 20 || c.Filter != "id BETWEEN 85 AND 95 OR id = 100" || c.SelectionDigest == "" {
		t.Fatalf("code: %+v", c)
	}
	shards := filepath.Join(dir, "shards")
	if code, _, errs := runCLI("convert", "--plan", pp, "--tensor", "id=id:I64", "-o", shards, "-q"); code != 0 {
		t.Fatalf("convert: %s", errs)
	}
	if code, out, errs := runCLI("verify", "--deep", shards); code != 0 {
		t.Fatalf("verify --deep: %s %s", out, errs)
	}
	drawn := 0
	for e := 0; e < 2; e++ {
		for k := 0; k < 5; k++ {
			exp := filepath.Join(dir, fmt.Sprintf("exp-%d-%d", e, k))
			if code, _, errs := runCLI("export", shards, "--epoch", fmt.Sprint(e), "--rank", "0", "--step", fmt.Sprint(k), "-o", exp, "-q"); code != 0 {
				t.Fatal(errs)
			}
			ids, vals := readI64(t, filepath.Join(exp, "sample_ids.npy")), readI64(t, filepath.Join(exp, "id.npy"))
			for i, id := range ids {
				if id >= 23 {
					continue // web
				}
				drawn++
				if v := vals[i]; v != id+80 || !(v >= 85 && v <= 95 || v == 100) {
					t.Errorf("epoch %d step %d: code sample %d has id %d, outside the filter", e, k, id, v)
				}
			}
		}
	}
	if drawn != 40 {
		t.Errorf("%d code samples in 2 epochs, want 40", drawn)
	}
}

// readI64 reads a 1-d <i8 .npy file.
func readI64(t *testing.T, path string) []int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rd := bytes.NewReader(data)
	if _, err := npy.ReadHeader(rd); err != nil {
		t.Fatal(err)
	}
	var out []int64
	for rest := data[len(data)-rd.Len():]; len(rest) >= 8; rest = rest[8:] {
		out = append(out, int64(binary.LittleEndian.Uint64(rest)))
	}
	return out
}

// hiveDirs lays out B27's part-0 under region=eu/ and part-1 under
// region=us/ of dir/ev, plus junk (not Parquet) under region=ap/, and
// returns dir/ev.
func hiveDirs(t *testing.T) string {
	t.Helper()
	ev := filepath.Join(t.TempDir(), "ev")
	b27 := filepath.Join("..", "..", "testdata", "cases", "B27-ranks-coverage")
	for _, c := range [][2]string{{"region=eu", "part-0.parquet"}, {"region=us", "part-1.parquet"}} {
		data, err := os.ReadFile(filepath.Join(b27, c[1]))
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Join(ev, c[0]), 0o755)
		if err := os.WriteFile(filepath.Join(ev, c[0], c[1]), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(ev, "region=ap"), 0o755)
	os.WriteFile(filepath.Join(ev, "region=ap", "junk.parquet"), []byte("not a parquet file at all"), 0o644)
	return ev
}

// TestPlanSourcesHive: a filter on a hive partition column prunes the
// region=ap partition before its footer is read (its file is not Parquet:
// planning without the filter fails on it, with the filter succeeds), the
// partition value and a data column select B27 ids 10..39 of region=eu,
// and convert plus verify --deep read back exactly those rows.
func TestPlanSourcesHive(t *testing.T) {
	ev := hiveDirs(t)
	dir := filepath.Dir(ev)
	write := func(filter string) string {
		p := filepath.Join(dir, "sources.yaml")
		body := fmt.Sprintf("sources:\n  - name: ev\n    path: %s\n", ev)
		if filter != "" {
			body += fmt.Sprintf("    filter: %q\n", filter)
		}
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	pp := filepath.Join(dir, "plan.json")
	if code, _, errs := runCLI("plan", "--sources", write(""), "--global-batch", "4", "-o", pp); code == 0 || !strings.Contains(errs, "junk.parquet") {
		t.Fatalf("without a filter the junk file must be read and refused: exit %d %s", code, errs)
	}
	code, out, errs := runCLI("plan", "--sources", write("region = 'eu' AND id >= 10"), "--global-batch", "5", "-o", pp, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var s planSummary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	if s.Files != 1 || s.Mixture.Sources[0].Rows != 30 || fmt.Sprint(s.Mixture.Sources[0].Partitions) != "[{region string}]" { // region=us pruned too
		t.Fatalf("files %d rows %d: %s", s.Files, s.Mixture.Sources[0].Rows, out)
	}
	shards := filepath.Join(dir, "shards")
	if code, _, errs := runCLI("convert", "--plan", pp, "--tensor", "id=id:I64", "-o", shards, "-q"); code != 0 {
		t.Fatalf("convert: %s", errs)
	}
	if code, out, errs := runCLI("verify", "--deep", shards); code != 0 {
		t.Fatalf("verify --deep: %s %s", out, errs)
	}
	seen := map[int64]bool{}
	for k := 0; k < 6; k++ {
		exp := filepath.Join(dir, fmt.Sprintf("exp-%d", k))
		if code, _, errs := runCLI("export", shards, "--epoch", "0", "--rank", "0", "--step", fmt.Sprint(k), "-o", exp, "-q"); code != 0 {
			t.Fatal(errs)
		}
		for _, v := range readI64(t, filepath.Join(exp, "id.npy")) {
			seen[v] = true
		}
	}
	for v := int64(0); v < 40; v++ {
		if seen[v] != (v >= 10) {
			t.Errorf("B27 id %d drawn %v, want %v", v, seen[v], v >= 10)
		}
	}
	if len(seen) != 30 {
		t.Errorf("%d distinct ids, want 30", len(seen))
	}
}

// TestPlanSourcesHiveRefused: inconsistent partition keys, a file outside
// the layout and a partition key that is also a data column are refused
// naming the file.
func TestPlanSourcesHiveRefused(t *testing.T) {
	for _, c := range []struct {
		move, want string
	}{
		{"region=us/part-1.parquet>zone=us/part-1.parquet", "zone=us/part-1.parquet has partition keys zone, but region=eu/part-0.parquet has region"},
		{"region=us/part-1.parquet>us/part-1.parquet", `us/part-1.parquet is outside the partition layout: level "us" is not key=value`},
		{"region=us/part-1.parquet>id=3/part-1.parquet", "partition key conflict"},
	} {
		ev := hiveDirs(t)
		os.Remove(filepath.Join(ev, "region=ap", "junk.parquet"))
		from, to, _ := strings.Cut(c.move, ">")
		os.MkdirAll(filepath.Dir(filepath.Join(ev, to)), 0o755)
		if err := os.Rename(filepath.Join(ev, from), filepath.Join(ev, to)); err != nil {
			t.Fatal(err)
		}
		if c.want == "partition key conflict" {
			// every file under id=...: a data column id and a key id.
			os.Rename(filepath.Join(ev, "region=eu", "part-0.parquet"), filepath.Join(ev, "id=3", "part-0.parquet"))
		}
		p := filepath.Join(filepath.Dir(ev), "sources.yaml")
		os.WriteFile(p, []byte(fmt.Sprintf("sources:\n  - name: ev\n    path: %s\n    filter: \"id > 1\"\n", ev)), 0o644)
		code, _, errs := runCLI("plan", "--sources", p, "--global-batch", "4", "-o", filepath.Join(filepath.Dir(ev), "plan.json"))
		if code == 0 || !strings.Contains(errs, c.want) || !strings.Contains(errs, "source ev") {
			t.Errorf("%s: exit %d %q, want %q", c.move, code, errs, c.want)
		}
	}
}

// TestPlanSourcesHiveKeyConflict: B27's files (a column id) under id=3/
// and id=7/ are refused at plan time, naming the source, the file and the
// key and saying which footers were read, with no plan written: without a
// filter (every file read), with a filter keeping id=7 (the kept file
// read, the pruned one not), and with a filter pruning every partition
// (the first file read, the conflict reported instead of "prunes every
// partition").
func TestPlanSourcesHiveKeyConflict(t *testing.T) {
	for _, c := range []struct {
		filter, want string
	}{
		{"", "source ev: partition key conflict: id=3/part-0.parquet has a top-level column id and a partition level id=...; rename one (checked every file's footer: 2 files)"},
		{"id > 5", "source ev: partition key conflict: id=7/part-1.parquet has a top-level column id and a partition level id=...; rename one (checked the 1 file the filter keeps; 1 file pruned unread)"},
		{"id > 10", `source ev: partition key conflict: id=3/part-0.parquet has a top-level column id and a partition level id=...; rename one (checked the directory's first file, as the filter "id > 10" prunes every partition)`},
	} {
		ev := hiveDirs(t)
		os.Remove(filepath.Join(ev, "region=ap", "junk.parquet"))
		for _, m := range [][2]string{{"region=eu/part-0.parquet", "id=3/part-0.parquet"}, {"region=us/part-1.parquet", "id=7/part-1.parquet"}} {
			os.MkdirAll(filepath.Dir(filepath.Join(ev, m[1])), 0o755)
			if err := os.Rename(filepath.Join(ev, m[0]), filepath.Join(ev, m[1])); err != nil {
				t.Fatal(err)
			}
		}
		for _, d := range []string{"region=eu", "region=us", "region=ap"} {
			os.Remove(filepath.Join(ev, d))
		}
		dir := filepath.Dir(ev)
		body := fmt.Sprintf("sources:\n  - name: ev\n    path: %s\n", ev)
		if c.filter != "" {
			body += fmt.Sprintf("    filter: %q\n", c.filter)
		}
		p := filepath.Join(dir, "sources.yaml")
		os.WriteFile(p, []byte(body), 0o644)
		pp := filepath.Join(dir, "plan.json")
		code, _, errs := runCLI("plan", "--sources", p, "--global-batch", "4", "-o", pp)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("filter %q: exit %d %q, want %q", c.filter, code, errs, c.want)
		}
		if _, err := os.Stat(pp); !os.IsNotExist(err) {
			t.Errorf("filter %q: a plan was written (%v)", c.filter, err)
		}
	}
}

// TestPlanSourcesFilterSourceChanged: a filtered source's file rewritten
// after planning (its selection may no longer hold) is refused by convert
// before any shard is written.
func TestPlanSourcesFilterSourceChanged(t *testing.T) {
	sources := mixDirs(t, "", "    filter: id > 90\n", "")
	dir := filepath.Dir(sources)
	pp := filepath.Join(dir, "plan.json")
	if code, _, errs := runCLI("plan", "--sources", sources, "--global-batch", "4", "-o", pp, "-q"); code != 0 {
		t.Fatal(errs)
	}
	// code/part-2.parquet now holds B27's five.parquet: other rows.
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "cases", "B27-ranks-coverage", "five.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data", "code", "part-2.parquet"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	shards := filepath.Join(dir, "shards")
	code, _, errs := runCLI("convert", "--plan", pp, "--tensor", "id=id:I64", "-o", shards, "-q")
	if code == 0 || !strings.Contains(errs, "code/part-2.parquet") {
		t.Fatalf("convert of a changed source: exit %d %s", code, errs)
	}
	if m, _ := filepath.Glob(filepath.Join(shards, "epoch-*", "*.shard")); len(m) != 0 {
		t.Errorf("shards written: %v", m)
	}
}

// TestPlanSourcesHiveDeclared: a declared partition type a value does not
// parse as, a declared key the layout lacks and a declaration on a source
// that is not one directory are refused naming the source, the key and the
// value, before anything is written; a declared string key keeps values
// an inferred INTEGER would change ("007").
func TestPlanSourcesHiveDeclared(t *testing.T) {
	for _, c := range []struct {
		path, decl, filter, want string
	}{
		{"", "region: int", "id > 1", `source ev: region=eu/part-0.parquet: partition region=eu: "eu" is not a decimal integer (int64), as key region is declared int`},
		{"", "region: date", "id > 1", `source ev: region=eu/part-0.parquet: partition region=eu: "eu" is not a date written Y-M-D, as key region is declared date`},
		{"", "day: date", "id > 1", "source ev: declared partition key day is not a level of the layout (its keys: region)"},
		{"/region=eu/part-0.parquet", "region: string", "id > 1", "source ev: partitions are declared (region), but the path is not one directory of key=value levels"},
		{"", "region: string", "regio = 'eu'", "source ev: filter: region=eu/part-0.parquet: unknown column regio (the source has: id, region, x)"},
	} {
		ev := hiveDirs(t)
		os.Remove(filepath.Join(ev, "region=ap", "junk.parquet"))
		p := filepath.Join(filepath.Dir(ev), "sources.yaml")
		os.WriteFile(p, []byte(fmt.Sprintf("sources:\n  - name: ev\n    path: %s\n    filter: %q\n    partitions:\n      %s\n", ev+c.path, c.filter, c.decl)), 0o644)
		pp := filepath.Join(filepath.Dir(ev), "plan.json")
		code, _, errs := runCLI("plan", "--sources", p, "--global-batch", "4", "-o", pp)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d %q, want 2 and %q", c.decl, code, errs, c.want)
		}
		if _, err := os.Stat(pp); err == nil {
			t.Errorf("%s: a plan was written", c.decl)
		}
	}
	// region=007 and region=7 as strings: the filter tells them apart.
	ev := hiveDirs(t)
	os.Remove(filepath.Join(ev, "region=ap", "junk.parquet"))
	os.Rename(filepath.Join(ev, "region=eu"), filepath.Join(ev, "region=007"))
	os.Rename(filepath.Join(ev, "region=us"), filepath.Join(ev, "region=7"))
	p := filepath.Join(filepath.Dir(ev), "sources.yaml")
	for _, c := range []struct {
		decl, filter string
		files        int
	}{{"string", "region = '007'", 1}, {"int", "region = 7", 2}, {"int", "region = '007'", -1}} {
		os.WriteFile(p, []byte(fmt.Sprintf("sources:\n  - name: ev\n    path: %s\n    filter: %q\n    partitions:\n      region: %s\n", ev, c.filter, c.decl)), 0o644)
		code, out, errs := runCLI("plan", "--sources", p, "--global-batch", "4", "-o", filepath.Join(filepath.Dir(ev), "plan.json"), "--json")
		if c.files < 0 {
			if code != 2 || !strings.Contains(errs, "source ev: filter: type mismatch: column region is INTEGER, '007' is TEXT") {
				t.Errorf("%s %s: exit %d %s", c.decl, c.filter, code, errs)
			}
			continue
		}
		var s planSummary
		if code != 0 || json.Unmarshal([]byte(out), &s) != nil || s.Files != c.files {
			t.Errorf("%s %s: exit %d files %d, want %d: %s", c.decl, c.filter, code, s.Files, c.files, errs)
		}
	}
}

// TestPlanSourcesHivePartitionTensors: a spec tensor naming the hive key
// region (hashed) beside the id column: prep plan records the key, the
// shards hold FNV-1a (Go's hash/fnv) of each row's region modulo the
// buckets (B27 ids 0..39 under region=eu, 40..79 under region=us, per
// DuckDB), and verify --deep recomputes and accepts them. The partition
// of a filtered plan keeps its levels though one partition is left.
func TestPlanSourcesHivePartitionTensors(t *testing.T) {
	ev := hiveDirs(t)
	os.Remove(filepath.Join(ev, "region=ap", "junk.parquet"))
	dir := filepath.Dir(ev)
	spec := filepath.Join(dir, "spec.yaml")
	os.WriteFile(spec, []byte("tensors:\n  - name: id\n    column: id\n    dtype: I64\n  - name: region\n    partition: region\n    dtype: I64\n    bytes: {mode: hash, buckets: 1048576}\n"), 0o644)
	hash := func(s string) int64 {
		h := fnv.New64a()
		h.Write([]byte(s))
		return int64(h.Sum64() % 1048576)
	}
	for _, filter := range []string{"", "region = 'us'"} {
		p := filepath.Join(dir, "sources.yaml")
		body := fmt.Sprintf("sources:\n  - name: ev\n    path: %s\n", ev)
		if filter != "" {
			body += fmt.Sprintf("    filter: %q\n", filter)
		}
		os.WriteFile(p, []byte(body), 0o644)
		pp := filepath.Join(dir, "plan.json")
		if code, _, errs := runCLI("plan", "--sources", p, "--global-batch", "8", "-o", pp, "-q"); code != 0 {
			t.Fatalf("plan: %s", errs)
		}
		shards := filepath.Join(dir, "shards")
		os.RemoveAll(shards)
		if code, _, errs := runCLI("convert", "--plan", pp, "--spec", spec, "-o", shards, "-q"); code != 0 {
			t.Fatalf("convert: %s", errs)
		}
		if code, out, errs := runCLI("verify", "--deep", shards); code != 0 {
			t.Fatalf("verify --deep: %s %s", out, errs)
		}
		n := 0
		for k := 0; ; k++ {
			exp := filepath.Join(dir, fmt.Sprintf("exp-%d", k))
			os.RemoveAll(exp)
			if code, _, _ := runCLI("export", shards, "--epoch", "0", "--rank", "0", "--step", fmt.Sprint(k), "-o", exp, "-q"); code != 0 {
				break
			}
			ids, regions := readI64(t, filepath.Join(exp, "id.npy")), readI64(t, filepath.Join(exp, "region.npy"))
			for i, id := range ids {
				want := hash("eu")
				if id >= 40 {
					want = hash("us")
				}
				if regions[i] != want {
					t.Errorf("filter %q: id %d has region %d, want %d", filter, id, regions[i], want)
				}
				n++
			}
		}
		if want := map[string]int{"": 80, "region = 'us'": 40}[filter]; n != want {
			t.Errorf("filter %q: %d samples exported, want %d", filter, n, want)
		}
	}
}

// pagedIDRow is one row of the page-indexed file of
// TestPlanSourcesFilterPageIndex.
type pagedIDRow struct {
	ID int64 `parquet:"id"`
}

// TestPlanSourcesFilterPageIndex: a filter over a file with a page index
// (parquet-go writes one; pages of about 256 bytes, one row group of 1000
// sorted ids) selects exactly its 10 rows, and prep plan --json reports as
// read exactly the pages whose ColumnIndex min..max meets the range, as
// parquet-go reads the index, and the others as skipped.
func TestPlanSourcesFilterPageIndex(t *testing.T) {
	dir := t.TempDir()
	ids := make([]pagedIDRow, 1000)
	for i := range ids {
		ids[i].ID = int64(i)
	}
	path := pqfixture.Of(ids...).PageBytes(256).WriteBatch(1).WriteFile(t, filepath.Join(dir, "ids.parquet"))

	// The pages a reader of the index must read: those whose min..max
	// meets [100, 109].
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	ci, err := pf.RowGroups()[0].ColumnChunks()[0].ColumnIndex()
	if err != nil {
		t.Fatal(err)
	}
	var wantRead, wantSkipped int64
	for p := 0; p < ci.NumPages(); p++ {
		if ci.MinValue(p).Int64() <= 109 && ci.MaxValue(p).Int64() >= 100 {
			wantRead++
		} else {
			wantSkipped++
		}
	}
	if wantSkipped == 0 || wantRead == 0 {
		t.Fatalf("the file has %d pages meeting the range and %d not: want both", wantRead, wantSkipped)
	}

	sources := filepath.Join(dir, "sources.yaml")
	os.WriteFile(sources, []byte("sources:\n  - name: ids\n    path: "+path+"\n    filter: id BETWEEN 100 AND 109\n"), 0o644)
	code, out, errs := runCLI("plan", "--sources", sources, "--seed", "1", "--global-batch", "5", "-o", filepath.Join(dir, "plan.json"), "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var s planSummary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	c := s.Mixture.Sources[0]
	if c.Rows != 10 || c.FilterPagesRead != wantRead || c.FilterPagesSkipped != wantSkipped || c.FilterBytesRead <= 0 {
		t.Errorf("source: rows %d, pages read %d skipped %d, bytes %d; want 10 rows, %d pages read, %d skipped",
			c.Rows, c.FilterPagesRead, c.FilterPagesSkipped, c.FilterBytesRead, wantRead, wantSkipped)
	}
	code, out, errs = runCLI("plan", "--sources", sources, "--seed", "1", "--global-batch", "5", "-o", filepath.Join(dir, "plan2.json"))
	if want := fmt.Sprintf("%d pages read, %d skipped by the page index", wantRead, wantSkipped); code != 0 || !strings.Contains(out+errs, want) {
		t.Errorf("exit %d, text output lacks %q:\n%s%s", code, want, out, errs)
	}
}
