package launcher

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestDetect(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		opts  Options
		want  Ranks
		err   error  // sentinel the error must wrap; nil = success
		msg   string // substring the error message must contain
		ranks string
	}{
		// torchrun
		{
			name: "torchrun node block, second node of two with 4 GPUs",
			env:  map[string]string{"RANK": "6", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "4", "WORLD_SIZE": "8"},
			want: Ranks{Launcher: Torchrun, Ranks: []int{4, 5, 6, 7}, WorldSize: 8, Node: 1, Nodes: 2},
		},
		{
			name: "torchrun first process of first node",
			env:  map[string]string{"RANK": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "2"},
			want: Ranks{Launcher: Torchrun, Ranks: []int{0, 1}, WorldSize: 2, Node: 0, Nodes: 1},
		},
		{
			name: "torchrun per process",
			env:  map[string]string{"RANK": "6", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "4", "WORLD_SIZE": "8"},
			opts: Options{PerProcess: true},
			want: Ranks{Launcher: Torchrun, Ranks: []int{6}, WorldSize: 8},
		},
		{
			name: "torchrun one process per node with ranks per node",
			env:  map[string]string{"RANK": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "WORLD_SIZE": "3"},
			opts: Options{RanksPerNode: 8, PlanWorldSize: 24},
			want: Ranks{Launcher: Torchrun, Ranks: []int{16, 17, 18, 19, 20, 21, 22, 23}, WorldSize: 24, Node: 2, Nodes: 3},
		},
		{
			name: "torchrun ranks per node but several processes per node",
			env:  map[string]string{"RANK": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "4"},
			opts: Options{RanksPerNode: 2},
			err:  ErrBadEnv, msg: "--nproc-per-node=1",
		},
		{
			name: "torchrun missing LOCAL_WORLD_SIZE",
			env:  map[string]string{"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"},
			err:  ErrBadEnv, msg: "LOCAL_WORLD_SIZE is not set",
		},
		{
			name: "torchrun rank not a number",
			env:  map[string]string{"RANK": "x", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "WORLD_SIZE": "2"},
			err:  ErrBadEnv, msg: `RANK="x" is not a non-negative integer`,
		},
		{
			name: "torchrun rank beyond world",
			env:  map[string]string{"RANK": "8", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "4", "WORLD_SIZE": "8"},
			err:  ErrBadEnv, msg: "RANK must be in [0, WORLD_SIZE) (RANK=8 WORLD_SIZE=8)",
		},
		{
			name: "torchrun local block spills past world",
			env:  map[string]string{"RANK": "5", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "WORLD_SIZE": "6"},
			err:  ErrBadEnv, msg: "[4, 8) is not inside",
		},
		{
			name: "torchrun world disagrees with plan",
			env:  map[string]string{"RANK": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "4", "WORLD_SIZE": "8"},
			opts: Options{PlanWorldSize: 16},
			err:  ErrPlanMismatch, msg: "launcher world size 8 differs from the plan's world size 16",
		},
		// Slurm job step
		{
			name: "slurm block distribution, uniform",
			env: map[string]string{"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1",
				"SLURM_NODEID": "1", "SLURM_NNODES": "2", "SLURM_TASKS_PER_NODE": "4(x2)"},
			opts: Options{PlanWorldSize: 8},
			want: Ranks{Launcher: Slurm, Ranks: []int{4, 5, 6, 7}, WorldSize: 8, Node: 1, Nodes: 2},
		},
		{
			name: "slurm block distribution, uneven nodes",
			env: map[string]string{"SLURM_PROCID": "8", "SLURM_NTASKS": "11", "SLURM_LOCALID": "0",
				"SLURM_NODEID": "2", "SLURM_NNODES": "3", "SLURM_TASKS_PER_NODE": "4(x2),3"},
			want: Ranks{Launcher: Slurm, Ranks: []int{8, 9, 10}, WorldSize: 11, Node: 2, Nodes: 3},
		},
		{
			name: "slurm ntasks per node",
			env: map[string]string{"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1",
				"SLURM_NODEID": "1", "SLURM_NNODES": "2", "SLURM_NTASKS_PER_NODE": "2"},
			want: Ranks{Launcher: Slurm, Ranks: []int{2, 3}, WorldSize: 4, Node: 1, Nodes: 2},
		},
		{
			name: "slurm cyclic distribution refused",
			env: map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0",
				"SLURM_NODEID": "1", "SLURM_NNODES": "2", "SLURM_TASKS_PER_NODE": "2(x2)"},
			err: ErrBadEnv, msg: "block distribution",
		},
		{
			name: "slurm per process",
			env:  map[string]string{"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1"},
			opts: Options{PerProcess: true},
			want: Ranks{Launcher: Slurm, Ranks: []int{3}, WorldSize: 4},
		},
		{
			name: "slurm one task per node with ranks per node",
			env: map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0",
				"SLURM_NODEID": "1", "SLURM_NNODES": "2", "SLURM_TASKS_PER_NODE": "1(x2)"},
			opts: Options{RanksPerNode: 4, PlanWorldSize: 8},
			want: Ranks{Launcher: Slurm, Ranks: []int{4, 5, 6, 7}, WorldSize: 8, Node: 1, Nodes: 2},
		},
		{
			name: "slurm ranks per node but several tasks per node",
			env: map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1",
				"SLURM_NODEID": "0", "SLURM_NNODES": "2"},
			opts: Options{RanksPerNode: 4},
			err:  ErrBadEnv, msg: "one Slurm task per node",
		},
		{
			name: "slurm tasks per node unknown",
			env:  map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0", "SLURM_NODEID": "0"},
			err:  ErrBadEnv, msg: "tasks on this node are unknown",
		},
		{
			name: "slurm malformed tasks per node",
			env: map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0",
				"SLURM_NODEID": "0", "SLURM_TASKS_PER_NODE": "2(x"},
			err: ErrBadEnv, msg: `malformed entry "2(x"`,
		},
		// Slurm job array
		{
			name: "slurm job array",
			env: map[string]string{"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "0",
				"SLURM_ARRAY_TASK_MAX": "3", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"},
			opts: Options{RanksPerNode: 2, PlanWorldSize: 8},
			want: Ranks{Launcher: Slurm, Ranks: []int{6, 7}, WorldSize: 8, Node: 3, Nodes: 4},
		},
		{
			name: "slurm job array starting at 1",
			env:  map[string]string{"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "2"},
			opts: Options{RanksPerNode: 3},
			want: Ranks{Launcher: Slurm, Ranks: []int{0, 1, 2}, WorldSize: 6, Node: 0, Nodes: 2},
		},
		{
			name: "slurm job array with a step",
			env: map[string]string{"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_MIN": "0",
				"SLURM_ARRAY_TASK_MAX": "6", "SLURM_ARRAY_TASK_COUNT": "4"},
			opts: Options{RanksPerNode: 2},
			err:  ErrBadEnv, msg: "not dense",
		},
		{
			name: "slurm job array needs ranks per node",
			env:  map[string]string{"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "2"},
			err:  ErrNeedRanksPerNode,
		},
		{
			name: "slurm job array disagrees with plan",
			env:  map[string]string{"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "2"},
			opts: Options{RanksPerNode: 4, PlanWorldSize: 4},
			err:  ErrPlanMismatch, msg: "launcher world size 8 differs from the plan's world size 4",
		},
		// Kubernetes Indexed Job
		{
			name: "kubernetes indexed job",
			env:  map[string]string{"JOB_COMPLETION_INDEX": "2"},
			opts: Options{RanksPerNode: 4, PlanWorldSize: 16},
			want: Ranks{Launcher: Kubernetes, Ranks: []int{8, 9, 10, 11}, Node: 2},
		},
		{
			name: "kubernetes needs ranks per node",
			env:  map[string]string{"JOB_COMPLETION_INDEX": "0"},
			err:  ErrNeedRanksPerNode, msg: "kubernetes: an Indexed Job pod is one node",
		},
		{
			name: "kubernetes index beyond plan",
			env:  map[string]string{"JOB_COMPLETION_INDEX": "4"},
			opts: Options{RanksPerNode: 4, PlanWorldSize: 16},
			err:  ErrPlanMismatch, msg: "node ranks 16-19 fall outside the plan's world size 16 (JOB_COMPLETION_INDEX=4)",
		},
		// detection
		{
			name: "torchrun wins over slurm",
			env: map[string]string{"RANK": "1", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "2",
				"SLURM_PROCID": "0", "SLURM_NTASKS": "1"},
			want: Ranks{Launcher: Torchrun, Ranks: []int{0, 1}, WorldSize: 2, Node: 0, Nodes: 1},
		},
		{
			name: "forced launcher",
			env: map[string]string{"RANK": "1", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "2",
				"SLURM_PROCID": "0", "SLURM_NTASKS": "1"},
			opts: Options{Launcher: Slurm, PerProcess: true},
			want: Ranks{Launcher: Slurm, Ranks: []int{0}, WorldSize: 1},
		},
		{
			name: "nothing set",
			env:  map[string]string{"HOME": "/root"},
			err:  ErrNoLauncher,
		},
		{
			name: "per process and ranks per node",
			env:  map[string]string{"JOB_COMPLETION_INDEX": "0"},
			opts: Options{RanksPerNode: 2, PerProcess: true},
			err:  ErrBadEnv, msg: "exclusive",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Detect(envOf(tc.env), tc.opts)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want wrapping %v", err, tc.err)
				}
				if !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("err = %q, want it to contain %q", err, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestEnvErrorMessage(t *testing.T) {
	_, err := Detect(envOf(map[string]string{"RANK": "3", "WORLD_SIZE": "2"}), Options{})
	want := "torchrun: RANK must be in [0, WORLD_SIZE) (RANK=3 WORLD_SIZE=2)"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	var ee *EnvError
	if !errors.As(err, &ee) || ee.Launcher != Torchrun || !reflect.DeepEqual(ee.Vars, []string{"RANK=3", "WORLD_SIZE=2"}) {
		t.Fatalf("EnvError = %+v", ee)
	}
}

func TestParseTasksPerNode(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		bad  bool
	}{
		{in: "4", want: []int{4}},
		{in: "4(x2),3", want: []int{4, 4, 3}},
		{in: "1,2(x3),1", want: []int{1, 2, 2, 2, 1}},
		{in: "2(x0)", bad: true},
		{in: "a", bad: true},
		{in: "", bad: true},
		{in: "-1", bad: true},
	}
	for _, tc := range tests {
		got, err := ParseTasksPerNode(tc.in)
		if tc.bad != (err != nil) || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseTasksPerNode(%q) = %v, %v; want %v (bad=%v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

func TestParseAndFormatList(t *testing.T) {
	tests := []struct {
		in    string
		world int
		want  []int
		str   string
		bad   bool
	}{
		{in: "0", world: 4, want: []int{0}, str: "0"},
		{in: "3,0-1", world: 4, want: []int{0, 1, 3}, str: "0-1,3"},
		{in: "2-5,4", world: 0, want: []int{2, 3, 4, 5}, str: "2-5"},
		{in: "4", world: 4, bad: true},
		{in: "3-1", bad: true},
		{in: "1,,2", bad: true},
		{in: "-1", bad: true},
		{in: "a-b", bad: true},
	}
	for _, tc := range tests {
		got, err := ParseList(tc.in, tc.world)
		if tc.bad != (err != nil) || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseList(%q, %d) = %v, %v; want %v (bad=%v)", tc.in, tc.world, got, err, tc.want, tc.bad)
			continue
		}
		if !tc.bad && FormatList(got) != tc.str {
			t.Errorf("FormatList(%v) = %q, want %q", got, FormatList(got), tc.str)
		}
	}
}
