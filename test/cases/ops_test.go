package cases

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/internal/testutil"
)

// shownBatch and shownRank are the --json output of prep plan show.
type shownBatch struct {
	Step    int      `json:"step"`
	Worker  int      `json:"worker"`
	Samples []uint64 `json:"samples"`
	Pad     []bool   `json:"pad"`
}

type shownRank struct {
	Plan    string       `json:"plan"`
	Steps   int          `json:"steps"`
	Batches []shownBatch `json:"batches"`
}

// planShow runs prep plan show --json for one (epoch, rank) and optionally
// one worker (worker < 0: all).
func planShow(t testing.TB, planPath string, epoch, rank, worker int) shownRank {
	t.Helper()
	args := []string{"plan", "show", planPath, "--epoch", strconv.Itoa(epoch), "--rank", strconv.Itoa(rank), "--json"}
	if worker >= 0 {
		args = append(args, "--worker", strconv.Itoa(worker))
	}
	res := prep(t, args...).OK(t)
	var s shownRank
	if err := json.Unmarshal([]byte(res.Stdout), &s); err != nil {
		t.Fatalf("plan show --json: %v\n%s", err, res.Stdout)
	}
	return s
}

// procPeak is the largest descriptor count and resident high-water mark
// (VmHWM, KiB) sampled from /proc/<pid> during a run.
type procPeak struct {
	fds    int
	hwmKiB int64
}

// watch samples /proc/<pid> every millisecond until done is closed. VmHWM is
// the high-water mark of the process image since exec (getrusage's ru_maxrss
// of a child would also count the test binary it was cloned from).
func watch(pid int, done <-chan struct{}) <-chan procPeak {
	out := make(chan procPeak, 1)
	go func() {
		var peak procPeak
		for {
			if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil && len(ents) > peak.fds {
				peak.fds = len(ents)
			}
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
				for _, line := range strings.Split(string(b), "\n") {
					if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
						kib, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
						peak.hwmKiB = max(peak.hwmKiB, kib)
					}
				}
			}
			select {
			case <-done:
				out <- peak
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return out
}

// runWatched runs cmd and returns how it ended with the peaks sampled
// during the run.
func runWatched(t *testing.T, cmd *exec.Cmd, args []string) (result, procPeak) {
	t.Helper()
	run := testutil.Start(t, cmd, args)
	done := make(chan struct{})
	peak := watch(cmd.Process.Pid, done)
	r := run.Wait()
	close(done)
	return r, <-peak
}

// underFDLimit runs prep under `ulimit -n limit` (bash execs prep, so the
// pid is prep's) and returns its result and the peak number of open
// descriptors sampled during the run.
func underFDLimit(t *testing.T, limit int, args ...string) (result, int) {
	t.Helper()
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	cmd := exec.Command("bash", "-c", fmt.Sprintf("ulimit -n %d && exec %s %s", limit, prepBin, strings.Join(q, " ")))
	r, peak := runWatched(t, cmd, args)
	return r, peak.fds
}

// B26: 5,000 files of 3 rows each, planned and converted under ulimit -n
// 256: success, every id once, descriptors well below the limit.
func TestCaseB26ManySmallFiles(t *testing.T) {
	c := loadCase(t, "B26")
	files := int(c.int(t, "expect", "values", "files"))
	samples := int(c.int(t, "expect", "values", "samples"))
	if testing.Short() {
		files, samples = 500, 1500 // still twice the descriptor limit
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "many")
	// The recipe's layout: many/part=K/ holding ids K, K+files, K+2*files.
	start := time.Now()
	write := func(k int) error {
		d := filepath.Join(src, fmt.Sprintf("part=%d", k))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		var buf bytes.Buffer
		if err := pqfixture.New().Int64("id", int64(k), int64(k+files), int64(k+2*files)).Encode(&buf); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(d, "data_0.parquet"), buf.Bytes(), 0o644)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for g := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := g; k < files && errs[g] == nil; k += len(errs) {
				errs[g] = write(k)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d files written in %v", files, time.Since(start))
	planPath := filepath.Join(dir, "plan.json")
	res, peak := underFDLimit(t, 256, "plan", "--source", src, "--seed", "3", "--global-batch", strconv.Itoa(samples), "-o", planPath)
	res.OK(t)
	if peak >= 64 {
		t.Errorf("plan: %d descriptors open at peak, want well below 256", peak)
	}
	spec := filepath.Join(dir, "spec.yaml")
	writeFile(t, spec, "tensors: [{name: id, column: id, dtype: I64}]\n")
	out := filepath.Join(dir, "out")
	res, peak = underFDLimit(t, 256, "convert", "--plan", planPath, "--spec", spec, "-o", out, "--progress", "never")
	res.OK(t)
	if peak >= 64 {
		t.Errorf("convert: %d descriptors open at peak, want well below 256", peak)
	}
	t.Logf("peak descriptors during convert: %d; plan and convert done %v after start", peak, time.Since(start))
	exp := filepath.Join(dir, "export")
	prep(t, "export", out, "--epoch", "0", "--rank", "0", "--step", "0", "-o", exp).OK(t)
	ids := tensor(t, readNPYDir(t, exp), "id", "<i8").i64()
	sum := checkEachIDOnce(t, ids)
	if len(ids) != samples {
		t.Errorf("%d samples, want %d", len(ids), samples)
	}
	if !testing.Short() && sum != c.int(t, "expect", "values", "id", "sum") {
		t.Errorf("id sum %d, want %d", sum, c.int(t, "expect", "values", "id", "sum"))
	}
}

// B27: more ranks and workers than row groups: every id exactly once over
// all (rank, worker) pairs; pad and drop policies exact; out-of-range ranks
// rejected while parsing arguments.
func TestCaseB27RanksCoverage(t *testing.T) {
	c := loadCase(t, "B27")
	plans := c.list(t, "expect", "plans")
	a := plans[0].(map[string]any)
	opts := a["options"].(map[string]any)
	ranks, workers, seed := int(jsonInt(t, opts["ranks"])), int(jsonInt(t, opts["workers"])), jsonInt(t, opts["seed"])
	n := int(c.int(t, "expect", "dataset", "samples"))
	r := newRun(t, c, "part-0.parquet", "part-1.parquet", "part-2.parquet")
	spec := filepath.Join(r.dir, "spec.yaml")
	writeFile(t, spec, "tensors: [{name: id, column: id, dtype: I64}, {name: x, column: x, dtype: F32}]\n")

	for _, remainder := range []string{"partial", "pad", "drop"} {
		t.Run(remainder, func(t *testing.T) {
			planPath := filepath.Join(r.dir, remainder+".json")
			prep(t, "plan", "--source", r.src, "--seed", strconv.FormatInt(seed, 10), "--global-batch", strconv.Itoa(ranks),
				"--world-size", strconv.Itoa(ranks), "--workers", strconv.Itoa(workers), "--shuffle", "global",
				"--remainder", remainder, "-o", planPath).OK(t)
			out := filepath.Join(r.dir, "out-"+remainder)
			prep(t, "convert", "--plan", planPath, "--spec", spec, "-o", out, "--progress", "never").OK(t)
			prep(t, "verify", "--plan", planPath, out).OK(t)

			seen := make([]int, n)
			slots, pads := 0, 0
			perRank := make([]int, ranks)
			for rank := 0; rank < ranks; rank++ {
				for w := 0; w < workers; w++ {
					for _, b := range planShow(t, planPath, 0, rank, w).Batches {
						if b.Step%workers != w {
							t.Errorf("step %d produced by worker %d", b.Step, w)
						}
						// The shard holds exactly the plan's batch.
						ex := r.export(out, 0, rank, b.Step)
						ids := tensor(t, ex, "sample_ids", "<i8").i64()
						idv := tensor(t, ex, "id", "<i8").i64()
						xs := tensor(t, ex, "x", "<f4").u32()
						padMask := tensor(t, ex, "pad_mask", "|b1").bools()
						if len(ids) != len(b.Samples) {
							t.Fatalf("rank %d step %d: shard holds %d samples, plan %d", rank, b.Step, len(ids), len(b.Samples))
						}
						for k, id := range b.Samples {
							if ids[k] != int64(id) || idv[k] != int64(id) || math.Float32frombits(xs[k]) != float32(id)+0.25 || padMask[k] != b.Pad[k] {
								t.Errorf("rank %d step %d slot %d: plan id %d pad %v, shard id %d/%d x %v pad %v",
									rank, b.Step, k, id, b.Pad[k], ids[k], idv[k], math.Float32frombits(xs[k]), padMask[k])
							}
							slots++
							perRank[rank]++
							if b.Pad[k] {
								pads++
							} else {
								seen[id]++
							}
						}
					}
				}
			}
			var dropped []int
			for id, k := range seen {
				switch {
				case k == 0:
					dropped = append(dropped, id)
				case k > 1:
					t.Errorf("id %d seen %d times", id, k)
				}
			}
			switch remainder {
			case "partial": // the case's "no remainder policy"
				if slots != n || len(dropped) != 0 || slices.Max(perRank)-slices.Min(perRank) > 1 {
					t.Errorf("%d slots, dropped %v, per rank %v: want %d slots, each id once, ranks within one sample", slots, dropped, perRank, n)
				}
			case "pad": // 104 slots, 26 per rank, one flagged repeat
				if slots != 104 || pads != 1 || len(dropped) != 0 || perRank[0] != 26 || slices.Min(perRank) != 26 {
					t.Errorf("%d slots, %d pads, dropped %v, per rank %v (case: %s)", slots, pads, dropped, perRank, a["pad_policy"])
				}
			case "drop": // 100 used, 25 per rank, 3 dropped and listed
				if slots != 100 || pads != 0 || len(dropped) != 3 || slices.Min(perRank) != 25 || slices.Max(perRank) != 25 {
					t.Errorf("%d slots, %d pads, dropped %v, per rank %v (case: %s)", slots, pads, dropped, perRank, a["drop_policy"])
				}
				checkListedDropped(t, out, dropped)
			}
		})
	}

	t.Run("fewer samples than pairs", func(t *testing.T) {
		b := plans[1].(map[string]any)
		opts := b["options"].(map[string]any)
		ranks, workers := int(jsonInt(t, opts["ranks"])), int(jsonInt(t, opts["workers"]))
		r := newRun(t, c, "five.parquet")
		res := prep(t, "plan", "--source", r.src, "--global-batch", strconv.Itoa(ranks), "--world-size", strconv.Itoa(ranks),
			"--workers", strconv.Itoa(workers), "--remainder", "partial", "-o", r.plan).OK(t)
		out := filepath.Join(r.dir, "out")
		prep(t, "convert", "--plan", r.plan, "--spec", spec, "-o", out, "--progress", "never").OK(t)
		prep(t, "verify", "--plan", r.plan, out).OK(t)
		seen := map[uint64]int{}
		empty := 0
		for rank := 0; rank < ranks; rank++ {
			for w := 0; w < workers; w++ {
				k := 0
				for _, bt := range planShow(t, r.plan, 0, rank, w).Batches {
					for _, id := range bt.Samples {
						seen[id]++
						k++
					}
				}
				if k == 0 {
					empty++
				}
			}
		}
		if len(seen) != 5 || seen[0] != 1 || seen[1] != 1 || seen[2] != 1 || seen[3] != 1 || seen[4] != 1 {
			t.Errorf("ids over all pairs: %v, want 0..4 once each", seen)
		}
		if empty < 7 {
			t.Errorf("%d empty (rank, worker) pairs, case says at least 7", empty)
		}
		// The empty pairs are reported by the plan, not an error.
		if !strings.Contains(res.Stdout, fmt.Sprintf("%d of %d (rank, worker) pairs", empty, ranks*workers)) {
			t.Errorf("plan summary does not report the %d empty (rank, worker) pairs:\n%s", empty, res.Stdout)
		}
	})

	t.Run("rank out of range", func(t *testing.T) {
		planPath := filepath.Join(r.dir, "partial.json")
		out := filepath.Join(r.dir, "out-partial")
		for _, args := range [][]string{
			{"plan", "show", planPath, "--epoch", "0", "--rank", "-1"},
			{"plan", "show", planPath, "--epoch", "0", "--rank", "4"},
			{"convert", "--plan", planPath, "--spec", spec, "-o", filepath.Join(r.dir, "never"), "--ranks", "4"},
			{"convert", "--plan", planPath, "--spec", spec, "-o", filepath.Join(r.dir, "never"), "--ranks", "-1"},
			{"export", out, "--epoch", "0", "--rank", "4", "--step", "0", "-o", filepath.Join(r.dir, "never")},
			{"export", out, "--epoch", "0", "--rank", "-1", "--step", "0", "-o", filepath.Join(r.dir, "never")},
			{"load", out, "--epoch", "0", "--rank", "4"},
			{"load", out, "--epoch", "0", "--rank", "-1"},
		} {
			res := prep(t, args...)
			res.Failed(t, c.strs(t, "expect", "plans", 2, "error", "must_name")...)
			// Where the plan gives the world size, the rank is refused as a
			// usage error (exit 2) before any source file is read; export and
			// load learn it from the shard set's manifest.
			if (args[0] == "plan" || args[0] == "convert" || strings.Contains(strings.Join(args, " "), "-1")) && res.Code != 2 {
				t.Errorf("prep %s: exit %d, want 2 (usage)", strings.Join(args, " "), res.Code)
			}
			noOutput(t, filepath.Join(r.dir, "never"))
		}
	})
}

// checkListedDropped checks that the dropped ids of epoch 0 are listed by
// the shard set's manifest.
func checkListedDropped(t *testing.T, out string, want []int) {
	t.Helper()
	var m struct {
		Dropped []struct {
			Epoch int   `json:"epoch"`
			IDs   []int `json:"ids"`
		} `json:"dropped"`
	}
	readJSON(t, filepath.Join(out, "manifest.json"), &m)
	if len(m.Dropped) == 1 {
		slices.Sort(m.Dropped[0].IDs) // listed in the epoch's order
	}
	if len(m.Dropped) != 1 || m.Dropped[0].Epoch != 0 || !slices.Equal(m.Dropped[0].IDs, want) {
		t.Errorf("manifest lists dropped %+v, want epoch 0: %v", m.Dropped, want)
	}
}

// b29Config is one configuration of the order-stability case.
type b29Config struct {
	shuffle string
	workers int
}

// B29: the same inputs give byte-identical plans and shards; the per-rank
// order does not depend on the worker count; without shuffling epoch 0 ==
// epoch 1.
func TestCaseB29OrderStability(t *testing.T) {
	c := loadCase(t, "B29")
	opts := c.get(t, "expect", "plans", 0, "options").(map[string]any)
	seed := strconv.FormatInt(jsonInt(t, opts["seed"]), 10)
	ranks := int(jsonInt(t, opts["ranks"]))
	epochs := int(jsonInt(t, opts["epochs"]))
	runs := int(jsonInt(t, opts["runs_each"]))
	r := newRun(t, c, "part-0.parquet", "part-1.parquet", "part-2.parquet", "part-3.parquet")
	spec := filepath.Join(r.dir, "spec.yaml")
	writeFile(t, spec, "tensors: [{name: id, column: id, dtype: I64}, {name: x, column: x, dtype: F32}]\n")
	samples := int(c.int(t, "expect", "dataset", "samples"))

	// orders[shuffle][workers][epoch][rank] = sample ids in the rank's order.
	orders := map[b29Config][][][]uint64{}
	data := map[b29Config]map[string][]byte{}
	for _, shuffle := range []string{"global", "none"} {
		for _, w := range c.list(t, "expect", "plans", 0, "options", "workers") {
			cfg := b29Config{shuffle, int(jsonInt(t, w))}
			var planBytes []byte
			var digests map[string]string
			for run := 0; run < runs; run++ {
				tag := fmt.Sprintf("%s-w%d-run%d", shuffle, cfg.workers, run)
				planPath := filepath.Join(r.dir, tag+".json")
				prep(t, "plan", "--source", r.src, "--seed", seed, "--epochs", strconv.Itoa(epochs), "--global-batch", "200",
					"--world-size", strconv.Itoa(ranks), "--workers", strconv.Itoa(cfg.workers), "--shuffle", shuffle, "-o", planPath).OK(t)
				out := filepath.Join(r.dir, "out-"+tag)
				prep(t, "convert", "--plan", planPath, "--spec", spec, "-o", out, "--progress", "never", "--jobs", strconv.Itoa(1+run)).OK(t)
				pb, err := os.ReadFile(planPath)
				if err != nil {
					t.Fatal(err)
				}
				d := fileDigests(t, out)
				if run == 0 {
					planBytes, digests = pb, d
					prep(t, "verify", "--plan", planPath, out).OK(t)
					orders[cfg] = rankOrders(t, planPath, epochs, ranks)
					data[cfg] = shardRegions(t, out, epochs, ranks)
					continue
				}
				if !bytes.Equal(pb, planBytes) {
					t.Errorf("%s: plan bytes differ from run 0", tag)
				}
				if fmt.Sprint(d) != fmt.Sprint(digests) {
					t.Errorf("%s: output files differ from run 0:\n%v\n%v", tag, d, digests)
				}
			}
			// Each epoch is a permutation of ids 0..999, 500 per rank.
			for e, byRank := range orders[cfg] {
				var all []uint64
				for rank, ids := range byRank {
					if len(ids) != samples/ranks {
						t.Errorf("%v epoch %d rank %d: %d samples", cfg, e, rank, len(ids))
					}
					all = append(all, ids...)
				}
				slices.Sort(all)
				for i, id := range all {
					if id != uint64(i) {
						t.Fatalf("%v epoch %d: not a permutation of 0..%d", cfg, e, samples-1)
					}
				}
			}
			equal := fmt.Sprint(orders[cfg][0]) == fmt.Sprint(orders[cfg][1])
			if shuffle == "none" && !equal {
				t.Errorf("%v: shuffle off but epoch 0 != epoch 1", cfg)
			}
			if shuffle == "global" && equal {
				t.Errorf("%v: shuffle on but epoch 0 == epoch 1", cfg)
			}
		}
	}
	for cfg, o := range orders {
		ref := b29Config{cfg.shuffle, 1}
		if fmt.Sprint(o) != fmt.Sprint(orders[ref]) {
			t.Errorf("per-rank order with %d workers differs from 1 worker (shuffle %s)", cfg.workers, cfg.shuffle)
		}
		for k, v := range data[cfg] {
			if !bytes.Equal(v, data[ref][k]) {
				t.Errorf("%s with %d workers differs from 1 worker (shuffle %s)", k, cfg.workers, cfg.shuffle)
			}
		}
	}
}

// rankOrders lists each (epoch, rank)'s sample ids in consumption order.
func rankOrders(t *testing.T, planPath string, epochs, ranks int) [][][]uint64 {
	t.Helper()
	out := make([][][]uint64, epochs)
	for e := range out {
		out[e] = make([][]uint64, ranks)
		for rank := range out[e] {
			for _, b := range planShow(t, planPath, e, rank, -1).Batches {
				out[e][rank] = append(out[e][rank], b.Samples...)
			}
		}
	}
	return out
}

// shardRegions returns the data, batch table and sample id regions of every
// shard, located with prep inspect --json: the bytes a reader consumes,
// without the provenance that names the plan.
func shardRegions(t *testing.T, out string, epochs, ranks int) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	for e := 0; e < epochs; e++ {
		for rank := 0; rank < ranks; rank++ {
			p := filepath.Join(out, fmt.Sprintf("epoch-%05d", e), fmt.Sprintf("rank-%05d.shard", rank))
			res := prep(t, "inspect", p, "--json").OK(t)
			var doc struct {
				Shard struct {
					Regions []struct {
						Name   string `json:"name"`
						Offset int64  `json:"offset"`
						Size   int64  `json:"size"`
					} `json:"regions"`
				} `json:"shard"`
			}
			if err := json.Unmarshal([]byte(res.Stdout), &doc); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			for _, reg := range doc.Shard.Regions {
				if reg.Name == "data" || reg.Name == "sample ids" || reg.Name == "batch table" {
					m[fmt.Sprintf("epoch %d rank %d %s", e, rank, reg.Name)] = b[reg.Offset : reg.Offset+reg.Size]
				}
			}
		}
	}
	if len(m) != 3*epochs*ranks {
		t.Fatalf("inspect gave %d regions", len(m))
	}
	return m
}

// b31Setup plans the B27 data set (the case's data) for several epochs.
func b31Setup(t *testing.T, seed string) (r *caseRun, spec string) {
	t.Helper()
	c := loadCase(t, "B27")
	r = newRun(t, c, "part-0.parquet", "part-1.parquet", "part-2.parquet")
	spec = filepath.Join(r.dir, "spec.yaml")
	writeFile(t, spec, "tensors: [{name: id, column: id, dtype: I64}, {name: x, column: x, dtype: F32}]\n")
	prep(t, "plan", "--source", r.src, "--seed", seed, "--epochs", "12", "--global-batch", "8", "--world-size", "4",
		"--workers", "2", "-o", r.plan).OK(t)
	return r, spec
}

// B31: two builds into one directory at once, and a build killed midway
// then restarted.
func TestCaseB31ConcurrentBuilds(t *testing.T) {
	loadCase(t, "B31")
	r, spec := b31Setup(t, "7")
	ref := filepath.Join(r.dir, "ref")
	prep(t, "convert", "--plan", r.plan, "--spec", spec, "-o", ref, "--progress", "never").OK(t)
	want := fileDigests(t, ref)

	// concurrent runs each either finish or fail fast with exit 3 naming
	// the directory and the holder.
	concurrent := func(t *testing.T, out string, plans ...string) []result {
		var wg sync.WaitGroup
		res := make([]result, len(plans))
		for i, p := range plans {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res[i] = prep(t, "convert", "--plan", p, "--spec", spec, "-o", out, "--progress", "never")
			}()
		}
		wg.Wait()
		for _, x := range res {
			if x.Code == 3 {
				x.Failed(t, out, "held by", "pid ")
			}
		}
		return res
	}

	t.Run("same config", func(t *testing.T) {
		out := filepath.Join(r.dir, "same")
		res := concurrent(t, out, r.plan, r.plan)
		for _, x := range res {
			if x.Code != 0 && x.Code != 3 {
				t.Errorf("exit %d: %s", x.Code, x.Stderr)
			}
		}
		if res[0].Code != 0 && res[1].Code != 0 {
			t.Fatalf("neither run finished")
		}
		if got := fileDigests(t, out); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("final directory differs from one run:\n%v\n%v", got, want)
		}
		prep(t, "verify", "--plan", r.plan, out).OK(t)
	})

	t.Run("different seeds", func(t *testing.T) {
		other, _ := b31Setup(t, "8")
		out := filepath.Join(r.dir, "mixed")
		res := concurrent(t, out, r.plan, other.plan)
		winner := ""
		for i, x := range res {
			if x.Code == 0 {
				winner = []string{r.plan, other.plan}[i]
			}
		}
		if winner == "" {
			t.Fatalf("neither run finished: %d %s / %d %s", res[0].Code, res[0].Stderr, res[1].Code, res[1].Stderr)
		}
		// The directory is exactly one run's, never a manifest of one next
		// to shards of the other: verify against the winner's plan.
		prep(t, "verify", "--plan", winner, out).OK(t)
		if winner == r.plan {
			if got := fileDigests(t, out); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("final directory differs from one run")
			}
		}
	})

	t.Run("lock held", func(t *testing.T) {
		out := filepath.Join(r.dir, "held")
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(filepath.Join(out, ".prep.lock"), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(f, "%d testhost\n", os.Getpid())
		res := prep(t, "convert", "--plan", r.plan, "--spec", spec, "-o", out, "--progress", "never")
		if res.Code != 3 {
			t.Fatalf("exit %d with the lock held, want 3: %s", res.Code, res.Stderr)
		}
		res.Failed(t, out, fmt.Sprintf("pid %d", os.Getpid()), "testhost")
		if m, _ := filepath.Glob(filepath.Join(out, "*")); len(m) != 1 || filepath.Base(m[0]) != ".prep.lock" {
			t.Errorf("run that found the lock held wrote %q", m)
		}
	})

	t.Run("killed then restarted", func(t *testing.T) {
		out := filepath.Join(r.dir, "killed")
		args := []string{"convert", "--plan", r.plan, "--spec", spec, "-o", out, "--progress", "never", "--jobs", "1"}
		run := testutil.Start(t, exec.Command(prepBin, args...), args)
		// Kill it as soon as the first shard is committed (or it ends).
		killed := run.Poll(200*time.Microsecond, func() bool {
			m, _ := filepath.Glob(filepath.Join(out, "epoch-*", "*.shard"))
			return len(m) > 0
		})
		if killed {
			run.Kill()
		}
		run.Wait()
		t.Logf("killed midway: %v", killed)
		res := prep(t, "convert", "--plan", r.plan, "--spec", spec, "-o", out, "--progress", "never").OK(t)
		if killed && !strings.Contains(res.Stderr, "stale lock") {
			t.Errorf("rerun after a kill did not report the stale lock:\n%s", res.Stderr)
		}
		if got := fileDigests(t, out); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("restarted build differs from one run:\n%v\n%v", got, want)
		}
		prep(t, "verify", "--plan", r.plan, out).OK(t)
	})

	t.Run("stale lock and temporaries", func(t *testing.T) {
		// What a killed run leaves: its lock file (no longer held) and its
		// temporary folder.
		out := filepath.Join(r.dir, "stale")
		dead := exec.Command("true")
		if err := dead.Run(); err != nil {
			t.Fatal(err)
		}
		pid := dead.ProcessState.Pid()
		if err := os.MkdirAll(filepath.Join(out, ".prep-tmp", strconv.Itoa(pid)), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(out, ".prep-tmp", strconv.Itoa(pid), "spill.bin"), "partial")
		writeFile(t, filepath.Join(out, ".prep.lock"), fmt.Sprintf("%d deadhost\n", pid))
		res := prep(t, "convert", "--plan", r.plan, "--spec", spec, "-o", out, "--progress", "never").OK(t)
		for _, s := range []string{"stale lock", fmt.Sprintf("pid %d", pid), "deadhost"} {
			if !strings.Contains(res.Stderr, s) {
				t.Errorf("stale lock not reported (%q missing):\n%s", s, res.Stderr)
			}
		}
		if got := fileDigests(t, out); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("directory after taking over a stale lock differs from one run (temporaries left?):\n%v\n%v", got, want)
		}
	})
}

// B33: a shard cut short after it was built is named with its expected and
// actual size by verify, and refused cleanly (never SIGBUS) by the reader;
// reading a shard far larger than the reader's memory stays bounded.
func TestCaseB33TruncatedShard(t *testing.T) {
	c := loadCase(t, "B33")
	d := loadCase(t, "B29")
	r := newRun(t, d, "part-0.parquet", "part-1.parquet", "part-2.parquet", "part-3.parquet")
	spec := filepath.Join(r.dir, "spec.yaml")
	writeFile(t, spec, "tensors: [{name: id, column: id, dtype: I64}, {name: x, column: x, dtype: F32}]\n")
	prep(t, "plan", "--source", r.src, "--seed", "1", "--global-batch", "20", "--world-size", "2", "-o", r.plan).OK(t)
	out := filepath.Join(r.dir, "out")
	prep(t, "convert", "--plan", r.plan, "--spec", spec, "-o", out, "--progress", "never").OK(t)
	shard := filepath.Join(out, "epoch-00000", "rank-00001.shard")
	st, err := os.Stat(shard)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(shard, st.Size()-4096); err != nil {
		t.Fatal(err)
	}
	res := prep(t, "verify", "--plan", r.plan, out)
	res.Stderr += res.Stdout // findings may be on either stream
	must := c.strs(t, "expect", "error", "must_name")
	must[0] = "rank-00001.shard"
	res.Failed(t, append(must, strconv.FormatInt(st.Size(), 10), strconv.FormatInt(st.Size()-4096, 10))...)

	for _, args := range [][]string{
		{"load", out, "--epoch", "0", "--rank", "1"},
		{"load", out, "--epoch", "0", "--rank", "1", "--verify-checksums"},
		{"export", out, "--epoch", "0", "--rank", "1", "--step", "24", "-o", filepath.Join(r.dir, "exp")},
		{"inspect", shard},
	} {
		res := prep(t, args...)
		res.Failed(t, "rank-00001.shard")
	}
	// The untouched rank still loads.
	prep(t, "load", out, "--epoch", "0", "--rank", "0", "--verify-checksums").OK(t)

	t.Run("bounded memory", func(t *testing.T) {
		// 6,000 strings padded to 24 KiB: a 141 MiB shard from a 40 KB file.
		b10 := loadCase(t, "B10")
		r := newRun(t, b10, "strings_plain.parquet")
		prep(t, "plan", "--source", r.src, "--global-batch", "256", "--shuffle", "none", "-o", r.plan).OK(t)
		spec := filepath.Join(r.dir, "spec.yaml")
		writeFile(t, spec, "tensors: [{name: s, column: s, dtype: U8, bytes: {mode: pad, max_len: 24576}}]\n")
		out := filepath.Join(r.dir, "out")
		prep(t, "convert", "--plan", r.plan, "--spec", spec, "-o", out, "--progress", "never").OK(t)
		shard := filepath.Join(out, "epoch-00000", "rank-00000.shard")
		st, err := os.Stat(shard)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Shard struct {
				BlockSize int64 `json:"block_size"`
			} `json:"shard"`
		}
		if err := json.Unmarshal([]byte(prep(t, "inspect", shard, "--json").OK(t).Stdout), &doc); err != nil {
			t.Fatal(err)
		}
		// The reader's memory is its ring (prefetch + 1 blocks) plus a
		// fixed allowance for the runtime, whatever the shard's size.
		const prefetch = 1
		limit := (prefetch+1)*doc.Shard.BlockSize + 32<<20
		if st.Size() < 3*limit {
			t.Fatalf("shard of %d bytes too small for a bound of %d", st.Size(), limit)
		}
		args := []string{"load", out, "--epoch", "0", "--rank", "0", "--verify-checksums", "--prefetch", strconv.Itoa(prefetch)}
		res, peak := runWatched(t, exec.Command(prepBin, args...), args)
		res.OK(t)
		t.Logf("shard %d MiB, blocks %d MiB, load peak RSS %d MiB", st.Size()>>20, doc.Shard.BlockSize>>20, peak.hwmKiB>>10)
		if peak.hwmKiB == 0 || peak.hwmKiB<<10 > limit {
			t.Errorf("prep load of a %d MiB shard peaked at %d KiB resident, want at most %d MiB", st.Size()>>20, peak.hwmKiB, limit>>20)
		}

		// The shard cut short while prep load reads it: it finishes (if it
		// was faster) or fails naming the shard; it never dies of SIGBUS.
		for i, flags := range [][]string{nil, {"--verify-checksums"}, nil, {"--verify-checksums"}} {
			delay := []time.Duration{5, 5, 40, 40}[i] * time.Millisecond
			bak, err := os.ReadFile(shard)
			if err != nil {
				t.Fatal(err)
			}
			args := append([]string{"load", out, "--epoch", "0", "--rank", "0", "--prefetch", "1"}, flags...)
			run := testutil.Start(t, exec.Command(prepBin, args...), args)
			time.Sleep(delay)
			if err := os.Truncate(shard, 1<<20); err != nil {
				t.Fatal(err)
			}
			res := run.Wait()
			t.Logf("load %v, truncated after %v: exit %d", flags, delay, res.Code)
			if res.Code != 0 {
				res.Failed(t, "rank-00000.shard")
				if strings.Contains(res.Stderr, "SIGBUS") || strings.Contains(res.Stderr, "fatal error") || res.Code != 1 {
					t.Errorf("prep load crashed on a shard truncated mid-read (exit %d):\n%.600s", res.Code, res.Stderr)
				}
			}
			if err := os.WriteFile(shard, bak, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
}
