package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestRunCapturesOutputAndExitCode(t *testing.T) {
	args := []string{"-c", "echo out; echo err >&2; exit 3"}
	r := Run(t, exec.Command("sh", args...), args)
	if r.Code != 3 || r.Signal != 0 || r.Stdout != "out\n" || r.Stderr != "err\n" {
		t.Fatalf("Run = %+v, want exit 3, no signal, stdout %q, stderr %q", r, "out\n", "err\n")
	}
	r.MustExit(t, 3)
	r.Failed(t, "err")
}

func TestPollKillReportsTheSignal(t *testing.T) {
	run := Start(t, exec.Command("sleep", "30"), []string{"30"})
	calls := 0
	if !run.Poll(time.Millisecond, func() bool { calls++; return calls == 3 }) {
		t.Fatal("Poll = false while the command was still running")
	}
	run.Kill()
	r := run.Wait()
	if r.Signal != syscall.SIGKILL || r.Code != -1 || calls != 3 {
		t.Fatalf("after Kill: %+v after %d checks, want SIGKILL, exit -1 after 3", r, calls)
	}
}

func TestPollStopsWhenTheCommandExits(t *testing.T) {
	run := Start(t, exec.Command("true"), nil)
	if run.Poll(time.Millisecond, func() bool { return false }) {
		t.Fatal("Poll = true, but check never returned true")
	}
	run.Wait().OK(t)
}

func TestTreeDigests(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	for p, text := range map[string]string{"a/b/hello.txt": "hello", "empty": ""} {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(p)), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := TreeDigests(t, dir)
	want := map[string]string{
		"a/b/hello.txt": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824", // sha256("hello")
		"empty":         "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", // sha256("")
	}
	if len(got) != len(want) || got["a/b/hello.txt"] != want["a/b/hello.txt"] || got["empty"] != want["empty"] {
		t.Fatalf("TreeDigests = %v, want %v", got, want)
	}
}
