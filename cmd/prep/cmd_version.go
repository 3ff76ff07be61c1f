package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// Set at link time by the Makefile: -X main.version=... -X main.commit=...
// version is a release tag (git describe of a v* tag); empty or "dev" when
// the build is not of one.
var (
	version = "dev"
	commit  = ""
)

func init() { subcommands = append(subcommands, newVersionCmd) }

// versionInfo is what `prep version` (and `prep --version`) prints: the
// release version, the commit, the toolchain and the build settings
// recorded in the binary (runtime/debug.ReadBuildInfo).
type versionInfo struct {
	// Version is the release tag the binary was built from (linked in by
	// the Makefile), else the main module's version as `go install`
	// records it (v1.2.3, or a pseudo-version), else "devel".
	Version string `json:"version"`
	// Commit is the VCS revision ("unknown" when none was recorded);
	// CommitTime its time (RFC 3339) and Modified whether the work tree
	// had uncommitted changes, from the vcs.* build settings.
	Commit     string `json:"commit"`
	CommitTime string `json:"commit_time,omitempty"`
	Modified   bool   `json:"modified"`
	GoVersion  string `json:"go_version"`
	Platform   string `json:"platform"` // GOOS/GOARCH
	Module     string `json:"module,omitempty"`
	// Settings are the other build settings (-buildmode, -compiler,
	// -ldflags, -tags, -race, CGO_ENABLED, GOARCH, GOOS, GOAMD64, ...), in
	// the order the toolchain recorded them.
	Settings []buildSetting `json:"settings"`
}

// buildSetting is one build setting (debug.BuildSetting) as JSON.
type buildSetting struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// tool is the version recorded in shards and manifests: the release
// version, or for a build of no release "devel+" and the commit's first 12
// hex digits (when known), so shard provenance names the build.
func (v versionInfo) tool() string {
	if v.Version != "devel" || v.Commit == "unknown" {
		return v.Version
	}
	return "devel+" + v.Commit[:min(12, len(v.Commit))]
}

func buildVersion() versionInfo {
	v := versionInfo{Version: version, Commit: commit, GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH, Settings: []buildSetting{}}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v.Module = bi.Main.Path
		if (v.Version == "" || v.Version == "dev") && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if v.Commit == "" {
					v.Commit = s.Value
				}
			case "vcs.time":
				v.CommitTime = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			case "vcs":
			default:
				v.Settings = append(v.Settings, buildSetting{s.Key, s.Value})
			}
		}
	}
	if v.Version == "" || v.Version == "dev" {
		v.Version = "devel"
	}
	if v.Commit == "" {
		v.Commit = "unknown"
	}
	return v
}

// writeVersion writes v's text form: the version on the first line, then
// the commit, the toolchain and the build settings.
func writeVersion(w io.Writer, v versionInfo) error {
	var b strings.Builder
	fmt.Fprintf(&b, "prep %s\n", v.Version)
	c := v.Commit
	if v.CommitTime != "" {
		c += " (" + v.CommitTime + ")"
	}
	if v.Modified {
		c += ", with uncommitted changes"
	}
	fmt.Fprintf(&b, "  commit    %s\n", c)
	fmt.Fprintf(&b, "  go        %s %s\n", v.GoVersion, v.Platform)
	if v.Module != "" {
		fmt.Fprintf(&b, "  module    %s\n", v.Module)
	}
	for _, s := range v.Settings {
		fmt.Fprintf(&b, "  build     %s=%s\n", s.Key, s.Value)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func newVersionCmd(g *globalOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print prep's version, commit, Go version and build settings",
		Long: `version prints the release version (or "devel" for a build of no release),
the commit with its time and whether the tree had uncommitted changes, the Go
version and platform, and the build settings the toolchain recorded
(-ldflags, -tags, CGO_ENABLED, GOARCH, ...). prep --version is the same, and
takes --json too.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v := buildVersion()
			if asJSON {
				return newJSONEncoder(g.stdout).Encode(v)
			}
			return writeVersion(g.stdout, v)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON on stdout")
	return cmd
}

// versionFlagAsCommand rewrites a root-level --version (before any
// command name) as the version command, the other arguments following it,
// so that `prep --version` prints what `prep version` prints and takes its
// --json in any order.
func versionFlagAsCommand(args []string) []string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--version":
			out := append([]string{"version"}, args[:i]...)
			return append(out, args[i+1:]...)
		case a == "--log-format" || a == "--progress":
			i++ // its value
		case a == "--":
			return args
		case !strings.HasPrefix(a, "-"):
			return args // a command: its own flags follow
		}
	}
	return args
}
