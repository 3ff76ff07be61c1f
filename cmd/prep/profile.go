package main

// --cpuprofile and --trace on the commands that move data (convert, verify,
// load) and on plan: a CPU profile (runtime/pprof) and an execution trace
// (runtime/trace) of the command's run, for users to send with a report of
// slowness. PREP_CPUPROFILE and PREP_TRACE name the files when the flags
// are not given (a launcher's environment, a wrapper script).

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"

	"github.com/spf13/cobra"
)

// profiledCommands are the commands that take --cpuprofile and --trace.
var profiledCommands = map[string]bool{"convert": true, "verify": true, "load": true, "plan": true}

// Environment variables naming the profile files when the flags are not
// given.
const (
	envCPUProfile = "PREP_CPUPROFILE"
	envTrace      = "PREP_TRACE"
)

// profileOptions are the profiling flags of one command.
type profileOptions struct {
	cpuProfile string // --cpuprofile FILE
	trace      string // --trace FILE
}

// addProfileFlags gives cmd --cpuprofile and --trace when it is one of
// profiledCommands, and wraps its RunE so that the profile and the trace
// cover the whole run (flags parsed, output written) and are flushed and
// closed before the exit status is decided. A profile file that cannot be
// created, that names an existing file holding anything but an earlier
// profile of its kind (checkReplaceable), or that both flags name, is a
// usage error (exit 2) and nothing is written; one that cannot be written at the end
// is an error (exit 1) unless the command failed already.
func addProfileFlags(cmd *cobra.Command) {
	if !profiledCommands[cmd.Name()] || cmd.RunE == nil {
		return
	}
	o := &profileOptions{}
	f := cmd.Flags()
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of this run to `FILE` (pprof format, for go tool pprof or a bug report; also $"+envCPUProfile+")")
	f.StringVar(&o.trace, "trace", "", "write an execution trace of this run to `FILE` (for go tool trace or a bug report; also $"+envTrace+")")
	runE := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) (err error) {
		stop, err := o.start()
		if err != nil {
			return err
		}
		defer func() {
			if serr := stop(); err == nil {
				err = serr
			}
		}()
		return runE(c, args)
	}
}

// start begins the CPU profile and the trace asked for by the flags or,
// failing them, the environment. It returns the function that stops them
// and closes their files.
func (o *profileOptions) start() (stop func() error, err error) {
	cpu, tr := o.cpuProfile, o.trace
	if cpu == "" {
		cpu = os.Getenv(envCPUProfile)
	}
	if tr == "" {
		tr = os.Getenv(envTrace)
	}
	var stops []func() error
	stop = func() error {
		var first error
		for i := len(stops) - 1; i >= 0; i-- {
			if err := stops[i](); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	if cpu != "" && tr != "" && sameFile(cpu, tr) {
		return nil, usagef("--trace %s: the same file as --cpuprofile; name two files", tr)
	}
	if err := checkReplaceable(cpu, cpuProfileMagic, "a CPU profile"); err != nil {
		return nil, usagef("--cpuprofile: %v", err)
	}
	if err := checkReplaceable(tr, traceMagic, "an execution trace"); err != nil {
		return nil, usagef("--trace: %v", err)
	}
	if cpu != "" {
		f, err := os.Create(cpu)
		if err != nil {
			return nil, usagef("--cpuprofile: %v", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("--cpuprofile %s: %w", cpu, err)
		}
		stops = append(stops, func() error {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				return fmt.Errorf("writing the CPU profile %s: %w", cpu, err)
			}
			return nil
		})
	}
	if tr != "" {
		f, err := os.Create(tr)
		if err != nil {
			_ = stop()
			return nil, usagef("--trace: %v", err)
		}
		if err := trace.Start(f); err != nil {
			_ = f.Close()
			_ = stop()
			return nil, fmt.Errorf("--trace %s: %w", tr, err)
		}
		stops = append(stops, func() error {
			trace.Stop()
			if err := f.Close(); err != nil {
				return fmt.Errorf("writing the trace %s: %w", tr, err)
			}
			return nil
		})
	}
	return stop, nil
}

// File headers of what --cpuprofile and --trace write: runtime/pprof
// writes a gzip stream (RFC 1952 magic 1f 8b), runtime/trace a header that
// starts "go 1." ("go 1.23 trace").
var (
	cpuProfileMagic = []byte{0x1f, 0x8b}
	traceMagic      = []byte("go 1.")
)

// checkReplaceable returns nil when path may be created or replaced by a
// profile: it does not exist, or is empty, or starts with magic (a profile
// of the same kind from an earlier run). Anything else (a manifest, a plan
// file, a directory) is an error naming the path, so that a mistyped flag
// never destroys the command's own input or output.
func checkReplaceable(path string, magic []byte, kind string) error {
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s exists and is not a regular file", path)
	}
	head := make([]byte, len(magic))
	n, err := io.ReadFull(f, head)
	if n == 0 && (err == io.EOF || err == nil) {
		return nil
	}
	if !bytes.Equal(head[:n], magic) {
		return fmt.Errorf("%s exists and is not %s; refusing to replace it (remove it or name another file)", path, kind)
	}
	return nil
}

// sameFile reports whether a and b name one file: the same cleaned path,
// or, when both exist, the same file by os.SameFile (links).
func sameFile(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}
