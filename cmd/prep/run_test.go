package main

import "bytes"

// runPrep runs the prep command line with args in process and returns its
// exit code and what it wrote to stdout and stderr.
func runPrep(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

// runCLI is runPrep with progress bars off (--progress never).
func runCLI(args ...string) (code int, stdout, stderr string) {
	return runPrep(append([]string{"--progress", "never"}, args...)...)
}
