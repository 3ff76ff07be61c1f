// Command profbench runs one product stage in-process under the CPU profiler
// (runtime/pprof), for the "where the time goes" section of BENCHMARKS.md:
//
//	profbench -cpuprofile FILE convert --plan P --spec S -o OUT [--jobs N]
//	profbench -cpuprofile FILE verify DIR PLAN
//	profbench -cpuprofile FILE load DIR
//	profbench -cpuprofile FILE perm
//
// convert calls convert.Run as `prep convert` does (OUT is emptied first);
// verify calls verify.Run (structure, checksums, plan conformance); load runs
// bench/internal/hostload.Deliver on the host backend; perm applies the
// N = 10^9 permutation to 5·10^7 indices.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime/pprof"
	"runtime/trace"

	"github.com/prepml/prep/bench/internal/hostload"
	"github.com/prepml/prep/convert"
	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/gpuload"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/verify"
)

func main() {
	cpu := flag.String("cpuprofile", "", "write a CPU profile here")
	tr := flag.String("trace", "", "also write an execution trace here (go tool trace)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("profbench: ")
	if *cpu == "" || flag.NArg() < 1 {
		log.Fatal("usage: profbench -cpuprofile FILE convert|verify|load|perm ...")
	}
	f, err := os.Create(*cpu)
	if err != nil {
		log.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		log.Fatal(err)
	}
	if *tr != "" {
		tf, err := os.Create(*tr)
		if err != nil {
			log.Fatal(err)
		}
		defer tf.Close()
		if err := trace.Start(tf); err != nil {
			log.Fatal(err)
		}
	}
	err = run(flag.Arg(0), flag.Args()[1:])
	if *tr != "" {
		trace.Stop()
	}
	pprof.StopCPUProfile()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		log.Fatal(err)
	}
}

func run(stage string, args []string) error {
	ctx := context.Background()
	switch stage {
	case "convert":
		fl := flag.NewFlagSet("convert", flag.ContinueOnError)
		planPath := fl.String("plan", "", "plan.json")
		specPath := fl.String("spec", "", "feature spec")
		out := fl.String("o", "", "output folder")
		jobs := fl.Int("jobs", 0, "jobs")
		memLimit := fl.Int64("memory-limit", 0, "memory limit in bytes (0: the default)")
		if err := fl.Parse(args); err != nil {
			return err
		}
		p, err := plan.Load(*planPath)
		if err != nil {
			return err
		}
		spec, err := feature.LoadSpec(*specPath)
		if err != nil {
			return err
		}
		if err := os.RemoveAll(*out); err != nil {
			return err
		}
		_, err = convert.Run(ctx, convert.Options{Plan: p, Spec: spec, Output: *out, Jobs: *jobs, MemoryLimit: *memLimit, ToolVersion: "profbench"})
		return err
	case "verify":
		if len(args) != 2 {
			return fmt.Errorf("verify wants DIR PLAN")
		}
		rep, err := verify.Run(ctx, verify.Options{Dir: args[0], PlanPath: args[1], Jobs: 2})
		if err != nil {
			return err
		}
		if len(rep.Findings) > 0 {
			return fmt.Errorf("verify: %d findings", len(rep.Findings))
		}
		return nil
	case "load":
		if len(args) != 1 {
			return fmt.Errorf("load wants DIR")
		}
		_, err := hostload.Deliver(args[0], gpuload.Options{Backend: gpuload.BackendHost})
		return err
	case "perm":
		p := plan.NewPerm(1_000_000_000, "global", 1, 0, 0)
		var sum uint64
		for s := range uint64(50) {
			lo := s * 20_000_000
			for q := lo; q < lo+1_000_000; q++ {
				sum += p.Apply(q)
			}
		}
		fmt.Println(sum)
		return nil
	}
	return fmt.Errorf("unknown stage %q", stage)
}
