package verifytest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/prepml/prep/verify"
)

// Run runs verify.Run with opts, failing t on an error or on a report
// whose OK and FindingCount disagree with its findings.
func Run(t testing.TB, opts verify.Options) *verify.Report {
	t.Helper()
	rep, err := verify.Run(context.Background(), opts)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rep.OK != (len(rep.Findings) == 0) || rep.FindingCount != len(rep.Findings) {
		t.Fatalf("report ok=%v count=%d with %d findings", rep.OK, rep.FindingCount, len(rep.Findings))
	}
	return rep
}

// Key renders a finding's kind and location ("kind shard bN tensor idN",
// the parts present) for comparison.
func Key(f verify.Finding) string {
	s := string(f.Kind) + " " + f.Shard
	if f.Batch != nil {
		s += fmt.Sprintf(" b%d", *f.Batch)
	}
	if f.Tensor != "" {
		s += " " + f.Tensor
	}
	if f.SampleID != nil {
		s += fmt.Sprintf(" id%d", *f.SampleID)
	}
	return s
}

// Keys returns the sorted Keys of fs.
func Keys(fs []verify.Finding) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = Key(f)
	}
	sort.Strings(out)
	return out
}

// Lines renders every finding of rep, one per line, for failure messages.
func Lines(rep *verify.Report) string {
	var b strings.Builder
	for _, f := range rep.Findings {
		b.WriteString(f.String())
		b.WriteByte('\n')
	}
	return b.String()
}
