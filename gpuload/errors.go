package gpuload

import (
	"errors"
	"fmt"
	"strings"

	"github.com/prepml/prep/gpuload/internal/cuda"
)

// Sentinel errors. Errors returned by this package wrap them (test with
// errors.Is); most arrive inside an *Error that says where.
var (
	// ErrNoShard is returned by Open when the (epoch, rank) is in the plan
	// but the shard set holds no shard for it (another node's rank, an epoch
	// not converted here or deleted by prep gc), or the shard file is
	// missing.
	ErrNoShard = errors.New("no shard for this epoch and rank on this node")

	// ErrNoShardSet is returned by Open and ReadSetInfo when the directory
	// does not exist or holds no manifest.json.
	ErrNoShardSet = errors.New("no shard set")

	// ErrOutsidePlan is returned by Open when the epoch or rank is outside
	// the plan's range (the message names the range).
	ErrOutsidePlan = errors.New("outside the plan")

	// ErrPlanMismatch is returned by Open when the shard set or the shard was
	// made by a different plan than Options.PlanFingerprint, or when the
	// shard's provenance, batch count or tensor table disagree with the
	// manifest.
	ErrPlanMismatch = errors.New("shard does not match the plan")

	// ErrCorrupt is returned by Open when the shard file's size differs from
	// the size the manifest records (a truncated or overwritten shard), and
	// by Next when a jagged tensor's offsets are invalid (wrapping
	// shardfmt.ErrCorrupt).
	ErrCorrupt = errors.New("shard file damaged")

	// ErrChecksum is returned by Next when Options.VerifyChecksums is set and a
	// block's CRC-32C differs from the batch table.
	ErrChecksum = errors.New("batch checksum mismatch")

	// ErrRingFull is returned by Next when every buffer of the ring is held by
	// unreleased batches, so no further batch can be delivered.
	ErrRingFull = errors.New("all ring buffers are held by unreleased batches")

	// ErrInvalid is returned for an option or argument out of range: an
	// unknown backend, a negative prefetch, a start or seek step outside
	// [0, Steps].
	ErrInvalid = errors.New("invalid argument")

	// ErrClosed is returned by calls on a closed Loader.
	ErrClosed = errors.New("loader closed")

	// ErrCUDAUnavailable is returned by Open with the cuda backend when the
	// binary was built without cgo or the CUDA driver library cannot be
	// loaded.
	ErrCUDAUnavailable = cuda.ErrUnavailable
)

// CUDAError is a failed CUDA driver call: entry point, CUresult, and the
// driver's name and message for it (cuGetErrorName, cuGetErrorString).
type CUDAError = cuda.Error

// Error is a failure tied to a place in a shard set. It wraps its cause.
type Error struct {
	Op     string // what was being done, e.g. "reading block"
	Path   string // shard or manifest file
	Epoch  int
	Rank   int
	Step   int   // batch index within the shard, -1 if not about one batch
	Offset int64 // file offset of the block, -1 if unknown
	Err    error
}

// Error formats as "gpuload: reading block: shard e0001-r0002.shard step 7
// offset 28672: <cause>".
func (e *Error) Error() string {
	s := "gpuload: " + e.Op + ": " + e.Path
	if e.Step >= 0 {
		s += fmt.Sprintf(" step %d", e.Step)
	}
	if e.Offset >= 0 {
		s += fmt.Sprintf(" offset %d", e.Offset)
	}
	return s + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// also returns err marked with kind as well (errors.Is(result, kind) and
// errors.Is(result, any sentinel err wraps)), reading as err alone when err's
// text already begins with kind's, so that a message never says
// "shard file damaged: shard file damaged: ...".
func also(kind, err error) error {
	if strings.HasPrefix(err.Error(), kind.Error()) {
		return alsoError{kind: kind, err: err}
	}
	return fmt.Errorf("%w: %w", kind, err)
}

// alsoError is err, also matching kind.
type alsoError struct{ kind, err error }

func (e alsoError) Error() string   { return e.err.Error() }
func (e alsoError) Unwrap() []error { return []error{e.kind, e.err} }
