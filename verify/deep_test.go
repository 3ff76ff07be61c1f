package verify_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/verify"
	"github.com/prepml/prep/verify/verifytest"
)

// TestDeepSkipsJaggedTensorsWithAFinding pins that verify --deep, which
// compares fixed-size samples, does not compare a jagged shard's bytes as
// if they were fixed: the shard gets one source_unreadable finding naming
// the jagged tensor, and its source is never opened.
func TestDeepSkipsJaggedTensorsWithAFinding(t *testing.T) {
	dir := jaggedSet(t)
	opened := false
	opener := func(*plan.Plan, *shardfmt.Manifest, string, shardfmt.Geometry, []shardfmt.TensorInfo) (verify.SampleSource, error) {
		opened = true
		return nil, errors.New("not reached")
	}
	rep, err := verify.Run(context.Background(), verify.Options{Dir: dir, Deep: true, Source: opener, Jobs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if opened {
		t.Fatal("the source was opened for a jagged shard")
	}
	var found bool
	for _, f := range rep.Findings {
		if f.Kind == verify.KindSourceUnreadable && strings.Contains(f.Message, `tensor "h" is jagged`) {
			found = true
		}
	}
	if !found {
		t.Fatalf("no finding names the jagged tensor:\n%s", verifytest.Lines(rep))
	}
}
