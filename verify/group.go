package verify

import (
	"fmt"
	"path"
	"strings"

	"github.com/prepml/prep/source"
)

// groupSourceFindings folds the per-batch source_unreadable findings
// caused by a changed source file ("F: source changed since the plan was
// made: ...": the batches that read F cannot be compared) into one finding
// per file, so that one changed file is one finding, not one per batch:
//
//   - when a source_changed finding reports F, the count is added to its
//     message ("...; 48 batches in 4 shards read from it were not
//     compared") and the per-batch findings are dropped;
//   - otherwise (F changed while the check ran) they become one finding
//     without a shard or batch, "48 batches in 4 shards not compared with
//     the source: MESSAGE".
//
// Findings of other causes are kept as they are, one per batch. The order
// of first occurrence is kept.
func groupSourceFindings(fs []Finding) []Finding {
	type group struct {
		first   int // index of the first finding of the group
		batches int
		shards  map[string]bool
	}
	groups := map[string]*group{}
	for i, f := range fs {
		if !changedCause(f) {
			continue
		}
		g := groups[f.Message]
		if g == nil {
			g = &group{first: i, shards: map[string]bool{}}
			groups[f.Message] = g
		}
		g.batches++
		g.shards[f.Shard] = true
	}
	changed := map[int]string{} // source_changed finding index -> its added count
	out := make([]Finding, 0, len(fs))
	for i, f := range fs {
		if !changedCause(f) {
			out = append(out, f)
			continue
		}
		g := groups[f.Message]
		counted := fmt.Sprintf("%d %s in %d %s", g.batches, plural(g.batches, "batch", "batches"), len(g.shards), plural(len(g.shards), "shard", "shards"))
		if j := changedFinding(fs, f.Message); j >= 0 {
			if g.first == i {
				changed[j] = counted
			}
			continue
		}
		if g.batches == 1 {
			out = append(out, f)
			continue
		}
		if g.first == i {
			out = append(out, Finding{Kind: KindSourceUnreadable, Message: counted + " not compared with the source: " + f.Message})
		}
	}
	for i := range out {
		for j, c := range changed {
			if sameFinding(out[i], fs[j]) {
				out[i].Message += "; " + c + " read from it were not compared"
			}
		}
	}
	return out
}

// changedCause reports whether f is a per-batch source_unreadable finding
// caused by a changed source file.
func changedCause(f Finding) bool {
	return f.Kind == KindSourceUnreadable && f.Batch != nil && strings.Contains(f.Message, ": "+source.ErrSourceChanged.Error())
}

// changedFinding returns the index in fs of the source_changed finding of
// the file a per-batch message blames ("REL: source changed since the plan
// was made: ..."), or -1. A source_changed finding names the file by its
// path (Shard), which ends in REL.
func changedFinding(fs []Finding, msg string) int {
	rel, _, ok := strings.Cut(msg, ": "+source.ErrSourceChanged.Error())
	if !ok || rel == "" {
		return -1
	}
	for j, f := range fs {
		if f.Kind == KindSourceChanged && (f.Shard == rel || strings.HasSuffix(f.Shard, "/"+path.Clean(rel))) {
			return j
		}
	}
	return -1
}

// sameFinding reports whether a and b are the same finding (compared by
// kind, place and message).
func sameFinding(a, b Finding) bool {
	return a.Kind == b.Kind && a.Shard == b.Shard && a.Message == b.Message && a.What == b.What && a.Expected == b.Expected && a.Actual == b.Actual
}

// plural returns one for n == 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
