// Package verify checks a shard set before training: structure (manifest,
// files, shard headers and tables), integrity (every batch checksum), plan
// conformance (sample ids, counts and pads against plan.json: through the
// plan's epoch digests where the set holds every rank of an epoch, else
// recomputed batch by batch; see planfast.go) and,
// on request, source conformance (values re-read from the source Parquet:
// by parts of row groups, each row group decoded about once for the whole
// shard set whatever the memory limit, when the source is a PartSource;
// see deeppart.go and deepset.go), every tensor of the block compared, and
// the tensors the spec derives (masks, lengths, element masks, inner
// lengths) checked on their own too: declared as the spec derives them
// and agreeing with the tensor they describe (derived.go).
//
// Run reports every finding, not just the first; a finding is data, not an
// error. What `prep inspect` shows and `prep export` writes is package
// describe's.
package verify

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/internal/dirlock"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/shardset"
	"github.com/prepml/prep/source"
)

// PlanFileName is the name of the plan copy convert keeps in a shard set
// directory (shardset.PlanName); Run loads it unless Options.PlanPath names
// another file.
const PlanFileName = shardset.PlanName

// ErrNotShardSet is returned by Run when the directory does not
// exist or is not a directory. Any other problem is a Finding.
var ErrNotShardSet = errors.New("not a shard set directory")

// ErrReadMode is returned by Run for an Options.ReadMode it does not know.
var ErrReadMode = errors.New("unknown read mode")

// ReadMode is how the integrity checks read a shard's blocks, sample ids
// and digested bytes.
type ReadMode string

const (
	// ReadPread reads them with positioned reads (pread) into each
	// check's own buffers (the default; "" means it too): the kernel
	// copies every byte out of the page cache, and a shard cut short
	// while it is read gives errors, never a fault.
	ReadPread ReadMode = "pread"
	// ReadMmap maps each shard read-only and checks the CRC-32Cs and the
	// shard digest straight over the mapping, without the copy: cheaper
	// where a page of the page cache costs less to map than to copy,
	// dearer where mapping a page is costly (each 4 KiB page costs a
	// page-table update on its first touch, which under some hypervisors
	// is several times a copy's cost: bench/notes/verify.md). A shard cut
	// short while mapped faults; the fault is recovered and reported as
	// the pread error would be (size_mismatch naming the batch, the
	// section and the page of the file), never a crash and never a pass.
	// With Deep every shard is read with pread (the deep check by parts
	// releases and reopens shard files: shardfile.go), and the epoch
	// digest of plan conformance always reads with pread.
	ReadMmap ReadMode = "mmap"
)

// Options configures Run.
type Options struct {
	// Dir is the shard set directory (holding manifest.json).
	Dir string
	// PlanPath is the plan to check against; "" means Dir/plan.json.
	PlanPath string
	// Deep enables source conformance: re-read the source for a fraction of
	// batches and compare every value, and check the source fingerprints.
	Deep bool
	// DeepFraction is the fraction of batches (0, 1] compared when Deep is
	// set. 0 means all batches when the shard set is at most
	// DeepAllBytes, otherwise DeepAllBytes' worth of batches.
	DeepFraction float64
	// Seed selects the deep sample of batches (same seed, same batches).
	Seed uint64
	// Source materializes expected values for Deep; nil with Deep set
	// checks the source fingerprints only and adds one source_unreadable
	// finding saying values were not compared.
	Source SourceOpener
	// SourceRoot overrides the plan's Source.Root (for a source that moved).
	SourceRoot string
	// Store, when set, returns the Store holding p's files under root (the
	// resolved source root: SourceRoot or the plan's): how an object-store
	// root is read. nil: root is a local directory.
	Store func(p *plan.Plan, root string) (source.Store, error)
	// Jobs is the number of shards checked at once; when there are fewer
	// shards than jobs, each shard's batches are split across the jobs left
	// over. <= 0 means GOMAXPROCS. With ReadPread each job holds one batch
	// block in memory and the sample id slots of the next batches, read
	// ahead with one pread (at most 1 MiB, at least one batch's).
	Jobs int
	// ReadMode is how the shards are read: ReadPread ("" too) or ReadMmap.
	ReadMode ReadMode
	// MemoryLimit bounds the memory of the --deep value checks, all shards
	// checked at once together. Batch by batch, each of the Jobs checks
	// gets an equal share: the source samples a check holds for its
	// upcoming batches (at most a quarter of its share, PrefetchBytes at
	// most) and the column chunks decoded to produce them, which a source
	// implementing MemoryLimiter reads in row windows within half its
	// share, as convert does under its --memory-limit; the last quarter
	// of the limit, for all Jobs checks together, holds the batches'
	// blocks compared (each the shard's block and the expected one, 2 ×
	// BlockSize bytes), admitted against it one comparison at least at a
	// time (admit.go): a block over it is compared alone. By parts (a
	// PartSource, deeppart.go) the set holds one part at a time: half
	// the limit for its samples and indexes, a quarter to decode in, a
	// quarter for the comparing goroutines' buffers and the per-shard
	// bookkeeping. <= 0 means 1 GiB.
	MemoryLimit int64
	// AllowPartial accepts a shard set holding only some of the plan's
	// (epoch, rank) pairs (a node that materialized its own ranks).
	AllowPartial bool
	// MaxPerShard caps the findings of one kind listed per shard; the rest
	// are counted in one summary finding of that kind. <= 0 means 20.
	MaxPerShard int
	// Progress, when set, is called with the number of block bytes checked
	// since the last call. Calls are serialized.
	Progress func(bytes int64)
	// RecomputePlan recomputes every batch's sample ids from the plan's
	// inputs (plan.RankBatch) instead of hashing the stored ids against the
	// epoch digests recorded in the plan file (planfast.go), which the plan
	// fingerprint does not cover. Slower; set it when the plan file itself
	// may have been edited. Deep implies it.
	RecomputePlan bool
	// OnDeepParts, when set, is called before the values of a group of
	// shards (those sharing one tensor table) are compared by parts, with
	// the number of parts the source is held in and the memory limit
	// (bytes) that would hold it in one. Each part reads every shard's
	// sample ids and the blocks holding its ids again, so many parts cost
	// many passes over the shard set: a caller can warn.
	OnDeepParts func(parts int, onePart int64)
}

// DeepAllBytes is the shard set size (bytes) up to which --deep compares
// every batch by default.
const DeepAllBytes = 1 << 30

// Report is the result of Run.
//
// JSON schema:
//
//	dir          string   the shard set directory
//	plan         string   the plan file checked against ("" if none loaded)
//	shards       int      shards listed in the manifest
//	batches      int      batches whose checksum was verified
//	bytes        int      block bytes checksummed
//	deep_batches int      batches compared value by value with the source
//	deep_parts   int      parts the source was held in to compare them (0: not by parts)
//	seconds      float    wall time of the run
//	ok           bool     true when there are no findings
//	finding_count int     len(findings)
//	findings     [Finding] sorted by shard path (set-level findings first), then in check order
type Report struct {
	Dir          string    `json:"dir"`
	Plan         string    `json:"plan"`
	Shards       int       `json:"shards"`
	Batches      int       `json:"batches"`
	Bytes        int64     `json:"bytes"`
	DeepBatches  int       `json:"deep_batches"`
	DeepParts    int       `json:"deep_parts"`
	Seconds      float64   `json:"seconds"`
	OK           bool      `json:"ok"`
	FindingCount int       `json:"finding_count"`
	Findings     []Finding `json:"findings"`
}

// Run checks the shard set in opts.Dir and returns every finding. The error
// is non-nil only when the check could not run at all (ErrNotShardSet,
// ErrReadMode, a cancelled ctx).
//
// Every file of the set is reached through shardset, which follows no
// symbolic link inside the set: a link, or a manifest path leaving the set,
// is a finding and is never opened. A shard cut short while it is checked
// is a finding, not a crash, whatever Options.ReadMode.
func Run(ctx context.Context, opts Options) (*Report, error) {
	start := time.Now()
	switch opts.ReadMode {
	case "", ReadPread, ReadMmap:
	default:
		return nil, fmt.Errorf("%w %q (want %s or %s)", ErrReadMode, opts.ReadMode, ReadPread, ReadMmap)
	}
	set, err := shardset.OpenDir(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrNotShardSet, opts.Dir)
	}
	defer set.Close()
	if opts.Jobs <= 0 {
		opts.Jobs = runtime.GOMAXPROCS(0)
	}
	opts.MemoryLimit = feature.NewBudget(opts.MemoryLimit).Limit
	if opts.MaxPerShard <= 0 {
		opts.MaxPerShard = 20
	}
	c := &checker{opts: opts, set: set, rep: &Report{Dir: opts.Dir, Findings: []Finding{}},
		blocks: newBlockAdmission(feature.NewBudget(opts.MemoryLimit).VerifyBlocks())}
	c.run(ctx)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep := c.rep
	nameSources(c.plan, rep.Findings)
	rep.Findings = groupSourceFindings(rep.Findings)
	sortFindings(rep.Findings)
	rep.FindingCount = len(rep.Findings)
	rep.OK = rep.FindingCount == 0
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

type checker struct {
	opts Options
	set  *shardset.Set
	rep  *Report
	man  *shardfmt.Manifest
	plan *plan.Plan
	// conforming holds the epochs whose shards match the plan's epoch
	// digest and batch counts (planfast.go): no per-batch plan comparison.
	conforming map[int]bool

	// The deep check by parts (deepset.go): the plan's row groups, the
	// groups of shards checked together, the comparing goroutines'
	// buffers.
	rowGroups *rowGroups
	groups    []*partGroup
	scratch   []*partScratch
	// Shards compared by parts held open to the end: at most keepOpen
	// (maxOpenShards less Jobs, shardfile.go); heldOpen so far.
	keepOpen, heldOpen int
	// blocks admits the blocks compared batch by batch (admit.go): a
	// quarter of Options.MemoryLimit for all Jobs comparisons together.
	blocks *blockAdmission

	mu sync.Mutex // guards rep counters, Progress calls, groups and heldOpen
}

func (c *checker) add(f Finding) { c.rep.Findings = append(c.rep.Findings, f) }

func (c *checker) run(ctx context.Context) {
	m, err := c.set.ReadManifestUnchecked()
	if err != nil {
		msg := "cannot read " + shardfmt.ManifestName + ": " + err.Error()
		if errors.Is(err, fs.ErrNotExist) {
			msg = shardfmt.ManifestName + " is missing: the shard set was never committed"
		}
		c.add(Finding{Kind: KindManifestInvalid, Shard: shardfmt.ManifestName, Message: msg})
		return
	}
	c.man = m
	c.rep.Shards = len(m.Shards)
	c.checkManifest()
	c.loadPlan()
	c.checkFiles()
	if c.opts.Deep {
		c.checkSourceFingerprints()
	}
	c.conforming = c.conformingEpochs(ctx)
	c.checkShards(ctx)
}

// checkManifest reports inconsistencies inside the manifest itself.
func (c *checker) checkManifest() {
	m := c.man
	bad := func(msg string, what, exp, act string) {
		c.add(Finding{Kind: KindManifestInvalid, Shard: shardfmt.ManifestName, What: what, Expected: exp, Actual: act, Message: msg})
	}
	if m.Format != shardfmt.ManifestFormat {
		bad("unknown manifest format", "format", shardfmt.ManifestFormat, fmt.Sprintf("%q", m.Format))
	}
	if len(m.Shards) == 0 {
		bad("manifest lists no shards", "", "", "")
	}
	paths := map[string]int{}
	pairs := map[[2]int]string{}
	for i, s := range m.Shards {
		switch {
		case !safePath(s.Path):
			bad(fmt.Sprintf("shard %d has an unsafe or unclean path %q (not opened)", i, s.Path), "", "", "")
		case s.Path == shardfmt.ManifestName || s.Path == PlanFileName:
			bad(fmt.Sprintf("shard %d uses the reserved name %q", i, s.Path), "", "", "")
		}
		if j, dup := paths[s.Path]; dup {
			bad(fmt.Sprintf("shards %d and %d have the same path %q", j, i, s.Path), "", "", "")
		}
		paths[s.Path] = i
		if s.Epoch < 0 || s.Rank < 0 || s.Batches < 0 || s.Size < 0 {
			bad(fmt.Sprintf("shard %q has a negative epoch, rank, batch count or size", s.Path), "", "", "")
		}
		k := [2]int{s.Epoch, s.Rank}
		if p, dup := pairs[k]; dup {
			bad(fmt.Sprintf("shards %q and %q are both epoch %d rank %d", p, s.Path, s.Epoch, s.Rank), "", "", "")
		}
		pairs[k] = s.Path
		if !strings.HasPrefix(s.Digest, "sha256:") {
			bad(fmt.Sprintf("shard %q has a malformed digest", s.Path), "digest", "sha256:<hex>", fmt.Sprintf("%q", s.Digest))
		}
	}
}

// safePath reports whether a manifest path names a file inside the set:
// relative, clean, slash-separated and not leaving the directory. A shard
// whose path is not safe is reported (checkManifest) and never opened.
func safePath(p string) bool {
	return p != "" && !filepath.IsAbs(p) && !strings.Contains(p, "\\") &&
		p == filepath.ToSlash(filepath.Clean(filepath.FromSlash(p))) &&
		p != ".." && !strings.HasPrefix(p, "../")
}

// loadPlan loads the plan and checks the manifest and coverage against it.
func (c *checker) loadPlan() {
	path := c.opts.PlanPath
	var p *plan.Plan
	var err error
	if path == "" {
		path = filepath.Join(c.opts.Dir, PlanFileName)
		p, err = c.set.Plan()
	} else {
		p, err = plan.Load(path)
	}
	if err != nil {
		msg := "plan conformance not checked: " + err.Error()
		if c.opts.PlanPath == "" && errors.Is(err, fs.ErrNotExist) {
			msg = "plan conformance not checked: the shard set holds no " + PlanFileName + "; name the plan with --plan"
		}
		c.add(Finding{Kind: KindPlanInvalid, Shard: path, Message: msg})
		c.checkStepsWithoutPlan()
		return
	}
	c.plan = p
	c.rep.Plan = path
	m := c.man
	if p.Fingerprint != m.PlanFingerprint {
		c.add(Finding{Kind: KindPlanMismatch, Shard: shardfmt.ManifestName, What: "plan fingerprint",
			Expected: p.Fingerprint, Actual: m.PlanFingerprint, Message: "shard set was made from another plan"})
	}
	if fp := p.Source.Fingerprint(); fp != m.SourceFingerprint {
		c.add(Finding{Kind: KindPlanMismatch, Shard: shardfmt.ManifestName, What: "source fingerprint",
			Expected: fp, Actual: m.SourceFingerprint, Message: "shard set was made from another source"})
	}
	if m.BatchSize != 0 && m.BatchSize != p.BatchSize() {
		c.add(Finding{Kind: KindPlanMismatch, Shard: shardfmt.ManifestName, What: "batch size",
			Expected: fmt.Sprint(p.BatchSize()), Actual: fmt.Sprint(m.BatchSize), Message: "manifest's per-rank batch size is not the plan's"})
	}
	cfg := p.Config
	steps := p.Steps()
	have := map[[2]int]bool{}
	for _, s := range m.Shards {
		have[[2]int{s.Epoch, s.Rank}] = true
		loc := Finding{Shard: s.Path, Epoch: intp(s.Epoch), Rank: intp(s.Rank)}
		if s.Epoch >= cfg.Epochs || s.Rank >= cfg.WorldSize {
			loc.Kind, loc.Message = KindPlanMismatch, fmt.Sprintf("(epoch %d, rank %d) is not in the plan (%d epochs, world size %d)", s.Epoch, s.Rank, cfg.Epochs, cfg.WorldSize)
			c.add(loc)
			continue
		}
		if s.Batches != steps {
			loc.Kind, loc.What = KindStepsUnequal, "steps"
			loc.Expected, loc.Actual = fmt.Sprint(steps), fmt.Sprint(s.Batches)
			loc.Message = "manifest lists a step count other than the plan's; every rank must take the same number of steps"
			c.add(loc)
		}
	}
	if c.opts.AllowPartial {
		return
	}
	for e := 0; e < cfg.Epochs; e++ {
		for r := 0; r < cfg.WorldSize; r++ {
			if !have[[2]int{e, r}] {
				c.add(Finding{Kind: KindRankMissing, Shard: shardfmt.ShardFileName(e, r), Epoch: intp(e), Rank: intp(r),
					Message: "the plan has this (epoch, rank) but the manifest lists no shard for it (a set holding only some epochs or ranks, such as one node's: verify --partial)"})
			}
		}
	}
}

// checkStepsWithoutPlan reports, when no plan is loaded, shards whose step
// count differs from the most common one of their epoch.
func (c *checker) checkStepsWithoutPlan() {
	counts := map[int]map[int]int{} // epoch -> batches -> shards
	for _, s := range c.man.Shards {
		if counts[s.Epoch] == nil {
			counts[s.Epoch] = map[int]int{}
		}
		counts[s.Epoch][s.Batches]++
	}
	for _, s := range c.man.Shards {
		mode, best := 0, -1
		for b, n := range counts[s.Epoch] {
			if n > best || (n == best && b < mode) {
				mode, best = b, n
			}
		}
		if s.Batches != mode {
			c.add(Finding{Kind: KindStepsUnequal, Shard: s.Path, Epoch: intp(s.Epoch), Rank: intp(s.Rank), What: "steps",
				Expected: fmt.Sprint(mode), Actual: fmt.Sprint(s.Batches),
				Message: "shard holds another number of steps than the other ranks of its epoch"})
		}
	}
}

// checkFiles reports the names under Dir that the manifest does not list
// (shardset.Set.Strays: nothing is followed, and the set's own directory is
// never a stray, even when Dir is a symbolic link to it).
func (c *checker) checkFiles() {
	onError := func(p string, err error) {
		c.add(Finding{Kind: KindIOError, Shard: c.set.Path(p), Message: "cannot list: " + err.Error()})
	}
	for _, st := range c.set.Strays(onError) {
		switch st.Kind {
		case shardset.StrayStaging:
			c.add(Finding{Kind: KindTempFile, Shard: st.Path, Message: "staging of a running or killed convert (prep gc removes it)"})
		case shardset.StrayLock:
			msg := "output-directory lock of a running or killed convert or gc"
			if o, err := dirlock.ReadOwner(c.set.Path(st.Path)); err == nil && (o.PID != 0 || o.Host != "") {
				msg += " (" + o.String() + ")"
			}
			c.add(Finding{Kind: KindTempFile, Shard: st.Path, Message: msg})
		case shardset.StrayTemp:
			msg := "temporary file left by an unfinished or running write"
			if strings.HasSuffix(st.Path, ".lock") {
				msg = "output-directory lock of a running or killed convert or gc"
			}
			c.add(Finding{Kind: KindTempFile, Shard: st.Path, Message: msg})
		case shardset.StrayLink:
			c.add(Finding{Kind: KindUnlistedFile, Shard: st.Path, Message: "symbolic link inside the shard set (not followed)"})
		default:
			c.add(Finding{Kind: KindUnlistedFile, Shard: st.Path, Message: "file is not listed in the manifest"})
		}
	}
}

// sortFindings orders set-level findings (manifest, plan, source files)
// before shard findings, shards by path, and keeps check order (batch order)
// within one shard.
func sortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		ai, aj := fs[i].Epoch == nil, fs[j].Epoch == nil
		if ai != aj {
			return ai
		}
		return fs[i].Shard < fs[j].Shard
	})
}

// errDetail renders err without the shard path a FormatError repeats (the
// finding names the shard already).
func errDetail(err error) string {
	var fe *shardfmt.FormatError
	if errors.As(err, &fe) {
		s := fe.Section
		if fe.Offset >= 0 {
			s += fmt.Sprintf(" at offset %d", fe.Offset)
		}
		return s + ": " + fe.Err.Error()
	}
	return err.Error()
}
