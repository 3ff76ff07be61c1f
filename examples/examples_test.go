package examples

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

var scripts = []string{
	"cron/prep-nightly.sh",
	"slurm/prep-array.sbatch",
	"slurm/prep-in-job.sbatch",
}

func TestScriptsParse(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not installed: cannot check shell syntax")
	}
	for _, s := range scripts {
		fi, err := os.Stat(s)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o111 == 0 {
			t.Errorf("%s is not executable", s)
		}
		out, err := exec.Command(bash, "-n", s).CombinedOutput()
		if err != nil {
			t.Errorf("bash -n %s: %v\n%s", s, err, out)
		}
	}
}

func TestCrontabLine(t *testing.T) {
	raw, err := os.ReadFile("cron/crontab")
	if err != nil {
		t.Fatal(err)
	}
	var entries []string
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			entries = append(entries, line)
		}
	}
	if len(entries) != 1 {
		t.Fatalf("want one crontab entry, got %d", len(entries))
	}
	f := strings.Fields(entries[0])
	if len(f) < 6 {
		t.Fatalf("crontab entry has %d fields: %q", len(f), entries[0])
	}
	if got := strings.Join(f[:5], " "); got != "30 1 * * *" {
		t.Errorf("schedule = %q", got)
	}
	if !strings.Contains(entries[0], "/prep-nightly.sh") {
		t.Errorf("entry does not run the wrapper: %q", entries[0])
	}
}

// TestNightlyWrapperExitCodes runs the cron wrapper against a fake prep and
// checks how it treats each prep exit code and which commands it issues.
func TestNightlyWrapperExitCodes(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	tests := []struct {
		name     string
		state    string // trainer epoch file contents; "" = no file
		code     int    // exit code of the fake prep's convert
		wantExit int
		wantCmds []string
	}{
		{name: "fresh node", code: 0, wantExit: 0, wantCmds: []string{"convert 0-1 0-7", "verify"}},
		{name: "sliding window", state: "3\n", code: 0, wantExit: 0, wantCmds: []string{"convert 3-4 0-7", "gc 3", "verify"}},
		{name: "locked is not an error", code: 3, wantExit: 0, wantCmds: []string{"convert 0-1 0-7"}},
		{name: "usage error", code: 2, wantExit: 2, wantCmds: []string{"convert 0-1 0-7"}},
		{name: "failure", code: 1, wantExit: 1, wantCmds: []string{"convert 0-1 0-7"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			calls := filepath.Join(dir, "calls")
			fake := filepath.Join(dir, "prep")
			// The fake prep logs "convert EPOCHS RANKS", "gc E" or "verify".
			script := `#!/usr/bin/env bash
cmd=$1; shift
line=$cmd
while (($#)); do
	case $1 in
	--epochs|--ranks|--keep-from-epoch) line="$line $2"; shift ;;
	esac
	shift
done
echo "$line" >>"` + calls + `"
if [[ $cmd == convert ]]; then exit ` + string(rune('0'+tc.code)) + `; fi
`
			if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "shards")
			state := filepath.Join(dir, "epoch")
			if tc.state != "" {
				if err := os.WriteFile(state, []byte(tc.state), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command("bash", "cron/prep-nightly.sh")
			cmd.Env = append(os.Environ(), "PREP_BIN="+fake, "PREP_PLAN=p.json", "PREP_SPEC=s.yaml",
				"PREP_OUT="+out, "PREP_STATE="+state, "PREP_METRICS="+filepath.Join(dir, "m.prom"))
			var stdout bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stdout
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantExit {
				t.Errorf("exit %d, want %d\n%s", code, tc.wantExit, stdout.String())
			}
			raw, _ := os.ReadFile(calls)
			got := strings.Split(strings.TrimSpace(string(raw)), "\n")
			if !slices.Equal(got, tc.wantCmds) {
				t.Errorf("prep calls %q, want %q", got, tc.wantCmds)
			}
			for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
				if !strings.HasPrefix(line, `{"time":"`) || !strings.Contains(line, `"output":"`+out+`"`) {
					t.Errorf("wrapper log line is not the JSON form: %q", line)
				}
			}
		})
	}
}

func TestKubernetesManifest(t *testing.T) {
	f, err := os.Open("k8s/prep-indexed-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	var job map[string]any
	kinds := []string{}
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("parsing YAML: %v", err)
		}
		kind, _ := doc["kind"].(string)
		kinds = append(kinds, kind)
		if kind == "Job" {
			job = doc
		}
	}
	if !slices.Equal(kinds, []string{"ConfigMap", "Job"}) {
		t.Fatalf("documents %v, want ConfigMap, Job", kinds)
	}
	get := func(v any, path ...string) any {
		for _, p := range path {
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("no %s in %v", p, path)
			}
			v = m[p]
		}
		return v
	}
	spec := get(job, "spec")
	if get(spec, "completionMode") != "Indexed" {
		t.Errorf("completionMode = %v", get(spec, "completionMode"))
	}
	if get(spec, "completions") != 4 || get(spec, "parallelism") != 4 {
		t.Errorf("completions/parallelism = %v/%v", get(spec, "completions"), get(spec, "parallelism"))
	}
	pod := get(spec, "template", "spec")
	containers := get(pod, "containers").([]any)
	c := containers[0].(map[string]any)
	var args []string
	for _, a := range c["args"].([]any) {
		args = append(args, a.(string))
	}
	for _, want := range []string{"convert", "--ranks=auto", "--ranks-per-node=$(PREP_RANKS_PER_NODE)", "--log-format=json", "--metrics-file=/textfile/prep.prom"} {
		if !slices.Contains(args, want) {
			t.Errorf("container args %q lack %q", args, want)
		}
	}
	env := c["env"].([]any)[0].(map[string]any)
	if env["name"] != "PREP_RANKS_PER_NODE" || env["value"] != "8" {
		t.Errorf("env = %v", env)
	}
	volumes := map[string]any{}
	for _, v := range get(pod, "volumes").([]any) {
		m := v.(map[string]any)
		volumes[m["name"].(string)] = m
	}
	if p := get(volumes["stage"], "hostPath", "path"); p != "/mnt/nvme/prep" {
		t.Errorf("stage volume hostPath = %v", p)
	}
	mounted := map[string]bool{}
	for _, m := range c["volumeMounts"].([]any) {
		mounted[m.(map[string]any)["name"].(string)] = true
	}
	for name := range volumes {
		if !mounted[name] {
			t.Errorf("volume %s is not mounted", name)
		}
	}
	topo := get(pod, "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution").([]any)
	if get(topo[0], "topologyKey") != "kubernetes.io/hostname" {
		t.Errorf("pods are not spread one per node")
	}
}
