// Package arch checks the shape of the tree: which way imports run between
// prep's packages (the table in README.md §Packages) and how long a source
// file may grow.
package arch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/prepml/prep"

// pkg is one package of the module as go list describes it.
type pkg struct {
	ImportPath string
	Imports    []string // direct imports of the non-test files
	Deps       []string // every package the non-test files need, transitively
}

// rel returns p's path inside the module ("" for the root package).
func rel(p string) string {
	return strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
}

// inTree reports whether import path p is a package of this module.
func inTree(p string) bool { return p == module || strings.HasPrefix(p, module+"/") }

// under reports whether module-relative path p is dir or inside it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// listPackages runs go list -deps over every package of the module.
func listPackages(t *testing.T) map[string]pkg {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(gobin, "list", "-json=ImportPath,Imports,Deps", module+"/...")
	cmd.Dir = repoRoot(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		pkgs[rel(p.ImportPath)] = p
	}
	for _, want := range []string{"convert", "feature", "verify", "describe", "plan", "pqread", "gpuload", "source", "shardfmt"} {
		if _, ok := pkgs[want]; !ok {
			t.Fatalf("go list did not report package %s", want)
		}
	}
	return pkgs
}

// repoRoot returns the repository root (two levels above this package).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root %s: %v", root, err)
	}
	return root
}

// rule is one import rule: check returns one line per violation.
type rule struct {
	name  string
	check func(pkgs map[string]pkg) []string
}

// noDep returns the violations of "packages under from need none of the
// packages under to" (transitively).
func noDep(pkgs map[string]pkg, from string, to ...string) []string {
	var bad []string
	for name, p := range pkgs {
		if !under(name, from) {
			continue
		}
		for _, d := range p.Deps {
			if !inTree(d) {
				continue
			}
			for _, t := range to {
				if under(rel(d), t) {
					bad = append(bad, name+" needs "+rel(d))
				}
			}
		}
	}
	slices.Sort(bad)
	return bad
}

// rules are the import rules of README.md §Packages.
var rules = []rule{
	{"verify does not import convert", func(pkgs map[string]pkg) []string {
		return noDep(pkgs, "verify", "convert")
	}},
	{"describe sits beside verify: neither imports the other, and describe imports neither convert nor feature", func(pkgs map[string]pkg) []string {
		bad := append(noDep(pkgs, "describe", "verify", "convert", "feature"), noDep(pkgs, "verify", "describe")...)
		slices.Sort(bad)
		return bad
	}},
	{"feature imports none of convert, verify, shardset", func(pkgs map[string]pkg) []string {
		return noDep(pkgs, "feature", "convert", "verify", "shardset")
	}},
	{"internal/* needs no prep package above shardfmt (fixtures that need convert or feature live in convert/converttest and feature/featuretest)", func(pkgs map[string]pkg) []string {
		var bad []string
		for name, p := range pkgs {
			if !under(name, "internal") {
				continue
			}
			for _, d := range p.Deps {
				if inTree(d) && !under(rel(d), "internal") && !under(rel(d), "shardfmt") {
					bad = append(bad, name+" needs "+rel(d))
				}
			}
		}
		slices.Sort(bad)
		return bad
	}},
	{"plan imports no other prep package but internal helpers", func(pkgs map[string]pkg) []string {
		var bad []string
		for _, d := range pkgs["plan"].Deps {
			if inTree(d) && !under(rel(d), "plan") && !under(rel(d), "internal") {
				bad = append(bad, "plan needs "+rel(d))
			}
		}
		slices.Sort(bad)
		return bad
	}},
	{"pqread imports no prep package but internal/sysmem (huge page advice for its buffers; a leaf)", func(pkgs map[string]pkg) []string {
		var bad []string
		for _, d := range pkgs["pqread"].Deps {
			if inTree(d) && !under(rel(d), "pqread") && rel(d) != "internal/sysmem" {
				bad = append(bad, "pqread needs "+rel(d))
			}
		}
		slices.Sort(bad)
		return bad
	}},
	{"internal/sysmem imports no prep package", func(pkgs map[string]pkg) []string {
		var bad []string
		for _, d := range pkgs["internal/sysmem"].Deps {
			if inTree(d) && !under(rel(d), "internal/sysmem") {
				bad = append(bad, "internal/sysmem needs "+rel(d))
			}
		}
		return bad
	}},
	{"gpuload imports neither convert nor pqread", func(pkgs map[string]pkg) []string {
		return noDep(pkgs, "gpuload", "convert", "pqread")
	}},
	{"selection builds on source and plan only, and only cmd imports it", func(pkgs map[string]pkg) []string {
		bad := noDep(pkgs, "selection", "convert", "verify", "feature", "shardfmt", "shardset", "gpuload", "gc")
		for name, p := range pkgs {
			if under(name, "selection") || under(name, "cmd") {
				continue
			}
			for _, imp := range p.Imports {
				if inTree(imp) && under(rel(imp), "selection") {
					bad = append(bad, name+" imports selection")
				}
			}
		}
		slices.Sort(bad)
		return bad
	}},
	{"cmd imports neither pqread, nor internal/ but launcher and metrics, nor the AWS SDK", func(pkgs map[string]pkg) []string {
		// The CLI maps flags to options and renders what packages return:
		// Parquet is read through source, objects are fetched by source's
		// client, worker pools, descriptor pools and atomic writes are the
		// packages' own. launcher (rank and world size from a launcher's
		// environment, as --ranks auto maps it) and metrics (the
		// run-outcome file --metrics-file names) are the internal helpers
		// a command itself needs.
		allowed := map[string]bool{"internal/launcher": true, "internal/metrics": true}
		var bad []string
		for name, p := range pkgs {
			if !under(name, "cmd") {
				continue
			}
			for _, imp := range p.Imports {
				switch {
				case strings.HasPrefix(imp, "github.com/aws/"):
					bad = append(bad, name+" imports "+imp)
				case !inTree(imp):
				case under(rel(imp), "pqread"), under(rel(imp), "internal") && !allowed[rel(imp)]:
					bad = append(bad, name+" imports "+rel(imp))
				}
			}
		}
		slices.Sort(bad)
		return bad
	}},
	{"only source and feature import pqread", func(pkgs map[string]pkg) []string {
		var bad []string
		for name, p := range pkgs {
			if under(name, "pqread") || under(name, "source") || under(name, "feature") {
				continue
			}
			for _, imp := range p.Imports {
				if inTree(imp) && under(rel(imp), "pqread") {
					bad = append(bad, name+" imports "+rel(imp))
				}
			}
		}
		slices.Sort(bad)
		return bad
	}},
}

// knownViolations names the rules not yet true in this tree, with why. A
// rule listed here that holds fails the test, so that it is made strict.
var knownViolations = map[string]string{}

// TestImportRules checks that imports run downhill: every rule of rules.
func TestImportRules(t *testing.T) {
	pkgs := listPackages(t)
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			bad := r.check(pkgs)
			why, known := knownViolations[r.name]
			switch {
			case len(bad) > 0 && known:
				t.Skipf("known violation (%s):\n  %s", why, strings.Join(bad, "\n  "))
			case len(bad) > 0:
				t.Errorf("violated:\n  %s", strings.Join(bad, "\n  "))
			case known:
				t.Errorf("the rule now holds: remove it from knownViolations")
			}
		})
	}
}

// maxLines is the longest a non-test Go source file may be.
const maxLines = 800

// knownLong lists non-test files (slash paths from the repository root)
// still over maxLines, with why. A file listed here that fits fails the
// test, so that the entry is removed.
var knownLong = map[string]string{}

// TestFileLength checks that no non-test .go file in the repository is
// longer than maxLines lines.
func TestFileLength(t *testing.T) {
	root := repoRoot(t)
	seen := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		seen++
		n, err := countLines(path)
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(root, path)
		r = filepath.ToSlash(r)
		why, known := knownLong[r]
		switch {
		case n > maxLines && known:
			t.Logf("known long file %s: %d lines (%s)", r, n, why)
		case n > maxLines:
			t.Errorf("%s has %d lines, more than %d: split it along its seams", r, n, maxLines)
		case known:
			t.Errorf("%s has %d lines now: remove it from knownLong", r, n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for r := range knownLong {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(r))); err != nil {
			t.Errorf("knownLong lists %s: %v; remove it", r, err)
		}
	}
	if seen < 50 {
		t.Fatalf("walked %d non-test Go files under %s; expected the whole tree", seen, root)
	}
}

// countLines returns the number of lines of the file at path.
func countLines(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		n++
	}
	return n, sc.Err()
}
