package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the repository root, from bench/cmd/benchrun.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// renderFixture renders testdata/results.json with the notes of root.
func renderFixture(t *testing.T, root string) (*report, string) {
	t.Helper()
	d := &driver{root: root, work: filepath.Join(root, ".cache", "bench", "work")}
	rep, err := loadReport(d, filepath.Join("testdata", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	return rep, rep.render()
}

func readRepo(t *testing.T, root, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// between checks that want appears in s exactly once, after the first
// occurrence of after (itself after the heading of its section) and before
// the first occurrence of before that follows it.
func between(t *testing.T, s, name, section, after, want, before string) {
	t.Helper()
	if n := strings.Count(s, want); n != 1 {
		t.Errorf("%s: appears %d times in the report, want 1", name, n)
		return
	}
	h := strings.Index(s, section)
	if h < 0 {
		t.Errorf("%s: report lacks section %q", name, section)
		return
	}
	a := strings.Index(s[h:], after)
	if a < 0 {
		t.Errorf("%s: section %q lacks %q", name, section, after)
		return
	}
	a += h + len(after)
	w := strings.Index(s, want)
	b := strings.Index(s[a:], before)
	if b < 0 {
		t.Errorf("%s: nothing %q after %q", name, before, after)
		return
	}
	if w < a || w > a+b {
		t.Errorf("%s: at byte %d, want between %q (ends at %d) and %q (at %d)", name, w, after, a, before, a+b)
	}
}

// TestNotesAtTheirSections renders the fixture with the repository's notes
// and checks that each note appears verbatim once, after the generated part
// of its section and before what the renderer writes next (the decode and
// filter notes after the whole file their harness wrote); that the CUDA,
// analysis, images and object-store files are included the same way, the
// object-store section last; and that nothing in bench/notes is left out.
func TestNotesAtTheirSections(t *testing.T) {
	root := repoRoot(t)
	rep, out := renderFixture(t, root)
	if p := rep.checkNotes(); len(p) > 0 {
		t.Errorf("checkNotes: %q, want none", p)
	}
	note := func(name string) string {
		s := rep.readNote(filepath.Join(notesDir, name+".md"))
		if s == "" {
			t.Fatalf("bench/notes/%s.md is missing", name)
		}
		return s
	}
	// The generated text each note follows, and the generated text after it.
	places := []struct{ name, section, after, before string }{
		{"scaling", "### Scaling and memory\n", "Note: throughput counts the decoded F32 values; peak heap is the largest `peak_heap_bytes` of the runs' `--json` summaries.\n\n", "## Peers"},
		{"verify", "## verify\n", "Throughput is counted on the bytes of the shard set (all files of the output folder).\n\n", "## gpuload"},
		{"gpuload-host", "### Host backend\n", "CPU time per GB delivered (host backend, whole process): 0.30 s/GB.\n\n", "### CUDA backend"},
		{"jagged-convert", "## Jagged tensors\n", "| 0.05x jagged |\n\n", "### Shard bytes"},
		{"jagged-delivery", "### Host delivery\n", "| mmap | 0.850 (0.790–0.935) | 3.750 (3.275–5.466) | 1.218 | 48.610 | 21.060 |\n\n", "## What this means"},
		{"packing", "### Host delivery\n", "| mmap | 0.850 (0.790–0.935) | 3.750 (3.275–5.466) | 1.218 | 48.610 | 21.060 |\n\n", "## What this means"},
		// The decode and filter notes follow the whole file their harness
		// wrote (after, below).
		{"decode", "## Parquet decoding against DuckDB's scan\n", "", "## Plan with a row filter\n"},
		{"filter", "## Plan with a row filter\n", "", s3Begin},
	}
	results := map[string]string{"decode": readRepo(t, root, decodeResultsPath), "filter": readRepo(t, root, filterResultsPath)}
	if len(places) != len(noteAnchors) {
		t.Fatalf("%d places checked, %d anchors", len(places), len(noteAnchors))
	}
	for i, p := range places {
		if noteAnchors[i].Name != p.name {
			t.Fatalf("anchor %d is %q, want %q", i, noteAnchors[i].Name, p.name)
		}
		if r, ok := results[p.name]; ok {
			if !strings.HasPrefix(r, p.section) {
				t.Errorf("%s note: the file its harness writes starts %q, want %q", p.name, r[:min(len(r), 40)], p.section)
			}
			p.after = r[len(p.section):] + "\n"
		}
		between(t, out, p.name, p.section, p.after, note(p.name), p.before)
	}

	gpu := readRepo(t, root, gpuResultsPath)
	between(t, out, "gpu-results", "### CUDA backend\n", "recorded in `bench/gpu-results.md`.\n\n", gpu, "## Jagged tensors")
	analysis := readRepo(t, root, "bench/ANALYSIS.md")
	between(t, out, "ANALYSIS", "## What this means\n", "\n\n", analysis, s3Begin)
	s3 := readRepo(t, root, s3ResultsPath)
	if !strings.HasPrefix(s3, "## Object-store sources") {
		t.Errorf("%s starts %q", s3ResultsPath, s3[:min(len(s3), 40)])
	}
	images := readRepo(t, root, imageResultsPath)
	want := analysis + "\n<!-- imagebench:begin -->\n" + images + "<!-- imagebench:end -->\n\n" +
		results["decode"] + "\n" + note("decode") + results["filter"] + "\n" + note("filter") +
		s3Begin + "\n" + s3 + s3End + "\n"
	if !strings.HasSuffix(out, want) {
		t.Errorf("the report does not end with the analysis, the images, decode and filter sections with their notes, and the object-store section between s3bench's markers")
	}

	if !strings.Contains(out, " minutes.\n\n"+handNote+"Machine: ") {
		t.Errorf("the report lacks the line saying where hand-measured sections live, after the first")
	}

	// The README lists every anchor's file.
	readme := readRepo(t, root, filepath.Join(notesDir, "README.md"))
	for _, a := range noteAnchors {
		if !strings.Contains(readme, "| `"+a.Name+".md` | "+a.After+" |") {
			t.Errorf("bench/notes/README.md lacks the row of %s.md placed after %q", a.Name, a.After)
		}
	}
}

// TestTargetNotes checks that the remarks of bench/notes/targets.md end
// their generated target's status and its rows follow the generated rows.
func TestTargetNotes(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{gpuResultsPath, "bench/ANALYSIS.md"} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(root, f), []byte("x\n"), 0o644)
	}
	os.MkdirAll(filepath.Join(root, notesDir), 0o755)
	text := "Prose, ignored.\n\n" +
		"- jagged shard bytes vs raw values + offsets, zipf-list: see Jagged tensors\n" +
		"- no such target: lost\n" +
		"| hand target | >= 1x | 1.5x (measured by hand) | met |\n"
	os.WriteFile(filepath.Join(root, notesDir, targetsNote), []byte(text), 0o644)
	os.WriteFile(filepath.Join(root, notesDir, "stray.md"), []byte("x\n"), 0o644)

	tn := parseTargetNotes(text)
	if len(tn.Rows) != 1 || len(tn.Remarks) != 2 || tn.Remarks["no such target"] != "lost" {
		t.Errorf("parseTargetNotes = %+v", tn)
	}
	rep, out := renderFixture(t, root)
	want := "| jagged shard bytes vs raw values + offsets, zipf-list | <= 1.1x | 1.116x (24 MiB vs 21 MiB; padded 45.1x) | " +
		"**missed**: over by 1 %; 1.028x without the 8 bytes of sample id per sample every shard holds (see Jagged tensors) |\n" +
		"| hand target | >= 1x | 1.5x (measured by hand) | met |\n\n"
	if !strings.Contains(out, want) {
		t.Errorf("Targets table lacks\n%s", want)
	}
	p := rep.checkNotes()
	if len(p) != 2 || !strings.HasPrefix(p[0], "bench/notes/stray.md: no section includes it") ||
		p[1] != `bench/notes/targets.md: remark on "no such target", which is no generated target` {
		t.Errorf("checkNotes = %q", p)
	}
	// Without the object-store file the report ends with the analysis.
	if !strings.HasSuffix(out, "## What this means\n\n"+rep.meaning()+"\nx\n") {
		t.Errorf("report without bench/s3-results.md ends %q", out[max(0, len(out)-80):])
	}
}

// TestBenchmarksHoldNotes checks that the committed BENCHMARKS.md holds
// every note verbatim, so a section edited in BENCHMARKS.md instead of in
// its note (which the next render would undo) is caught.
func TestBenchmarksHoldNotes(t *testing.T) {
	root := repoRoot(t)
	rep := &report{d: &driver{root: root}}
	text := readRepo(t, root, "BENCHMARKS.md")
	files := []string{gpuResultsPath, "bench/ANALYSIS.md", imageResultsPath, decodeResultsPath, filterResultsPath}
	for _, a := range noteAnchors {
		files = append(files, filepath.Join(notesDir, a.Name+".md"))
	}
	for _, f := range files {
		if n := rep.readNote(f); !strings.Contains(text, strings.TrimSuffix(n, "\n")) {
			t.Errorf("BENCHMARKS.md does not hold %s verbatim: edit the note and run `benchrun -render`", f)
		}
	}
	if s3 := rep.s3Section(); !strings.HasSuffix(text, s3) {
		t.Errorf("BENCHMARKS.md does not end with %s between s3bench's markers", s3ResultsPath)
	}
	for r := range rep.targetNotes().Remarks {
		if !strings.Contains(text, r) {
			t.Errorf("BENCHMARKS.md's Targets table lacks the remark %q of %s", r, targetsNote)
		}
	}
	if !strings.Contains(text, handNote) {
		t.Errorf("BENCHMARKS.md lacks the line saying where hand-measured sections live")
	}
}
