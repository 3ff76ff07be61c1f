package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/prepml/prep/gpuload"
)

func init() { subcommands = append(subcommands, newLoadCmd) }

// loadOptions are the flags of `prep load`.
type loadOptions struct {
	epoch, rank  int
	backend      string
	device       int
	prefetch     int
	fromStep     int
	verify       bool
	registerMmap bool
	cudaPath     string
	asJSON       bool
}

// loadSummary is what `prep load --json` prints: one pass over a shard
// through the gpuload reader.
type loadSummary struct {
	Dir          string  `json:"dir"`
	Epoch        int     `json:"epoch"`
	Rank         int     `json:"rank"`
	Backend      string  `json:"backend"`
	Steps        int     `json:"steps"`
	Batches      int     `json:"batches"`
	Samples      int64   `json:"samples"`
	PadSamples   int64   `json:"pad_samples"`
	Bytes        int64   `json:"bytes"`
	Seconds      float64 `json:"seconds"`
	GBPerSecond  float64 `json:"gb_per_s"`
	CPUSeconds   float64 `json:"cpu_seconds"`
	ChecksumsRun bool    `json:"checksums_verified"`
	// Transfer is the reader's transfer path, why it was chosen, the
	// fallbacks taken at open, and where its time went.
	Transfer gpuload.TransferStats `json:"transfer"`
}

func newLoadCmd(g *globalOptions) *cobra.Command {
	o := &loadOptions{}
	cmd := &cobra.Command{
		Use:   "load OUT --epoch E --rank R",
		Short: "Read one rank's shard through the gpuload reader and report throughput",
		Long: `load reads every batch of one (epoch, rank) shard in plan order through the
same gpuload reader a trainer links, and reports samples, batches, bytes and
throughput. Use it to smoke-test a node's shards and its read path before a
job starts.

The host backend (default) reads into reusable buffers in CPU memory. The cuda
backend copies each batch to GPU memory with one DMA per batch; it needs
libcuda.so.1 at run time. Its transfer path (--cuda-path) is chosen per shard
by default: DMA from the registered mapping when the shard is in the page
cache, O_DIRECT reads into a pinned ring when it is not, pread into the ring
where either is refused; the summary names the path and any fallback.

Example:
  prep load /local/shards --epoch 0 --rank 0 --verify-checksums`,
		Args: oneArg("the shard set directory (OUT)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLoad(g, o, args[0])
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.epoch, "epoch", 0, "epoch to read")
	f.IntVar(&o.rank, "rank", 0, "rank to read")
	f.StringVar(&o.backend, "backend", "host", "reader backend: host or cuda")
	f.IntVar(&o.device, "device", 0, "CUDA device ordinal (cuda backend)")
	f.IntVar(&o.prefetch, "prefetch", gpuload.DefaultPrefetch, "batches prepared ahead of the consumer")
	f.IntVar(&o.fromStep, "from-step", 0, "first step to read (resume)")
	f.BoolVar(&o.verify, "verify-checksums", false, "check each batch's CRC-32C as it is read")
	f.BoolVar(&o.registerMmap, "register-mmap", false, "cuda: register the mapped shard read-only and DMA straight from it (same as --cuda-path register)")
	f.StringVar(&o.cudaPath, "cuda-path", "", "cuda: transfer path: auto (default: register when the shard is in page cache, else O_DIRECT), register, direct, pread or gds")
	f.BoolVar(&o.asJSON, "json", false, "print the summary as JSON on stdout")
	return cmd
}

func runLoad(g *globalOptions, o *loadOptions, dir string) error {
	if o.backend != "host" && o.backend != "cuda" {
		return usagef("--backend must be host or cuda, not %q", o.backend)
	}
	if o.epoch < 0 || o.rank < 0 {
		return usagef("--epoch and --rank must be >= 0")
	}
	if err := checkSetRange(dir, o.epoch, o.rank, -1); err != nil {
		return err
	}
	l, err := gpuload.Open(dir, o.epoch, o.rank, gpuload.Options{
		Backend:         o.backend,
		Device:          o.device,
		Prefetch:        o.prefetch,
		StartStep:       o.fromStep,
		VerifyChecksums: o.verify,
		RegisterMmap:    o.registerMmap,
		CUDAPath:        o.cudaPath,
	})
	if errors.Is(err, gpuload.ErrInvalid) {
		return usageError{err} // --from-step or --prefetch out of range
	}
	if err != nil {
		return err
	}
	defer l.Close()
	block := int64(l.Geometry().BlockSize)
	bar := g.newProgress(fmt.Sprintf("epoch %d rank %d", o.epoch, o.rank), int64(l.Steps()-o.fromStep)*block)
	d, err := gpuload.Drain(l, func(b *gpuload.Batch) { bar.Add(int64(b.Count), b.BlockBytes()) })
	bar.Finish()
	if err != nil {
		return err
	}
	s := loadSummary{Dir: dir, Epoch: o.epoch, Rank: o.rank, Backend: o.backend, Steps: l.Steps(), ChecksumsRun: o.verify,
		Batches: d.Batches, Samples: d.Samples, PadSamples: d.PadSamples, Bytes: d.Bytes,
		Seconds: d.Seconds, GBPerSecond: d.GBPerSecond(), CPUSeconds: d.CPUSeconds, Transfer: l.TransferStats()}
	if o.asJSON {
		enc := newJSONEncoder(g.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	out := g.summary()
	fmt.Fprintf(out, "load %s epoch %d rank %d (%s backend)\n", dir, o.epoch, o.rank, o.backend)
	fmt.Fprintf(out, "  batches   %d of %s\n", s.Batches, count(s.Steps, "step"))
	fmt.Fprintf(out, "  samples   %d (%d pad)\n", s.Samples, s.PadSamples)
	fmt.Fprintf(out, "  bytes     %d\n", s.Bytes)
	fmt.Fprintf(out, "  time      %.3fs wall, %.3fs CPU\n", s.Seconds, s.CPUSeconds)
	fmt.Fprintf(out, "  rate      %.2f GB/s\n", s.GBPerSecond)
	fmt.Fprintf(out, "  path      %s (%s)\n", s.Transfer.Path, s.Transfer.Reason)
	for _, fb := range s.Transfer.Fallbacks {
		fmt.Fprintf(out, "  fell back from %s: %s\n", fb.Path, fb.Error)
	}
	if o.verify {
		fmt.Fprintf(out, "  checksums verified for every batch read\n")
	}
	return nil
}
