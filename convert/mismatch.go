package convert

import (
	"fmt"
	"slices"
	"strings"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/plan"
)

// inputDifferences names the inputs in which an existing shard set (made
// from the plan in oldPlan, the bytes of its plan.json copy, nil when it
// has none, and the spec hash oldSpec) differs from this run's plan p and
// spec s, joined by "; ": each plan input (seed, epochs, global batch,
// world size, workers, shuffle, window, remainder) as "name: the set's
// value, this run's", the source files (named: changed, added, removed; at
// most three, then a count), the spec by hash. It returns "" when it can
// name none (no readable plan copy and the same spec): the caller then
// shows the fingerprints.
func inputDifferences(oldPlan []byte, oldSpec string, p *plan.Plan, s *feature.Spec) string {
	var out []string
	if oldPlan != nil {
		if op, err := plan.Parse(oldPlan); err == nil {
			out = append(out, configDifferences(op.Config, p.Config)...)
			if d := sourceDifferences(op.Source, p.Source); d != "" {
				out = append(out, d)
			}
		}
	}
	if !s.MatchesHash(oldSpec) {
		out = append(out, fmt.Sprintf("spec: the set's %s, this run's %s", oldSpec, s.Hash()))
	}
	return strings.Join(out, "; ")
}

// configDifferences lists the plan inputs that differ between a and b.
func configDifferences(a, b plan.Config) []string {
	var out []string
	diff := func(name string, x, y any) {
		if x != y {
			out = append(out, fmt.Sprintf("%s: the set's %v, this run's %v", name, x, y))
		}
	}
	diff("seed", a.Seed, b.Seed)
	diff("epochs", a.Epochs, b.Epochs)
	diff("global batch", a.GlobalBatch, b.GlobalBatch)
	diff("world size", a.WorldSize, b.WorldSize)
	diff("workers", a.Workers, b.Workers)
	diff("shuffle", a.Shuffle, b.Shuffle)
	diff("window", a.Window, b.Window)
	diff("remainder", a.Remainder, b.Remainder)
	return out
}

// sourceDifferences describes how the source files of b differ from a's
// (by path, size, footer and row groups; the root is not compared, as the
// fingerprint does not cover it), or "" when they are the same.
func sourceDifferences(a, b plan.Source) string {
	key := func(f plan.SourceFile) string {
		return fmt.Sprintf("%d %s %v", f.Size, f.FooterSHA256, f.RowGroups)
	}
	old := map[string]string{}
	for _, f := range append(slices.Clone(a.Files), a.EmptyFiles...) {
		old[f.Path] = key(f)
	}
	var changed, added []string
	seen := map[string]bool{}
	for _, f := range append(slices.Clone(b.Files), b.EmptyFiles...) {
		seen[f.Path] = true
		switch k, ok := old[f.Path]; {
		case !ok:
			added = append(added, f.Path)
		case k != key(f):
			changed = append(changed, f.Path)
		}
	}
	var removed []string
	for p := range old {
		if !seen[p] {
			removed = append(removed, p)
		}
	}
	slices.Sort(removed)
	var parts []string
	for _, g := range []struct {
		what  string
		paths []string
	}{{"changed", changed}, {"added", added}, {"removed", removed}} {
		if len(g.paths) == 0 {
			continue
		}
		names := g.paths[:min(3, len(g.paths))]
		s := fmt.Sprintf("%d %s (%s", len(g.paths), g.what, strings.Join(names, ", "))
		if len(g.paths) > len(names) {
			s += fmt.Sprintf(", %d more", len(g.paths)-len(names))
		}
		parts = append(parts, s+")")
	}
	if len(parts) == 0 {
		return ""
	}
	return "source files: " + strings.Join(parts, ", ")
}
