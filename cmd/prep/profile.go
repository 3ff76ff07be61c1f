package main

// --cpuprofile and --trace on the commands that move data (convert, verify,
// load): a CPU profile (runtime/pprof) and an execution trace
// (runtime/trace) of the command's run, for users to send with a report of
// slowness. PREP_CPUPROFILE and PREP_TRACE name the files when the flags
// are not given (a launcher's environment, a wrapper script).

import (
	"fmt"
	"os"
	"runtime/pprof"
	"runtime/trace"

	"github.com/spf13/cobra"
)

// profiledCommands are the commands that take --cpuprofile and --trace.
var profiledCommands = map[string]bool{"convert": true, "verify": true, "load": true}

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
// created is a usage error (exit 2); one that cannot be written at the end
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
