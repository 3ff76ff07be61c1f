package gpuload

import (
	"errors"
	"fmt"
	"os"

	"github.com/prepml/prep/gpuload/internal/cuda"
)

// Transfer paths of the cuda backend: how a batch block gets from the shard
// file to device memory. Options.CUDAPath takes one of them, or
// CUDAPathAuto; TransferStats.Path reports the one in use. The host
// backend reports HostPathPread or HostPathMap.
const (
	// CUDAPathAuto (the default, also when Options.CUDAPath is empty)
	// chooses per shard at Open; see chooseCUDAPaths for the rule.
	CUDAPathAuto = "auto"
	// CUDAPathRegister registers the mapped shard read-only with the driver
	// (pinning every page of it once, at Open) and DMAs each block straight
	// from the mapping: no CPU copy.
	CUDAPathRegister = "register"
	// CUDAPathDirect reads each block with O_DIRECT into a pinned ring slot
	// (the disk controller writes into pinned memory, bypassing the page
	// cache: no CPU copy), then DMAs it from there.
	CUDAPathDirect = "direct"
	// CUDAPathPread reads each block with pread into a pinned ring slot (one
	// CPU copy out of the page cache), then DMAs it from there. It works on
	// every file system, and is what the other paths fall back to.
	CUDAPathPread = "pread"
	// CUDAPathGDS reads each block with GPUDirect Storage (cuFileRead from
	// libcufile.so, loaded at run time) straight into device memory. Only
	// used when asked for: it is not part of the automatic choice (not yet
	// measured against direct, and cuFile's compatibility mode, without the
	// nvidia-fs module, goes through its own bounce buffers). The blocks
	// never reach host memory, so VerifyChecksums is refused (ErrInvalid),
	// and so is a shard with jagged tensors (their offsets are checked in
	// host memory).
	CUDAPathGDS = "gds"

	// HostPathPread is the host backend reading into its ring (the default).
	HostPathPread = "pread"
	// HostPathMap is the host backend handing out views of the mapping
	// (Options.MapBlocks).
	HostPathMap = "map"
)

// EnvCUDAPath names the environment variable consulted when Options.CUDAPath
// is empty and Options.RegisterMmap is false: a value there is used as the
// CUDAPath (so C and Python trainers can choose a path without an option of
// their own). An unknown value makes Open fail with ErrInvalid.
const EnvCUDAPath = "PREP_CUDA_PATH"

// The automatic choice's thresholds.
const (
	// RegisterMinResident is the least fraction of a shard's block bytes
	// that must be in the page cache (mincore at Open) for CUDAPathAuto to
	// register the mapping. Registration pins the pages it finds and faults
	// in the missing ones one page-cache miss at a time, at Open, on one
	// thread; above this fraction at most a tenth of the shard is read that
	// way, where O_DIRECT would read all of it from the disk again.
	RegisterMinResident = 0.9
	// RegisterMaxRAMFraction bounds the shard size CUDAPathAuto registers,
	// as a fraction of the memory the process may use (the RAM, or its
	// cgroup's memory.max when lower): registered pages cannot be reclaimed,
	// so a larger shard would leave the trainer and the page cache too
	// little.
	RegisterMaxRAMFraction = 0.5
)

// ErrPathUnavailable is returned by Open (wrapped, with the cause) when
// Options.CUDAPath names a path that cannot be used for this shard: O_DIRECT
// refused by the file system (tmpfs, some overlayfs and FUSE mounts) or
// misaligned for it, registration refused by the driver, or GPUDirect
// Storage absent (then the error also wraps ErrGDSUnavailable). The
// automatic choice never returns it: it falls back instead and records why
// in TransferStats.Fallbacks.
var ErrPathUnavailable = errors.New("CUDA transfer path unavailable")

// ErrGDSUnavailable is wrapped by Open's error when Options.CUDAPath is
// CUDAPathGDS and GPUDirect Storage cannot be used: libcufile.so is absent
// (or $PREP_LIBCUFILE names no loadable library), lacks an entry point, or
// its driver or file-handle registration fails.
var ErrGDSUnavailable = cuda.ErrGDSUnavailable

// Fallback is one transfer path tried at Open and given up, and why.
type Fallback struct {
	Path  string `json:"path"`
	Error string `json:"error"`
}

// TransferStats says which path a Loader moves blocks by, why it was
// chosen, and where the wall time of the pipeline went so far. Durations are
// in seconds of wall time (not CPU time); they cover every run since Open,
// across Seek.
type TransferStats struct {
	Backend   string `json:"backend"`   // BackendHost or BackendCUDA
	Requested string `json:"requested"` // CUDAPathAuto or the path asked for (cuda); the host path asked for
	Path      string `json:"path"`      // the path in use
	Reason    string `json:"reason"`    // why the first path tried was chosen
	// Resident is the fraction of the shard's block bytes found in the page
	// cache at Open (mincore over the mapping), or -1 when not measured (not
	// mapped, the host backend, or mincore failed).
	Resident float64 `json:"resident"`
	// Fallbacks lists the paths tried before Path and the error each failed
	// with, in order (empty when the first path worked).
	Fallbacks []Fallback `json:"fallbacks,omitempty"`
	// DirectAlign is the O_DIRECT offset and length alignment in bytes the
	// file system reported (statx), or assumed (4096) when it reports none;
	// 0 unless Path is CUDAPathDirect.
	DirectAlign uint32 `json:"direct_align,omitempty"`
	// GDS is "loaded" when libcufile.so was loaded, else why it could not
	// be, or "not tried": the library is loaded only for CUDAPathGDS.
	GDS string `json:"gds"`
	// SetupSeconds is the backend's set-up at Open: buffers, events, and on
	// CUDAPathRegister the registration (which pins every page).
	SetupSeconds float64 `json:"setup_seconds"`
	// Batches counts the blocks moved to their destination since Open.
	Batches int64 `json:"batches"`
	// ReadSeconds is the time spent reading blocks into the ring (pread,
	// O_DIRECT, cuFileRead), checksums excluded.
	ReadSeconds float64 `json:"read_seconds"`
	// CopyCallSeconds is the time spent in the calls that queue copies
	// (cuMemcpyHtoDAsync and cuEventRecord).
	CopyCallSeconds float64 `json:"copy_call_seconds"`
	// EventWaitSeconds is the time the copier spent waiting for copies to
	// complete (cuEventSynchronize).
	EventWaitSeconds float64 `json:"event_wait_seconds"`
}

// pathInputs is what the automatic choice looks at for one shard.
type pathInputs struct {
	steps      int     // blocks in the shard
	mapped     bool    // the shard reader mapped the file
	resident   float64 // fraction of block bytes in page cache, -1 unknown
	shardBytes uint64  // bytes of the blocks (the span registration pins)
	ramBytes   uint64  // physical memory, 0 unknown
}

// pathPlan is the ordered list of paths to try at Open, the reason for the
// first, and fallbacks already known before trying any.
type pathPlan struct {
	paths     []string
	reason    string
	fallbacks []Fallback
	explicit  bool // the caller asked for paths[0]: a failure fails Open
}

// requestedPath returns the path asked for by opts (and $PREP_CUDA_PATH),
// CUDAPathAuto when none, or an error wrapping ErrInvalid.
func requestedPath(opts Options) (string, error) {
	p := opts.CUDAPath
	if opts.RegisterMmap {
		if p != "" && p != CUDAPathRegister {
			return "", fmt.Errorf("%w: RegisterMmap with CUDAPath %q", ErrInvalid, p)
		}
		p = CUDAPathRegister
	}
	if p == "" {
		p = os.Getenv(EnvCUDAPath)
	}
	switch p {
	case "":
		return CUDAPathAuto, nil
	case CUDAPathAuto, CUDAPathRegister, CUDAPathDirect, CUDAPathPread, CUDAPathGDS:
		return p, nil
	}
	return "", fmt.Errorf("%w: unknown CUDA path %q (want auto, register, direct, pread or gds)", ErrInvalid, p)
}

// chooseCUDAPaths is the rule of the cuda backend's transfer path, chosen
// per shard at Open (a shard set's shards are alike, so in practice per
// shard set). Measured on an H200 (bench/gpu-results.md): pread into the
// pinned ring is one core's memory copy out of the page cache (8.1 GB/s,
// 0.17x the pinned-copy peak), while DMA from the registered mapping ran at
// the link (53.4 GB/s, 1.09x). So, with CUDAPathAuto:
//
//   - a mapped shard with at least RegisterMinResident of its block bytes in
//     the page cache, no larger than RegisterMaxRAMFraction of physical
//     memory: register it (after prep convert it usually is resident);
//   - otherwise O_DIRECT into the pinned ring: the disk is the bound, and
//     the controller writes into pinned memory with no CPU copy (a pread of
//     a cold shard would add the page cache's copy on top of the disk);
//   - pread into the pinned ring last: it works everywhere.
//
// Each path that fails at Open (registration refused, O_DIRECT refused or
// misaligned) falls back to the next, recorded in TransferStats.Fallbacks.
// An explicit request is tried alone, except that registration of a shard
// that is not mapped falls back to pread as it always has.
func chooseCUDAPaths(req string, in pathInputs) pathPlan {
	if req != CUDAPathAuto {
		if req == CUDAPathRegister && !in.mapped && in.steps > 0 {
			return pathPlan{paths: []string{CUDAPathPread}, reason: "requested register; the shard is not mapped",
				fallbacks: []Fallback{{Path: CUDAPathRegister, Error: "the shard reader could not map the file"}}, explicit: true}
		}
		return pathPlan{paths: []string{req}, reason: "requested", explicit: true}
	}
	switch {
	case in.steps == 0:
		return pathPlan{paths: []string{CUDAPathPread}, reason: "empty shard: nothing to read"}
	case !in.mapped:
		return pathPlan{paths: []string{CUDAPathDirect, CUDAPathPread}, reason: "shard not mapped: cannot register it"}
	case in.resident < 0:
		return pathPlan{paths: []string{CUDAPathDirect, CUDAPathPread}, reason: "page cache residency unknown"}
	case in.resident < RegisterMinResident:
		return pathPlan{paths: []string{CUDAPathDirect, CUDAPathPread},
			reason: fmt.Sprintf("%s of the shard in page cache, under %.0f%%", percent(in.resident), 100*RegisterMinResident)}
	case in.ramBytes > 0 && float64(in.shardBytes) > RegisterMaxRAMFraction*float64(in.ramBytes):
		return pathPlan{paths: []string{CUDAPathDirect, CUDAPathPread},
			reason: fmt.Sprintf("%s of the shard in page cache, but its %d bytes exceed %.0f%% of the %d bytes of RAM", percent(in.resident), in.shardBytes, 100*RegisterMaxRAMFraction, in.ramBytes)}
	}
	return pathPlan{paths: []string{CUDAPathRegister, CUDAPathDirect, CUDAPathPread},
		reason: fmt.Sprintf("%s of the shard in page cache", percent(in.resident))}
}

// percent formats a fraction as a percentage, rounded down so that "100%"
// means all of it.
func percent(f float64) string {
	p := int(f * 100)
	if p == 100 && f < 1 {
		p = 99
	}
	return fmt.Sprintf("%d%%", p)
}

// directAlignment checks the O_DIRECT rules for the blocks of a shard: every
// read's file offset and length must be multiples of the file system's
// offset alignment (its logical block size, statx STATX_DIOALIGN), and the
// buffer address a multiple of its memory alignment. Shard blocks start at
// data_off + k*block_size, both multiples of 4096, and the pinned ring's
// slots are page-aligned, so any alignment up to 4096 that divides them
// holds; a larger one (a device with 8 KiB or 64 KiB logical blocks) is
// refused, as is an alignment that is not a power of two. The error names
// the rule broken.
func directAlignment(offAlign, memAlign uint32, dataOff, blockSize uint64, bufs []uintptr) error {
	if offAlign == 0 || offAlign&(offAlign-1) != 0 {
		return fmt.Errorf("file system offset alignment %d is not a power of two", offAlign)
	}
	if memAlign == 0 || memAlign&(memAlign-1) != 0 {
		return fmt.Errorf("file system memory alignment %d is not a power of two", memAlign)
	}
	if dataOff%uint64(offAlign) != 0 {
		return fmt.Errorf("blocks start at offset %d, not a multiple of the %d-byte O_DIRECT alignment", dataOff, offAlign)
	}
	if blockSize%uint64(offAlign) != 0 {
		return fmt.Errorf("block size %d is not a multiple of the %d-byte O_DIRECT alignment", blockSize, offAlign)
	}
	for _, b := range bufs {
		if b%uintptr(memAlign) != 0 {
			return fmt.Errorf("pinned buffer at %#x is not %d-byte aligned for O_DIRECT", b, memAlign)
		}
	}
	return nil
}
