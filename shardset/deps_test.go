package shardset

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportDirection pins the import rules around the shard-set
// directory: shardset builds on shardfmt and plan only (small internal
// helpers aside), the reader reaches shards through it without the
// converter or the Parquet reader, and plan imports no other prep package.
func TestImportDirection(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	const mod = "github.com/prepml/prep/"
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
	allowed := func(pkg string, ok func(dep string) bool) {
		for _, d := range deps(pkg) {
			if !ok(d) {
				t.Errorf("%s imports %s", pkg, d)
			}
		}
	}
	internal := func(d string) bool { return strings.HasPrefix(d, "internal/") }
	allowed("plan", internal)
	allowed("shardfmt", internal)
	allowed("shardset", func(d string) bool { return d == "shardfmt" || d == "plan" || internal(d) })
	allowed("gpuload", func(d string) bool { return d != "convert" && d != "pqread" && !strings.HasPrefix(d, "convert/") })
	for _, pkg := range []string{"gpuload", "gc", "verify", "convert"} {
		found := false
		for _, d := range deps(pkg) {
			found = found || d == "shardset"
		}
		if !found {
			t.Errorf("%s does not reach the shard set through shardset", pkg)
		}
	}
}
