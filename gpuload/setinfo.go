package gpuload

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/shardset"
)

// PlanFileName is the plan copy prep convert keeps beside manifest.json.
const PlanFileName = shardset.PlanName

// SetInfo is what a shard set says about itself, read from its
// manifest.json and its plan.json copy without opening a shard: the numbers
// a trainer checks before reading (world size, epochs, steps per epoch) and
// the identity it records for resume (fingerprints).
type SetInfo struct {
	// Fingerprint is the plan fingerprint (manifest and plan agree).
	Fingerprint string
	// OrderFingerprint fixes the global batch sequence; a resume cursor
	// (order fingerprint, global step) is valid for every world size that
	// divides GlobalBatch. Empty when the set has no plan.json.
	OrderFingerprint string
	// Epochs, WorldSize, Workers, GlobalBatch and StepsPerEpoch are the
	// plan's; 0 when the set has no plan.json.
	Epochs, WorldSize, Workers, GlobalBatch, StepsPerEpoch int
	// Shuffle is the plan's shuffle mode ("partitioned" orders depend on
	// the world size).
	Shuffle string
	// BatchSize is the per-rank batch size b of the shards.
	BatchSize int
	// Tensors is the tensor table (name, dtype, per-sample shape).
	Tensors []shardfmt.TensorInfo
	// Shards lists the (epoch, rank) shards present in this shard set.
	Shards []shardfmt.ShardEntry
}

// planHead is the part of plan.json SetInfo reads (plan/PLAN.md §9).
type planHead struct {
	Fingerprint      string `json:"fingerprint"`
	OrderFingerprint string `json:"order_fingerprint"`
	Config           struct {
		Epochs      int    `json:"epochs"`
		GlobalBatch int    `json:"global_batch"`
		WorldSize   int    `json:"world_size"`
		Workers     int    `json:"workers"`
		Shuffle     string `json:"shuffle"`
	} `json:"config"`
	Derived struct {
		StepsPerEpoch int `json:"steps_per_epoch"`
	} `json:"derived"`
}

// ReadSetInfo reads the manifest and plan copy of the shard set dir. A
// missing directory or manifest fails with ErrNoShardSet; a plan.json that
// disagrees with the manifest's plan fingerprint with ErrPlanMismatch. A set
// without plan.json (made by an older prep) gives zero plan numbers.
func ReadSetInfo(dir string) (*SetInfo, error) {
	set, err := shardset.Open(dir)
	if err != nil {
		return nil, setOpenError(dir, err)
	}
	defer set.Close()
	return setInfo(set)
}

// setInfo is ReadSetInfo of an open set.
func setInfo(set *shardset.Set) (*SetInfo, error) {
	m := set.Manifest()
	info := &SetInfo{Fingerprint: m.PlanFingerprint, BatchSize: m.BatchSize, Tensors: m.Tensors, Shards: m.Shards}
	planPath := set.Path(PlanFileName)
	b, err := set.PlanBytes()
	if errors.Is(err, fs.ErrNotExist) {
		return info, nil
	}
	if err != nil {
		return nil, &Error{Op: "reading plan", Path: planPath, Step: -1, Offset: -1, Err: err}
	}
	var p planHead
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, &Error{Op: "reading plan", Path: planPath, Step: -1, Offset: -1, Err: err}
	}
	if p.Fingerprint != m.PlanFingerprint {
		return nil, &Error{Op: "reading plan", Path: planPath, Step: -1, Offset: -1,
			Err: fmt.Errorf("%w: plan.json fingerprint %s, manifest %s", ErrPlanMismatch, p.Fingerprint, m.PlanFingerprint)}
	}
	info.OrderFingerprint = p.OrderFingerprint
	info.Epochs, info.WorldSize, info.Workers = p.Config.Epochs, p.Config.WorldSize, p.Config.Workers
	info.GlobalBatch, info.StepsPerEpoch, info.Shuffle = p.Config.GlobalBatch, p.Derived.StepsPerEpoch, p.Config.Shuffle
	return info, nil
}

// setOpenError describes a failed shardset.Open of dir, telling a missing
// directory or manifest (ErrNoShardSet) from a damaged one.
func setOpenError(dir string, err error) error {
	path := filepath.Join(dir, shardset.ManifestName)
	switch {
	case errors.Is(err, shardset.ErrNotSet):
		why := "no such directory"
		if fi, serr := os.Stat(dir); serr == nil && !fi.IsDir() {
			why = "not a directory"
		} else if serr != nil && !errors.Is(serr, fs.ErrNotExist) {
			why = serr.Error()
		}
		return &Error{Op: "opening shard set", Path: dir, Step: -1, Offset: -1, Err: fmt.Errorf("%w: %s", ErrNoShardSet, why)}
	case errors.Is(err, fs.ErrNotExist):
		return &Error{Op: "reading manifest", Path: path, Step: -1, Offset: -1,
			Err: fmt.Errorf("%w: no %s (not a shard set, or prep convert has not finished)", ErrNoShardSet, shardset.ManifestName)}
	}
	return &Error{Op: "reading manifest", Path: path, Step: -1, Offset: -1, Err: err}
}

// missingShard explains why the manifest of set lists no shard for (epoch,
// rank): outside the plan's range (ErrOutsidePlan, naming the range), or in
// the plan but not on this node (ErrNoShard: another node's rank, an epoch
// not converted here, or one deleted by prep gc).
func missingShard(set *shardset.Set, epoch, rank int) error {
	info, err := setInfo(set)
	if err == nil && info.Epochs > 0 {
		switch {
		case epoch < 0 || epoch >= info.Epochs:
			return fmt.Errorf("%w: epoch %d outside the plan's epochs [0, %d)", ErrOutsidePlan, epoch, info.Epochs)
		case rank < 0 || rank >= info.WorldSize:
			return fmt.Errorf("%w: rank %d outside the plan's ranks [0, %d) (world size %d)", ErrOutsidePlan, rank, info.WorldSize, info.WorldSize)
		}
	}
	return fmt.Errorf("%w: epoch %d rank %d not in %s (in the plan, but not converted on this node or deleted by prep gc)",
		ErrNoShard, epoch, rank, shardset.ManifestName)
}
