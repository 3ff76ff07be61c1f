package source

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportDirection pins the import rules on the input side: pqread
// imports no prep package, only source and feature import pqread, source
// builds on pqread and plan only (small internal helpers aside), and
// verify reaches the source through source, never through convert.
func TestImportDirection(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	const mod = "github.com/prepml/prep/"
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", mod+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], mod)
		for _, imp := range f[1:] {
			if imp == mod+"pqread" && pkg != "source" && pkg != "feature" {
				t.Errorf("%s imports pqread: only source and feature read Parquet", pkg)
			}
		}
	}
	deps := func(pkg string) []string {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", mod+pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		var prep []string
		for _, d := range strings.Fields(string(out)) {
			if rest, ok := strings.CutPrefix(d, mod); ok && rest != pkg {
				prep = append(prep, rest)
			}
		}
		return prep
	}
	internal := func(d string) bool { return strings.HasPrefix(d, "internal/") }
	for pkg, ok := range map[string]func(string) bool{
		"pqread": internal,
		"source": func(d string) bool { return d == "pqread" || d == "plan" || internal(d) },
		"verify": func(d string) bool { return d != "convert" },
	} {
		for _, d := range deps(pkg) {
			if !ok(d) {
				t.Errorf("%s imports %s", pkg, d)
			}
		}
	}
}
