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

// SetShardFiles sets, for a test, the number of shard files verify keeps
// open at once (0: the default; never fewer than Jobs) and a hook called
// after each shard file opened for a shard's check (open true) and each
// closed (open false), with the shard's manifest path. It returns a
// function restoring the previous settings.
func SetShardFiles(limit int, hook func(name string, open bool)) (restore func()) {
	oldCap, oldHook := openShardsCap, shardFileHook
	openShardsCap, shardFileHook = limit, hook
	return func() { openShardsCap, shardFileHook = oldCap, oldHook }
}

// SetAdmitWaitHook sets, for a test, a function called with +1 as a batch
// comparison starts waiting for its blocks' admission and -1 as it wakes.
// It returns a function restoring the previous hook.
func SetAdmitWaitHook(hook func(delta int)) (restore func()) {
	old := admitWaitHook
	admitWaitHook = hook
	return func() { admitWaitHook = old }
}

// SetMappedShardHook sets, for a test, a function called with the manifest
// path of each shard opened mapped (ReadMmap), before anything of it is
// checked. It returns a function restoring the previous hook.
func SetMappedShardHook(hook func(name string)) (restore func()) {
	old := mappedShardHook
	mappedShardHook = hook
	return func() { mappedShardHook = old }
}
