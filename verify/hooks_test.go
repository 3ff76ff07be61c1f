package verify

import (
	"context"

	"github.com/prepml/prep/shardfmt"
)

// SetPlanDigestPath turns the epoch digest path of plan conformance on or
// off for a test and returns a function restoring the previous setting.
func SetPlanDigestPath(on bool) (restore func()) {
	old := planDigestPath
	planDigestPath = on
	return func() { planDigestPath = old }
}

// ConformingEpochs returns the epochs the digest path accepts for opts (the
// manifest and plan loaded as Run loads them).
func ConformingEpochs(opts Options) map[int]bool {
	if opts.Jobs <= 0 {
		opts.Jobs = 2
	}
	c := &checker{opts: opts, rep: &Report{}}
	m, err := shardfmt.ReadManifestUnchecked(opts.Dir)
	if err != nil {
		return nil
	}
	c.man = m
	c.loadPlan()
	return c.conformingEpochs(context.Background())
}
