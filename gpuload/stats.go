package gpuload

import "time"

// TransferStats returns the transfer path in use, why it was chosen, the
// paths given up at Open, and where the pipeline's wall time went so far.
// It may be called at any time, from any goroutine, until Close; after
// Close it returns what was counted by then.
func (l *Loader) TransferStats() TransferStats {
	switch be := l.be.(type) {
	case *cudaBackend:
		s := be.stats
		s.Fallbacks = append([]Fallback(nil), s.Fallbacks...)
		s.Batches = be.batches.Load()
		s.ReadSeconds = seconds(be.readNanos.Load())
		s.CopyCallSeconds = seconds(be.copyNanos.Load())
		s.EventWaitSeconds = seconds(be.waitNanos.Load())
		return s
	case *hostBackend:
		s := TransferStats{Backend: BackendHost, Requested: HostPathPread, Path: HostPathPread, Resident: -1, GDS: "not tried",
			Reason: "host backend: blocks read into the ring", Batches: be.batches.Load(), ReadSeconds: seconds(be.readTotal.Load())}
		if be.mapBlocks {
			s.Requested, s.Path, s.Reason = HostPathMap, HostPathMap, "host backend: views of the mapping (MapBlocks)"
		}
		return s
	}
	return TransferStats{}
}

func seconds(ns int64) float64 { return time.Duration(ns).Seconds() }
