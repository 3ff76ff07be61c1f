package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/prepml/prep/gpuload"
	"github.com/prepml/prep/verify/verifytest"
)

// TestLoadJSONNamesTheTransferPath: `prep load --json` reports the reader's
// transfer path, why, and the batches it moved.
func TestLoadJSONNamesTheTransferPath(t *testing.T) {
	f := verifytest.Build(t)
	for _, c := range []struct {
		args         []string
		path, reason string
	}{
		{nil, gpuload.HostPathPread, "host backend: blocks read into the ring"},
	} {
		code, out, errs := runCLI(append([]string{"load", f.Dir, "--epoch", "0", "--rank", "0", "--json"}, c.args...)...)
		if code != 0 {
			t.Fatalf("load --json %v: exit %d: %s", c.args, code, errs)
		}
		var s loadSummary
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		s.Transfer.ReadSeconds = 0
		want := gpuload.TransferStats{Backend: gpuload.BackendHost, Requested: c.path, Path: c.path, Reason: c.reason, Resident: -1,
			GDS: "not tried", Batches: int64(s.Batches)}
		if s.Batches == 0 || !reflect.DeepEqual(s.Transfer, want) {
			t.Errorf("load --json %v: %d batches, transfer %+v, want %+v", c.args, s.Batches, s.Transfer, want)
		}
		if !strings.Contains(out, `"transfer": {`) || !strings.Contains(out, `"path": "pread"`) || strings.Contains(out, `"fallbacks"`) {
			t.Errorf("load --json output lacks the transfer object or lists empty fallbacks:\n%s", out)
		}
	}
}

// TestLoadUnknownCUDAPathIsAUsageError: --cuda-path with an unknown value
// exits 2 naming the accepted ones, before any driver is loaded.
func TestLoadUnknownCUDAPathIsAUsageError(t *testing.T) {
	f := verifytest.Build(t)
	code, out, errs := runCLI("load", f.Dir, "--epoch", "0", "--rank", "0", "--backend", "cuda", "--cuda-path", "dma")
	if want := `(want auto, register, direct, pread or gds)`; code != exitUsage || !strings.Contains(errs, want) || !strings.Contains(errs, "unknown CUDA path") {
		t.Errorf("load --cuda-path dma: exit %d, stderr %q, stdout %q; want exit 2 naming %q", code, errs, out, want)
	}
}
