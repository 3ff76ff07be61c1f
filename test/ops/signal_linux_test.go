package ops

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSecondSignalEndsAStuckConvert pins a convert that could not be
// stopped without SIGKILL: it catches SIGINT and SIGTERM to stop cleanly,
// but a run blocked where it does not watch for that (here: opening a named
// pipe given as --plan, which waits for a writer; a hung file system is the
// same) swallowed every further signal too. The first signal asks for a
// clean stop; a later one must end the process.
func TestSecondSignalEndsAStuckConvert(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "plan.json")
	secondSignalEnds(t, fifo, "convert", "--plan", fifo, "--tensor", "id=id:I64", "-o", filepath.Join(dir, "out"))
}

// TestSecondSignalEndsAStuckPlan pins the same fault in prep plan: with
// a named pipe as --sources it waited for a writer and swallowed every
// SIGINT and SIGTERM.
func TestSecondSignalEndsAStuckPlan(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "mix.yaml")
	secondSignalEnds(t, fifo, "plan", "--sources", fifo, "--global-batch", "4", "-o", filepath.Join(dir, "plan.json"))
}

// secondSignalEnds makes the named pipe fifo, starts prep with args (which
// open it), and checks that repeated SIGTERMs end the process blocked
// opening it.
func secondSignalEnds(t *testing.T, fifo string, args ...string) {
	t.Helper()
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	run := startPrep(t, args...)
	// Wait until a thread of the process is blocked opening the pipe, so
	// its signal handler is installed.
	tasks := filepath.Join("/proc", strconv.Itoa(run.Cmd.Process.Pid), "task", "*", "wchan")
	blocked := func() bool {
		ws, _ := filepath.Glob(tasks)
		for _, w := range ws {
			if b, err := os.ReadFile(w); err == nil && strings.TrimSpace(string(b)) == "wait_for_partner" {
				return true
			}
		}
		return false
	}
	if !run.Poll(time.Millisecond, blocked) {
		t.Fatalf("%s ended before blocking on the pipe: %+v", args[0], run.Wait())
	}
	// SIGTERM every 20 ms; after 10 s, open the pipe's other end so a
	// process that swallows them all can end (and the test fail).
	stopped := make(chan struct{})
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stopped:
				return
			case <-time.After(20 * time.Millisecond):
			}
			_ = run.Cmd.Process.Signal(syscall.SIGTERM)
			if i == 500 {
				if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
					w.Close()
				}
			}
		}
	}()
	res := run.Wait()
	close(stopped)
	if res.Signal != syscall.SIGTERM {
		t.Fatalf("after repeated SIGTERMs: exit %d, signal %v, stderr %q; want the process ended by SIGTERM", res.Code, res.Signal, res.Stderr)
	}
}
