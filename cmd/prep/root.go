package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// globalOptions are the flags every command shares.
type globalOptions struct {
	logFormat string // text | json
	progress  string // auto | always | never
	quiet     bool

	stdout io.Writer
	stderr io.Writer
	log    *slog.Logger
}

// summary is where a command's text summary goes: stdout, or nowhere with
// --quiet. Machine output (--json) and a command's requested output (plan
// show, inspect, verify findings) always go to stdout.
func (g *globalOptions) summary() io.Writer {
	if g.quiet {
		return io.Discard
	}
	return g.stdout
}

// newJSONEncoder returns an encoder for --json output on w that writes <, >
// and & as themselves (not \u003c escapes: the output is not HTML).
func newJSONEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

// showProgress reports whether progress bars should be drawn on stderr.
func (g *globalOptions) showProgress() bool {
	if g.quiet {
		return false
	}
	switch g.progress {
	case "always":
		return true
	case "never":
		return false
	}
	f, ok := g.stderr.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func newRootCmd(stdout, stderr io.Writer) (*cobra.Command, *globalOptions) {
	g := &globalOptions{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "prep",
		Short: "Pre-materialize Parquet into deterministic tensor shards for training",
		Long: `prep turns Parquet datasets into tensor shard files ahead of training:
fixed-shape tensors, and jagged ones (a variable number of values per
sample, stored as values plus offsets) from list and map columns. A plan
fixes the order of every epoch (seeded shuffle, ranks and data-loader
workers) as a pure function of a small plan.json; convert decodes each
Parquet column once and writes one shard per (epoch, rank), each batch one
contiguous block; verify proves the shards are whole and match the plan and
source; the gpuload reader then copies each batch to the GPU with one read
and one DMA, jagged tensors included, and no transform.

Typical run:
  prep plan --source data/ --seed 7 --epochs 2 --global-batch 1024 --world-size 8 -o plan.json
  prep convert --plan plan.json --spec features.yaml -o /local/shards
  prep verify /local/shards

Exit codes: 0 success, 1 failed or problems found, 2 usage error,
3 another run holds the output directory's lock, 4 internal error (a bug).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			var h slog.Handler
			level := slog.LevelInfo
			if g.quiet {
				level = slog.LevelWarn
			}
			switch g.logFormat {
			case "text":
				h = slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: level})
			case "json":
				h = slog.NewJSONHandler(g.stderr, &slog.HandlerOptions{Level: level})
			default:
				return usagef("--log-format must be text or json, not %q", g.logFormat)
			}
			switch g.progress {
			case "auto", "always", "never":
			default:
				return usagef("--progress must be auto, always or never, not %q", g.progress)
			}
			g.log = slog.New(h)
			return nil
		},
	}
	// --version is the version command (versionFlagAsCommand); declared
	// here so that it shows in --help.
	root.Flags().Bool("version", false, "print the version, commit, Go version and build settings (same as prep version; takes --json)")
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&g.logFormat, "log-format", "text", "diagnostics format on stderr: text or json")
	pf.StringVar(&g.progress, "progress", "auto", "progress bars on stderr: auto (only on a terminal), always or never")
	pf.BoolVarP(&g.quiet, "quiet", "q", false, "print only warnings, errors and the output asked for (--json, findings, listings); no summaries or progress bars")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w\nRun '%s --help' for usage.", err, c.CommandPath())}
	})
	for _, add := range subcommands {
		c := add(g)
		addProfileFlags(c) // convert, verify, load: profile.go
		root.AddCommand(c)
	}
	return root, g
}

// subcommands holds the constructors of every command; each command file
// registers its own in an init function.
var subcommands []func(*globalOptions) *cobra.Command

// run executes the command line and returns the process exit code. A
// panic in the command's goroutine is caught here and exits exitCrash with
// the panic value and stack on stderr, so a crash never looks like a usage
// error (exit 2).
func run(args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "prep: internal error (a bug in prep; please report it): panic: %v\n%s", r, debug.Stack())
			code = exitCrash
		}
	}()
	root, g := newRootCmd(stdout, stderr)
	root.SetArgs(versionFlagAsCommand(args))
	err := root.Execute()
	lg := g.log
	if g.logFormat != "json" {
		lg = nil // text: the error as a sentence, "prep: ...", not a log record
	}
	return exitCode(err, stderr, lg)
}
