package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Hand-measured sections. benchrun writes BENCHMARKS.md from what it
// measures; what is measured by hand (a before/after series of two builds,
// a run on a GPU machine, a Python benchmark, a run under a changed setting)
// lives in its own file and is included verbatim at its place on every
// render, so a new run never loses it:
//
//	bench/notes/<anchor>.md  after the generated part of the section noteAnchors names
//	bench/notes/targets.md   rows appended to the Targets table, remarks on generated targets
//	bench/gpu-results.md     the CUDA backend section (scripts/gpu-check.sh on a GPU machine)
//	bench/ANALYSIS.md        after "What this means"
//	bench/s3-results.md      the object-store section, last (written by bench/cmd/s3bench)
//
// The sections other harnesses write whole (bench/image-results.md,
// bench/decode-results.md, bench/filter-results.md) are included after the
// analysis, each followed by its note when noteAnchors names one.
//
// Each note says how it was measured, with the command.

// notesDir holds the notes, relative to the repository root.
const notesDir = "bench/notes"

// targetsNote holds the hand rows and remarks of the Targets table, in
// notesDir.
const targetsNote = "targets.md"

// s3ResultsPath holds the object-store section bench/cmd/s3bench wrote last
// (relative to the root); benchrun includes it between s3bench's markers so
// that s3bench can also replace it in BENCHMARKS.md in place.
const s3ResultsPath = "bench/s3-results.md"

// s3Begin and s3End mark the object-store section in BENCHMARKS.md (the
// markers bench/cmd/s3bench looks for).
const s3Begin, s3End = "<!-- s3bench:begin -->", "<!-- s3bench:end -->"

// noteAnchor is one place a note goes: bench/notes/<Name>.md, when present,
// follows the generated text After describes.
type noteAnchor struct{ Name, After string }

// noteAnchors are the places of the notes, in the report's order.
var noteAnchors = []noteAnchor{
	{"scaling", "## convert, ### Scaling and memory: the table and its notes"},
	{"verify", "## verify: the table and its shard set line"},
	{"gpuload-host", "## gpuload, ### Host backend: the table, its shard set and CPU time per GB"},
	{"jagged-convert", "## Jagged tensors: the convert table"},
	{"jagged-delivery", "## Jagged tensors, ### Host delivery: the table"},
	{"packing", "## Jagged tensors, after Host delivery: packed token rows (written by bench/cmd/packbench)"},
	{"decode", "## Parquet decoding against DuckDB's scan: bench/decode-results.md (written by bench/cmd/decbench)"},
	{"filter", "## Plan with a row filter: bench/filter-results.md (written by bench/cmd/filterbench)"},
}

// readNote returns the text of the file rel (relative to the root) ending in
// one blank line, "" when it does not exist, or a line naming the error.
func (rep *report) readNote(rel string) string {
	b, err := os.ReadFile(filepath.Join(rep.d.root, rel))
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		return fmt.Sprintf("(%s could not be read: %v)\n\n", rel, err)
	}
	return strings.TrimRight(string(b), "\n") + "\n\n"
}

// note writes the note of anchor name, if there is one.
func (rep *report) note(b *strings.Builder, name string) {
	b.WriteString(rep.readNote(filepath.Join(notesDir, name+".md")))
}

// targetNotes are the hand parts of the Targets table read from
// bench/notes/targets.md: each line starting with "|" is a row appended to
// the generated rows as written; each line "- <target>: <remark>" adds the
// remark, in parentheses, to the status of the generated target named.
// Other lines are prose for the reader of the file.
type targetNotes struct {
	Rows    []string
	Remarks map[string]string
}

func parseTargetNotes(text string) targetNotes {
	tn := targetNotes{Remarks: map[string]string{}}
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "|"):
			tn.Rows = append(tn.Rows, l)
		case strings.HasPrefix(l, "- "):
			if name, remark, ok := strings.Cut(l[2:], ": "); ok {
				tn.Remarks[strings.TrimSpace(name)] = strings.TrimSpace(remark)
			}
		}
	}
	return tn
}

func (rep *report) targetNotes() targetNotes {
	return parseTargetNotes(rep.readNote(filepath.Join(notesDir, targetsNote)))
}

// imageResultsPath holds the images section bench/cmd/imagebench wrote
// last (relative to the root), included between imagebench's markers.
const imageResultsPath = "bench/image-results.md"

// imageSection is the images section between imagebench's markers, or ""
// when bench/image-results.md does not exist.
func (rep *report) imageSection() string {
	s := rep.readNote(imageResultsPath)
	if s == "" {
		return ""
	}
	return "<!-- imagebench:begin -->\n" + strings.TrimSuffix(s, "\n") + "<!-- imagebench:end -->\n"
}

// decodeResultsPath and filterResultsPath hold the sections
// bench/cmd/decbench and bench/cmd/filterbench wrote last (relative to the
// root); each is included whole, followed by its note ("decode", "filter").
const decodeResultsPath, filterResultsPath = "bench/decode-results.md", "bench/filter-results.md"

// resultSection is the file rel written by a harness, followed by the note
// of anchor name, or "" when neither exists.
func (rep *report) resultSection(rel, name string) string {
	return rep.readNote(rel) + rep.readNote(filepath.Join(notesDir, name+".md"))
}

// s3Section is the object-store section between s3bench's markers, or ""
// when bench/s3-results.md does not exist.
func (rep *report) s3Section() string {
	s := rep.readNote(s3ResultsPath)
	if s == "" {
		return ""
	}
	return s3Begin + "\n" + strings.TrimSuffix(s, "\n") + s3End + "\n"
}

// checkNotes lists what in bench/notes no render would include: a file
// named after no anchor, or a remark of targets.md naming no generated
// target. README.md is for readers of the folder.
func (rep *report) checkNotes() []string {
	var problems []string
	ents, err := os.ReadDir(filepath.Join(rep.d.root, notesDir))
	if err != nil && !os.IsNotExist(err) {
		return []string{err.Error()}
	}
	for _, e := range ents {
		name := e.Name()
		base, ok := strings.CutSuffix(name, ".md")
		if name == "README.md" || name == targetsNote {
			continue
		}
		if !ok || !slices.ContainsFunc(noteAnchors, func(a noteAnchor) bool { return a.Name == base }) {
			problems = append(problems, fmt.Sprintf("%s/%s: no section includes it (anchors: %s)", notesDir, name, anchorNames()))
		}
	}
	names := map[string]bool{}
	for _, t := range rep.targets("", "") {
		names[t.Name] = true
	}
	for name := range rep.targetNotes().Remarks {
		if !names[name] {
			problems = append(problems, fmt.Sprintf("%s/%s: remark on %q, which is no generated target", notesDir, targetsNote, name))
		}
	}
	slices.Sort(problems)
	return problems
}

func anchorNames() string {
	var s []string
	for _, a := range noteAnchors {
		s = append(s, a.Name)
	}
	return strings.Join(s, ", ")
}
