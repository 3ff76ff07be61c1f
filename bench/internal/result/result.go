// Package result is the one-line JSON report a benchmark child process prints
// on stdout for the driver (bench/cmd/benchrun) to collect.
package result

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Prefix starts the report line, so the driver can find it among other output.
const Prefix = "BENCHRESULT "

// Result is what one measured run did.
type Result struct {
	Rows     int64   `json:"rows,omitempty"`     // rows (samples) processed
	Bytes    int64   `json:"bytes"`              // bytes the throughput is counted on (see each command's doc)
	Seconds  float64 `json:"seconds"`            // seconds of the measured region (excludes setup such as loading inputs)
	Extra    string  `json:"extra,omitempty"`    // free-form note shown in the table
	Checksum uint64  `json:"checksum,omitempty"` // a value derived from the data, so the work cannot be optimized away
}

// Print writes r as the report line on stdout.
func Print(r Result) {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	fmt.Fprintf(os.Stdout, "%s%s\n", Prefix, b)
}

// Parse finds the report line in a child's stdout.
func Parse(stdout string) (Result, bool) {
	var r Result
	for _, line := range strings.Split(stdout, "\n") {
		if s, ok := strings.CutPrefix(line, Prefix); ok {
			if json.Unmarshal([]byte(s), &r) == nil {
				return r, true
			}
		}
	}
	return r, false
}
