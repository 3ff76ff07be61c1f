package verify_test

import (
	"context"
	"testing"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/verify"
	"github.com/prepml/prep/verify/verifytest"
)

// fixedOnly hides every method of a SampleSource but FillBlock and Close:
// a source reader that does not materialize jagged tensors.
type fixedOnly struct{ src verify.SampleSource }

func (f fixedOnly) FillBlock(ctx context.Context, ids []uint64, block []byte) error {
	return f.src.FillBlock(ctx, ids, block)
}

func (f fixedOnly) Close() error { return f.src.Close() }

// TestDeepJaggedNeedsJaggedSource pins that a jagged shard whose source
// reader is no verify.JaggedSource is not compared as if its tensors were
// fixed: each shard gets one source_unreadable finding naming the first
// jagged tensor, and no batch counts as compared.
func TestDeepJaggedNeedsJaggedSource(t *testing.T) {
	f := verifytest.BuildJagged(t)
	opener := func(p *plan.Plan, m *shardfmt.Manifest, root string, g shardfmt.Geometry, ts []shardfmt.TensorInfo) (verify.SampleSource, error) {
		src, err := verifytest.OpenSource(p, m, root, g, ts)
		return fixedOnly{src}, err
	}
	rep := verifytest.Run(t, verify.Options{Dir: f.Dir, Deep: true, Source: opener, Jobs: 1})
	if rep.DeepBatches != 0 || len(rep.Findings) != len(f.Man.Shards) {
		t.Fatalf("deep batches %d, findings:\n%s", rep.DeepBatches, verifytest.Lines(rep))
	}
	for i, x := range rep.Findings {
		want := `values not compared: tensor "h" is jagged and the source reader does not materialize jagged tensors`
		if x.Kind != verify.KindSourceUnreadable || x.Shard != f.Man.Shards[i].Path || x.Message != want {
			t.Errorf("finding %d: %s", i, x)
		}
	}
}
