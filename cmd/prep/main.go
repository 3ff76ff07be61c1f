// Command prep pre-materializes Parquet datasets into tensor shards
// (fixed-shape and jagged tensors, each batch one contiguous block) for
// deterministic, transform-free training input.
//
// Exit codes (also in README.md):
//
//	0  success
//	1  the job failed, or a check found problems
//	2  usage error (bad flags or arguments)
//	3  another run holds the output directory's lock
//	4  internal error (a bug): prep panicked (the panic and stack are
//	   printed) or found one of its own invariants broken (feature.ErrInternal)
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
