package verify

import (
	"context"

	"github.com/prepml/prep/shardset"
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
	set, err := shardset.OpenDir(opts.Dir)
	if err != nil {
		return nil
	}
	defer set.Close()
	c := &checker{opts: opts, set: set, rep: &Report{}}
	m, err := set.ReadManifestUnchecked()
	if err != nil {
		return nil
	}
	c.man = m
	c.loadPlan()
	return c.conformingEpochs(context.Background())
}
