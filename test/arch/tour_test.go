package arch

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// tourOutputRE matches what the README's tour writes inside the repository
// when run from its root: directories it makes (mkdir -p DIR) and files
// and directories it writes (-o PATH), relative paths only.
var tourOutputRE = regexp.MustCompile(`(?:mkdir -p|-o) ([A-Za-z0-9_.][^\s)` + "`" + `]*)`)

// TestTourLeavesNothingUntracked: every path the README's tour writes in
// the repository root (data/, plan.json, ...) is ignored by git, so that
// following the tour leaves the work tree clean. Skipped outside a git
// checkout.
func TestTourLeavesNothingUntracked(t *testing.T) {
	root := repoRoot(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	if err := exec.Command("git", "-C", root, "rev-parse", "--is-inside-work-tree").Run(); err != nil {
		t.Skip("not a git checkout")
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, tour, ok := strings.Cut(string(readme), "\n## Tour\n")
	if !ok {
		t.Fatal("README.md has no Tour section")
	}
	if i := strings.Index(tour, "\n## "); i >= 0 {
		tour = tour[:i]
	}
	seen := map[string]bool{}
	for _, m := range tourOutputRE.FindAllStringSubmatch(tour, -1) {
		p := strings.TrimSuffix(m[1], "/")
		if seen[p] {
			continue
		}
		seen[p] = true
		probe := p // a file the tour writes, or one inside a directory it makes
		if strings.HasPrefix(m[0], "mkdir") || strings.HasSuffix(m[1], "/") {
			probe += "/embeddings.parquet"
		}
		// --no-index: a path is checked against the ignore rules even if
		// a file of that name is tracked.
		if err := exec.Command("git", "-C", root, "check-ignore", "-q", "--no-index", probe).Run(); err != nil {
			t.Errorf("the tour writes %s in the repository root, which git does not ignore", p)
		}
	}
	if !seen["data"] || !seen["plan.json"] {
		t.Errorf("tour outputs found %v; want data and plan.json among them", seen)
	}
}
