// Package launcher works out which training ranks this node should
// materialize from the environment variables that cluster launchers set, so
// that `prep convert --ranks auto` needs no home-made coordinator: the plan is
// the coordination, and the launcher only says where in the world this node
// sits.
//
// # Two ways to run prep under a launcher
//
// Per node (the default). prep runs once on each node and writes the shards
// of every rank that will train on that node. The launcher either describes
// processes (torchrun workers, Slurm tasks), in which case the node's ranks
// are the contiguous block that contains this process, or it describes nodes
// (a Slurm job array, a Kubernetes Indexed Job, torchrun with
// --nproc-per-node=1), in which case the caller must say how many ranks train
// on each node (Options.RanksPerNode) and node i takes ranks
// [i*RanksPerNode, (i+1)*RanksPerNode).
//
// Per process (Options.PerProcess). prep runs inside every training process
// and writes only that process's own rank.
//
// # Launchers and the rules applied
//
// torchrun (RANK, LOCAL_RANK, LOCAL_WORLD_SIZE, WORLD_SIZE). torchrun numbers
// ranks node by node: RANK = GROUP_RANK*LOCAL_WORLD_SIZE + LOCAL_RANK, so a
// node runs ranks [RANK-LOCAL_RANK, RANK-LOCAL_RANK+LOCAL_WORLD_SIZE) of
// WORLD_SIZE. With RanksPerNode set, prep is taken to have been started with
// --nproc-per-node=1: RANK is then the node index, WORLD_SIZE the node count,
// and the training world size is WORLD_SIZE*RanksPerNode (LOCAL_WORLD_SIZE,
// when set, must be 1).
//
// Slurm job array (SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_MIN,
// SLURM_ARRAY_TASK_COUNT or SLURM_ARRAY_TASK_MAX). Each array task is one
// node: node = SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN, nodes =
// SLURM_ARRAY_TASK_COUNT. RanksPerNode is required. Arrays with a step
// (--array=0-15:2) or a list with holes are refused because the node index
// would not be dense.
//
// Slurm job step (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID,
// SLURM_NNODES, SLURM_TASKS_PER_NODE or SLURM_NTASKS_PER_NODE). Without
// RanksPerNode every task is one training rank and a node runs the block of
// tasks that share its SLURM_NODEID: [SLURM_PROCID-SLURM_LOCALID, +tasks on
// this node), where the tasks on this node come from SLURM_TASKS_PER_NODE
// ("4(x2),3" style) at position SLURM_NODEID, or from SLURM_NTASKS_PER_NODE.
// This is Slurm's default block distribution; a cyclic distribution makes the
// block inconsistent with SLURM_TASKS_PER_NODE and is refused. With
// RanksPerNode, prep must run one task per node (SLURM_NTASKS ==
// SLURM_NNODES) and node = SLURM_NODEID.
//
// Kubernetes Indexed Job (JOB_COMPLETION_INDEX). Each pod is one node:
// ranks [JOB_COMPLETION_INDEX*RanksPerNode, +RanksPerNode). RanksPerNode is
// required. Kubernetes does not expose the completion count to the pod, so
// the world size is not claimed by the launcher (Ranks.WorldSize is 0) and the
// ranks are only checked against the plan's world size.
//
// When several launchers' variables are present (for example torchrun started
// by srun), the first in the order torchrun, Slurm, Kubernetes wins, because
// the innermost launcher sets the variables closest to the training process.
// Options.Launcher forces one.
package launcher

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Kind names a launcher.
type Kind string

// Launchers recognised by Detect.
const (
	// Auto picks the first launcher whose variables are present, in the
	// order Torchrun, Slurm, Kubernetes.
	Auto Kind = ""
	// Torchrun is PyTorch's elastic launcher (torch.distributed.run).
	Torchrun Kind = "torchrun"
	// Slurm is a Slurm job step (srun) or job array (sbatch --array).
	Slurm Kind = "slurm"
	// Kubernetes is a Kubernetes Job with completionMode: Indexed.
	Kubernetes Kind = "kubernetes"
)

// Sentinel errors. Errors returned by Detect wrap one of them, usually inside
// an *EnvError that names the variables involved.
var (
	// ErrNoLauncher is returned when no launcher's variables are set.
	ErrNoLauncher = errors.New("no launcher variables found")
	// ErrBadEnv is returned when a variable is missing, not a
	// non-negative integer, or inconsistent with the others.
	ErrBadEnv = errors.New("launcher variables invalid")
	// ErrNeedRanksPerNode is returned for launchers that describe nodes
	// rather than processes when Options.RanksPerNode is not set.
	ErrNeedRanksPerNode = errors.New("ranks per node required")
	// ErrPlanMismatch is returned when the launcher's world size differs
	// from the plan's, or the node's ranks fall outside the plan.
	ErrPlanMismatch = errors.New("launcher disagrees with plan")
)

// EnvError reports a problem with the launcher's variables. It names the
// launcher and the variables with the values that were read, and wraps one
// of the sentinel errors.
type EnvError struct {
	Launcher Kind
	Vars     []string // "NAME=value" pairs relevant to the problem, in a stable order
	Reason   string
	Err      error // one of the sentinels
}

// Error returns "LAUNCHER: reason (VAR=value ...)".
func (e *EnvError) Error() string {
	var b strings.Builder
	if e.Launcher != "" {
		b.WriteString(string(e.Launcher))
		b.WriteString(": ")
	}
	b.WriteString(e.Reason)
	if len(e.Vars) > 0 {
		b.WriteString(" (")
		b.WriteString(strings.Join(e.Vars, " "))
		b.WriteString(")")
	}
	return b.String()
}

// Unwrap returns the sentinel this error wraps.
func (e *EnvError) Unwrap() error { return e.Err }

// Options tune Detect.
type Options struct {
	// Launcher forces one launcher; Auto detects it.
	Launcher Kind
	// RanksPerNode is the number of training ranks on each node, for
	// launchers that start prep once per node (Slurm job array, Kubernetes
	// Indexed Job, torchrun --nproc-per-node=1, srun --ntasks-per-node=1).
	// 0 means the launcher describes training processes.
	RanksPerNode int
	// PerProcess returns only this process's own rank instead of the
	// node's block of ranks. Not valid with RanksPerNode.
	PerProcess bool
	// PlanWorldSize, when > 0, is the plan's world size R: Detect fails with
	// ErrPlanMismatch if the launcher claims a different one or the ranks do
	// not fit in [0, R).
	PlanWorldSize int
}

// Ranks is what Detect found.
type Ranks struct {
	Launcher Kind
	// Ranks are this node's (or process's) training ranks, ascending and
	// contiguous.
	Ranks []int
	// WorldSize is the training world size the launcher implies, or 0 when
	// the launcher does not say (Kubernetes).
	WorldSize int
	// Node is this node's index and Nodes the node count, when known
	// (Nodes is 0 when not known).
	Node, Nodes int
}

// Detect reads the launcher's variables through env (os.Getenv in
// production, a map in tests) and returns this node's ranks. See the package
// documentation for the rules of each launcher.
func Detect(env func(string) string, opts Options) (Ranks, error) {
	if opts.RanksPerNode < 0 {
		return Ranks{}, &EnvError{Reason: fmt.Sprintf("ranks per node must be positive, not %d", opts.RanksPerNode), Err: ErrBadEnv}
	}
	if opts.PerProcess && opts.RanksPerNode > 0 {
		return Ranks{}, &EnvError{Reason: "per-process ranks and ranks per node are exclusive", Err: ErrBadEnv}
	}
	kind := opts.Launcher
	if kind == Auto {
		switch {
		case env("RANK") != "" || env("WORLD_SIZE") != "":
			kind = Torchrun
		case env("SLURM_ARRAY_TASK_ID") != "" || env("SLURM_PROCID") != "":
			kind = Slurm
		case env("JOB_COMPLETION_INDEX") != "":
			kind = Kubernetes
		default:
			return Ranks{}, &EnvError{Reason: "none of RANK/WORLD_SIZE (torchrun), SLURM_PROCID or SLURM_ARRAY_TASK_ID (Slurm), JOB_COMPLETION_INDEX (Kubernetes Indexed Job) is set", Err: ErrNoLauncher}
		}
	}
	r := &reader{env: env, kind: kind}
	var out Ranks
	switch kind {
	case Torchrun:
		out = r.torchrun(opts)
	case Slurm:
		out = r.slurm(opts)
	case Kubernetes:
		out = r.kubernetes(opts)
	default:
		return Ranks{}, &EnvError{Reason: fmt.Sprintf("unknown launcher %q (want torchrun, slurm or kubernetes)", kind), Err: ErrBadEnv}
	}
	if r.err != nil {
		return Ranks{}, r.err
	}
	out.Launcher = kind
	if err := checkPlan(out, opts, r); err != nil {
		return Ranks{}, err
	}
	return out, nil
}

// block returns [first, first+n).
func block(first, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = first + i
	}
	return out
}

func checkPlan(out Ranks, opts Options, r *reader) error {
	R := opts.PlanWorldSize
	if R <= 0 {
		return nil
	}
	if out.WorldSize != 0 && out.WorldSize != R {
		return &EnvError{Launcher: out.Launcher, Vars: r.seen,
			Reason: fmt.Sprintf("launcher world size %d differs from the plan's world size %d", out.WorldSize, R), Err: ErrPlanMismatch}
	}
	if len(out.Ranks) == 0 {
		return nil
	}
	if last := out.Ranks[len(out.Ranks)-1]; last >= R {
		return &EnvError{Launcher: out.Launcher, Vars: r.seen,
			Reason: fmt.Sprintf("node ranks %s fall outside the plan's world size %d", FormatList(out.Ranks), R), Err: ErrPlanMismatch}
	}
	return nil
}

// reader reads integer variables with a sticky error and remembers what it
// read, so errors can show the values.
type reader struct {
	env  func(string) string
	kind Kind
	seen []string
	err  error
}

func (r *reader) fail(err error, format string, args ...any) {
	if r.err == nil {
		r.err = &EnvError{Launcher: r.kind, Vars: append([]string(nil), r.seen...), Reason: fmt.Sprintf(format, args...), Err: err}
	}
}

// has reports whether name is set, without recording it.
func (r *reader) has(name string) bool { return r.env(name) != "" }

// str returns the raw value of name, recording it when set.
func (r *reader) str(name string) string {
	v := strings.TrimSpace(r.env(name))
	if v != "" {
		r.seen = append(r.seen, name+"="+v)
	}
	return v
}

// int reads a required non-negative integer.
func (r *reader) int(name string) int {
	if r.err != nil {
		return 0
	}
	v := r.str(name)
	if v == "" {
		r.fail(ErrBadEnv, "%s is not set", name)
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		r.fail(ErrBadEnv, "%s=%q is not a non-negative integer", name, v)
		return 0
	}
	return n
}

// optInt reads an optional non-negative integer; ok is false when unset.
func (r *reader) optInt(name string) (n int, ok bool) {
	if r.err != nil || !r.has(name) {
		return 0, false
	}
	return r.int(name), r.err == nil
}

func (r *reader) torchrun(opts Options) Ranks {
	rank := r.int("RANK")
	world := r.int("WORLD_SIZE")
	if r.err != nil {
		return Ranks{}
	}
	if world == 0 || rank >= world {
		r.fail(ErrBadEnv, "RANK must be in [0, WORLD_SIZE)")
		return Ranks{}
	}
	if rpn := opts.RanksPerNode; rpn > 0 {
		if lws, ok := r.optInt("LOCAL_WORLD_SIZE"); ok && lws != 1 {
			r.fail(ErrBadEnv, "with ranks per node, start prep with one process per node (--nproc-per-node=1), not LOCAL_WORLD_SIZE=%d", lws)
			return Ranks{}
		}
		return Ranks{Ranks: block(rank*rpn, rpn), WorldSize: world * rpn, Node: rank, Nodes: world}
	}
	local := r.int("LOCAL_RANK")
	lws := r.int("LOCAL_WORLD_SIZE")
	if r.err != nil {
		return Ranks{}
	}
	if lws == 0 || local >= lws {
		r.fail(ErrBadEnv, "LOCAL_RANK must be in [0, LOCAL_WORLD_SIZE)")
		return Ranks{}
	}
	if local > rank || rank-local+lws > world {
		r.fail(ErrBadEnv, "node block [RANK-LOCAL_RANK, RANK-LOCAL_RANK+LOCAL_WORLD_SIZE) = [%d, %d) is not inside [0, WORLD_SIZE)", rank-local, rank-local+lws)
		return Ranks{}
	}
	if opts.PerProcess {
		return Ranks{Ranks: []int{rank}, WorldSize: world}
	}
	out := Ranks{Ranks: block(rank-local, lws), WorldSize: world}
	if world%lws == 0 && (rank-local)%lws == 0 {
		out.Node, out.Nodes = (rank-local)/lws, world/lws
	}
	return out
}

func (r *reader) slurm(opts Options) Ranks {
	if r.has("SLURM_ARRAY_TASK_ID") {
		return r.slurmArray(opts)
	}
	proc := r.int("SLURM_PROCID")
	ntasks := r.int("SLURM_NTASKS")
	if r.err != nil {
		return Ranks{}
	}
	if ntasks == 0 || proc >= ntasks {
		r.fail(ErrBadEnv, "SLURM_PROCID must be in [0, SLURM_NTASKS)")
		return Ranks{}
	}
	if rpn := opts.RanksPerNode; rpn > 0 {
		node := r.int("SLURM_NODEID")
		nnodes := r.int("SLURM_NNODES")
		if r.err != nil {
			return Ranks{}
		}
		if ntasks != nnodes {
			r.fail(ErrBadEnv, "with ranks per node, run one Slurm task per node (srun --ntasks-per-node=1): SLURM_NTASKS must equal SLURM_NNODES")
			return Ranks{}
		}
		if node >= nnodes {
			r.fail(ErrBadEnv, "SLURM_NODEID must be in [0, SLURM_NNODES)")
			return Ranks{}
		}
		return Ranks{Ranks: block(node*rpn, rpn), WorldSize: nnodes * rpn, Node: node, Nodes: nnodes}
	}
	if opts.PerProcess {
		return Ranks{Ranks: []int{proc}, WorldSize: ntasks}
	}
	local := r.int("SLURM_LOCALID")
	node := r.int("SLURM_NODEID")
	if r.err != nil {
		return Ranks{}
	}
	var perNode []int
	if v := r.str("SLURM_TASKS_PER_NODE"); v != "" {
		var err error
		if perNode, err = ParseTasksPerNode(v); err != nil {
			r.fail(ErrBadEnv, "SLURM_TASKS_PER_NODE: %v", err)
			return Ranks{}
		}
	} else if n, ok := r.optInt("SLURM_NTASKS_PER_NODE"); ok {
		if n == 0 || ntasks%n != 0 {
			r.fail(ErrBadEnv, "SLURM_NTASKS is not a multiple of SLURM_NTASKS_PER_NODE")
			return Ranks{}
		}
		perNode = make([]int, ntasks/n)
		for i := range perNode {
			perNode[i] = n
		}
	} else {
		if r.err == nil {
			r.fail(ErrBadEnv, "neither SLURM_TASKS_PER_NODE nor SLURM_NTASKS_PER_NODE is set, so the tasks on this node are unknown")
		}
		return Ranks{}
	}
	total, first := 0, 0
	for i, n := range perNode {
		if i == node {
			first = total
		}
		total += n
	}
	switch {
	case total != ntasks:
		r.fail(ErrBadEnv, "tasks per node add up to %d, not SLURM_NTASKS", total)
	case node >= len(perNode):
		r.fail(ErrBadEnv, "SLURM_NODEID is beyond the %d nodes in the tasks-per-node list", len(perNode))
	case local >= perNode[node]:
		r.fail(ErrBadEnv, "SLURM_LOCALID must be below this node's %d tasks", perNode[node])
	case proc-local != first:
		r.fail(ErrBadEnv, "task ids are not in Slurm's block distribution (node %d should start at task %d, found %d); use --distribution=block", node, first, proc-local)
	}
	if r.err != nil {
		return Ranks{}
	}
	return Ranks{Ranks: block(first, perNode[node]), WorldSize: ntasks, Node: node, Nodes: len(perNode)}
}

func (r *reader) slurmArray(opts Options) Ranks {
	id := r.int("SLURM_ARRAY_TASK_ID")
	lo, ok := r.optInt("SLURM_ARRAY_TASK_MIN")
	if !ok {
		lo = 0
	}
	count, hasCount := r.optInt("SLURM_ARRAY_TASK_COUNT")
	hi, hasMax := r.optInt("SLURM_ARRAY_TASK_MAX")
	if r.err != nil {
		return Ranks{}
	}
	switch {
	case hasCount && hasMax && hi-lo+1 != count:
		r.fail(ErrBadEnv, "job array is not dense (SLURM_ARRAY_TASK_MAX-SLURM_ARRAY_TASK_MIN+1 != SLURM_ARRAY_TASK_COUNT); use --array=0-N without a step")
	case !hasCount && !hasMax:
		r.fail(ErrBadEnv, "SLURM_ARRAY_TASK_COUNT is not set")
	case !hasCount:
		count = hi - lo + 1
	}
	if r.err == nil && (id < lo || id-lo >= count) {
		r.fail(ErrBadEnv, "SLURM_ARRAY_TASK_ID is outside the array")
	}
	if r.err == nil && opts.RanksPerNode == 0 {
		r.fail(ErrNeedRanksPerNode, "a job array task is one node; give the ranks per node")
	}
	if r.err != nil {
		return Ranks{}
	}
	node, rpn := id-lo, opts.RanksPerNode
	return Ranks{Ranks: block(node*rpn, rpn), WorldSize: count * rpn, Node: node, Nodes: count}
}

func (r *reader) kubernetes(opts Options) Ranks {
	idx := r.int("JOB_COMPLETION_INDEX")
	if r.err == nil && opts.RanksPerNode == 0 {
		r.fail(ErrNeedRanksPerNode, "an Indexed Job pod is one node; give the ranks per node")
	}
	if r.err != nil {
		return Ranks{}
	}
	rpn := opts.RanksPerNode
	return Ranks{Ranks: block(idx*rpn, rpn), Node: idx}
}

// ParseTasksPerNode expands Slurm's compressed tasks-per-node list, such as
// "4(x2),3" (= [4 4 3]), the format of SLURM_TASKS_PER_NODE and
// SLURM_JOB_CPUS_PER_NODE.
func ParseTasksPerNode(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, rep := part, "1"
		if i := strings.Index(part, "(x"); i >= 0 && strings.HasSuffix(part, ")") {
			n, rep = part[:i], part[i+2:len(part)-1]
		}
		v, err1 := strconv.Atoi(n)
		k, err2 := strconv.Atoi(rep)
		if err1 != nil || err2 != nil || v < 0 || k <= 0 || k > 1<<20 {
			return nil, fmt.Errorf("malformed entry %q in %q", part, s)
		}
		for ; k > 0; k-- {
			out = append(out, v)
		}
	}
	return out, nil
}

// ParseList parses an explicit index list such as "0,2,5-7" (ranks, or
// epochs for --epochs) into ascending, distinct values. Every value must be
// below worldSize when worldSize > 0; one range spans at most 2^20 values.
func ParseList(s string, worldSize int) ([]int, error) {
	seen := map[int]bool{}
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if part == "" || err1 != nil || err2 != nil || a < 0 || b < a {
			return nil, fmt.Errorf("bad list %q: entry %q is not N or N-M with 0 <= N <= M", s, part)
		}
		if worldSize > 0 && b >= worldSize {
			return nil, fmt.Errorf("bad list %q: rank %d is not below the world size %d", s, b, worldSize)
		}
		if b-a > 1<<20 {
			return nil, fmt.Errorf("bad list %q: range %q too large", s, part)
		}
		for v := a; v <= b; v++ {
			if !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// FormatList renders ascending ranks compactly: [0 1 2 5] becomes "0-2,5".
func FormatList(ranks []int) string {
	var b strings.Builder
	for i := 0; i < len(ranks); {
		j := i
		for j+1 < len(ranks) && ranks[j+1] == ranks[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(ranks[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(ranks[j]))
		}
		i = j + 1
	}
	return b.String()
}
