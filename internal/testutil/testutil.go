// Package testutil holds helpers shared by the tests of several prep
// packages: building the prep binary once per test run, running a command
// with its stdout, stderr, exit status and signal captured, digesting a
// directory tree, reading the Prometheus textfile a command wrote, and
// mounting a size-limited tmpfs, and writing a shard set with the real
// shardfmt writer (WriteShardSet, the one shard-set builder of the tests).
//
// It is imported only from _test.go files.
package testutil

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prepml/prep/internal/metrics"
)

// PrepPackage is the import path of the prep command.
const PrepPackage = "github.com/prepml/prep/cmd/prep"

// BuildPrep builds the prep binary into a new temporary directory named
// with prefix and returns its path and a cleanup that removes the
// directory. The error carries go build's combined output.
func BuildPrep(prefix string) (bin string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	bin = filepath.Join(dir, "prep")
	out, err := exec.Command("go", "build", "-o", bin, PrepPackage).CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("building prep: %v\n%s", err, out)
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

// MainWithPrep is a TestMain body: it builds prep (see BuildPrep), stores
// its path in *bin, runs the tests, runs cleanup (if not nil) and the
// binary's removal, and exits with the tests' code. A failed build exits 1
// before any test runs.
func MainWithPrep(m *testing.M, prefix string, bin *string, cleanup func()) {
	b, remove, err := BuildPrep(prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*bin = b
	code := m.Run()
	remove()
	if cleanup != nil {
		cleanup()
	}
	os.Exit(code)
}

// Result is how one finished command ended.
type Result struct {
	Args           []string       // the arguments shown in failure messages
	Code           int            // exit code; -1 when killed by a signal
	Signal         syscall.Signal // non-zero when the process died of a signal
	Stdout, Stderr string
}

// Running is a started command whose stdout and stderr are being captured.
type Running struct {
	Cmd    *exec.Cmd
	t      testing.TB
	args   []string
	so, se bytes.Buffer
	done   chan struct{} // closed when Cmd.Wait has returned
	err    error         // Cmd.Wait's error, set before done is closed
}

// Start starts cmd with its stdout and stderr captured; args is what
// failure messages show. It fails the test when cmd cannot be started.
func Start(t testing.TB, cmd *exec.Cmd, args []string) *Running {
	t.Helper()
	r := &Running{Cmd: cmd, t: t, args: args, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &r.so, &r.se
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s %q: %v", filepath.Base(cmd.Path), args, err)
	}
	go func() {
		r.err = cmd.Wait()
		close(r.done)
	}()
	return r
}

// Poll calls check every interval until it returns true or the command
// exits, and reports whether check returned true while the command ran.
// check runs on the caller's goroutine, so it may fail the test.
func (r *Running) Poll(interval time.Duration, check func() bool) bool {
	r.t.Helper()
	for {
		select {
		case <-r.done:
			return false
		default:
		}
		if check() {
			return true
		}
		time.Sleep(interval)
	}
}

// Kill sends SIGKILL to the command (an error from a process that has
// already exited is ignored); Wait then reports the signal.
func (r *Running) Kill() {
	_ = r.Cmd.Process.Signal(syscall.SIGKILL)
}

// Wait waits for the command and returns how it ended. It fails the test
// only when waiting fails for a reason other than a non-zero exit or a
// signal.
func (r *Running) Wait() Result {
	r.t.Helper()
	<-r.done
	res := Result{Args: r.args, Stdout: r.so.String(), Stderr: r.se.String()}
	var ee *exec.ExitError
	switch {
	case r.err == nil:
	case errors.As(r.err, &ee):
		res.Code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Signal = ws.Signal()
		}
	default:
		r.t.Fatalf("running %s %q: %v", filepath.Base(r.Cmd.Path), r.args, r.err)
	}
	return res
}

// Run runs cmd to completion (Start, then Wait).
func Run(t testing.TB, cmd *exec.Cmd, args []string) Result {
	t.Helper()
	return Start(t, cmd, args).Wait()
}

// MustExit fails the test unless the command exited with code.
func (r Result) MustExit(t testing.TB, code int) {
	t.Helper()
	if r.Code != code {
		t.Fatalf("prep %s: exit %d (signal %v), want %d\nstdout:\n%s\nstderr:\n%s",
			strings.Join(r.Args, " "), r.Code, r.Signal, code, r.Stdout, r.Stderr)
	}
}

// OK fails the test unless the command exited 0, and returns r.
func (r Result) OK(t testing.TB) Result {
	t.Helper()
	r.MustExit(t, 0)
	return r
}

// Failed checks the error contract of a failing run: a non-zero exit that
// is not a death by signal, and stderr naming every string of mustName.
func (r Result) Failed(t testing.TB, mustName ...string) {
	t.Helper()
	if r.Code == 0 {
		t.Fatalf("prep %s: exit 0, want a failure naming %q\nstdout: %s\nstderr: %s", strings.Join(r.Args, " "), mustName, r.Stdout, r.Stderr)
	}
	if r.Signal != 0 {
		t.Errorf("prep %s: killed by %v, want a clean error", strings.Join(r.Args, " "), r.Signal)
	}
	for _, s := range mustName {
		if !strings.Contains(r.Stderr, s) {
			t.Errorf("prep %s: stderr does not name %q:\n%s", strings.Join(r.Args, " "), s, r.Stderr)
		}
	}
}

// TreeDigests maps every regular file under dir, by slash-separated path
// relative to dir, to the lower-case hex SHA-256 of its bytes.
func TreeDigests(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		sum := sha256.Sum256(b)
		out[filepath.ToSlash(rel)] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ParseMetrics parses the Prometheus textfile at path. It fails the test
// when the file is missing or malformed.
func ParseMetrics(t testing.TB, path string) []metrics.Sample {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ss, err := metrics.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

// ReadMetrics parses the Prometheus textfile at path (see ParseMetrics) and
// returns each sample's value by metric name. It fails the test when a
// sample's command or output label is not command and output.
func ReadMetrics(t testing.TB, path, command, output string) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	for _, s := range ParseMetrics(t, path) {
		if s.Command != command || s.Output != output {
			t.Fatalf("unexpected labels %+v, want command %q output %q", s, command, output)
		}
		got[s.Name] = s.Value
	}
	return got
}

// CheckMetrics reports (t.Errorf) every metric of want whose value in got
// differs; a metric missing from got counts as 0.
func CheckMetrics(t testing.TB, got, want map[string]float64) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got[k] != want[k] {
			t.Errorf("%s = %v, want %v", k, got[k], want[k])
		}
	}
}

// LowerFDLimit lowers the process's soft open-file limit (RLIMIT_NOFILE) to
// n for the rest of the test, restoring it at cleanup, or skips the test
// when the limit cannot be changed. Tests using it must not run in
// parallel with others: the limit is process-wide.
func LowerFDLimit(t testing.TB, n uint64) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Skipf("cannot read the open-file limit: %v", err)
	}
	low := old
	setSoftLimit(&low, n)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skipf("cannot lower the open-file limit: %v", err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

// MountTmpfs mounts a tmpfs of size bytes on a new directory and unmounts
// it when the test ends, or skips the test when mounting is not allowed
// (it needs root or CAP_SYS_ADMIN).
func MountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a size-limited tmpfs (needs root or CAP_SYS_ADMIN): %v %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}
