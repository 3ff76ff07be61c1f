package verify_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"sync"
	"testing"

	"github.com/prepml/prep/convert/converttest"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/verify"
	"github.com/prepml/prep/verify/verifytest"
)

// TestDeepOverConvertedParquet runs --deep with convert's materializer over
// a set convert made from a real Parquet file: clean, then after the file is
// rewritten with one value changed (same size and footer, so only the value
// comparison can tell), then after a change that alters the footer.
func TestDeepOverConvertedParquet(t *testing.T) {
	out, src, p := converttest.Convert(t)
	opts := verify.Options{Dir: out, Deep: true, Source: verify.FeatureSource(nil, 0), MaxPerShard: 100}
	rep := verifytest.Run(t, opts)
	if !rep.OK || rep.DeepBatches != 4*p.Steps() || rep.Batches != 4*p.Steps() {
		t.Fatalf("clean set: deep %d batches %d\n%s", rep.DeepBatches, rep.Batches, verifytest.Lines(rep))
	}

	// Rewrite with x[17] changed to another value inside its row group's
	// range: page CRCs are recomputed and the footer stays byte-identical.
	path := filepath.Join(src, "part-0.parquet")
	before := footerBytes(t, path)
	const id, newX = 17, 1001.0625 // unique, inside row group 0's range
	converttest.WriteSource(t, path, map[int64]float64{id: newX})
	if !bytes.Equal(before, footerBytes(t, path)) {
		t.Fatal("test premise: the rewrite changed the footer")
	}
	rep = verifytest.Run(t, opts)
	var want []string
	for _, s := range deepManifest(t, out).Shards {
		for k := 0; k < p.Steps(); k++ {
			ids, _, _ := p.RankBatch(s.Epoch, s.Rank, k, nil)
			for _, x := range ids {
				if x == id {
					want = append(want, "value_mismatch "+s.Path+" b"+strconv.Itoa(k)+" feat id17", "value_mismatch "+s.Path+" b"+strconv.Itoa(k)+" x id17")
				}
			}
		}
	}
	sort.Strings(want)
	if len(want) != 4 { // sample 17 once per epoch (drop), two tensors
		t.Fatalf("expected findings %q", want)
	}
	if got := verifytest.Keys(rep.Findings); !reflect.DeepEqual(got, want) {
		t.Fatalf("findings\n got %q\nwant %q\n%s", got, want, verifytest.Lines(rep))
	}
	f64 := func(v float64) string {
		return verify.FormatValue(shardfmt.F64, binary.LittleEndian.AppendUint64(nil, math.Float64bits(v)))
	}
	f32 := func(v float64) string {
		return verify.FormatValue(shardfmt.F32, binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(v))))
	}
	for _, x := range rep.Findings {
		switch x.Tensor {
		case "x":
			if *x.Element != 0 || x.Expected != f64(newX) || x.Actual != f64(converttest.X(id)) {
				t.Errorf("x finding: %s", x)
			}
		case "feat":
			if *x.Element != 1 || x.Expected != f32(newX) || x.Actual != f32(converttest.X(id)) {
				t.Errorf("feat finding: %s", x)
			}
		}
	}

	// A new maximum changes the footer's statistics: the file no longer
	// matches the plan and the values cannot be trusted or compared.
	converttest.WriteSource(t, path, map[int64]float64{id: 5000})
	rep = verifytest.Run(t, opts)
	if rep.OK || rep.Findings[0].Kind != verify.KindSourceChanged || rep.Findings[0].What != "footer sha256" {
		t.Fatalf("footer change:\n%s", verifytest.Lines(rep))
	}
	// One finding for the one changed file, counting the batches that
	// read from it (every batch of the set: the source is one file), not
	// one finding per batch.
	one := fmt.Sprintf("source file changed since the plan was made; %d batches in %d shards read from it were not compared", rep.Batches, rep.Shards)
	if len(rep.Findings) != 1 || rep.FindingCount != 1 || rep.Findings[0].Message != one {
		t.Errorf("footer change: want one finding %q, got:\n%s", one, verifytest.Lines(rep))
	}
}

func footerBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := int(binary.LittleEndian.Uint32(b[len(b)-8:]))
	return b[len(b)-8-n:]
}

func deepManifest(t *testing.T, dir string) *shardfmt.Manifest {
	t.Helper()
	m, err := shardfmt.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// limitRecorder wraps convert's SampleSource, recording the decode limit
// verify sets and the ids of each prefetch.
type limitRecorder struct {
	verify.SampleSource
	mu      *sync.Mutex
	limits  *[]int64
	fetches *[]int
}

func (l limitRecorder) SetMemoryLimit(n int64) {
	l.mu.Lock()
	*l.limits = append(*l.limits, n)
	l.mu.Unlock()
	l.SampleSource.(verify.MemoryLimiter).SetMemoryLimit(n)
}

func (l limitRecorder) Prefetch(ctx context.Context, ids []uint64) error {
	l.mu.Lock()
	*l.fetches = append(*l.fetches, len(ids))
	l.mu.Unlock()
	return l.SampleSource.(verify.Prefetcher).Prefetch(ctx, ids)
}

// TestDeepHonoursMemoryLimit pins a fault: verify --deep decoded whole row
// groups under a fixed 1 GiB per shard checked (3.0 GB for one row group
// of 26M BIGINT rows), whatever the memory limit. Each of the Jobs checks
// now gets an equal share of Options.MemoryLimit: half to decode in (a row
// group over it is read in row windows, as convert does), a quarter for
// the samples prefetched (at least one batch). Under a 2 KiB limit, far
// below the row groups' size, the set still verifies clean.
func TestDeepHonoursMemoryLimit(t *testing.T) {
	out, _, p := converttest.Convert(t)
	var (
		mu      sync.Mutex
		limits  []int64
		fetches []int
	)
	opener := func(p *plan.Plan, m *shardfmt.Manifest, root string, g shardfmt.Geometry, ts []shardfmt.TensorInfo) (verify.SampleSource, error) {
		src, err := verify.FeatureSource(nil, 0)(p, m, root, g, ts)
		if err != nil {
			return nil, err
		}
		return limitRecorder{SampleSource: src, mu: &mu, limits: &limits, fetches: &fetches}, nil
	}
	const limit, jobs = 2 << 10, 2
	rep := verifytest.Run(t, verify.Options{Dir: out, Deep: true, Source: opener, Jobs: jobs, MemoryLimit: limit})
	if !rep.OK || rep.DeepBatches != 4*p.Steps() {
		t.Fatalf("deep %d of %d batches\n%s", rep.DeepBatches, 4*p.Steps(), verifytest.Lines(rep))
	}
	if len(limits) != 4 {
		t.Fatalf("SetMemoryLimit called %d times, want once per shard (batch by batch)", len(limits))
	}
	for _, n := range limits {
		if n != limit/jobs/2 {
			t.Errorf("decode limit %d, want %d", n, limit/jobs/2)
		}
	}
	// 24 sample bytes per id (x F64, feat 2 x F32, id I64) and 128 of
	// bookkeeping: a quarter of the share (256 bytes) holds 1 id; a
	// prefetch takes the batch (4 ids) that crosses it.
	per := p.Config.GlobalBatch / p.Config.WorldSize
	for _, n := range fetches {
		if n > (limit/jobs/4)/(24+128)+per {
			t.Errorf("a prefetch of %d ids, want at most %d", n, (limit/jobs/4)/(24+128)+per)
		}
	}
	if len(fetches) < 8 {
		t.Errorf("%d prefetches, want the small limit to cut them", len(fetches))
	}
}

// TestDeepOverConvertedJaggedParquet runs --deep with convert's
// materializer over a set convert made from a Parquet LIST column with
// `list: {jagged: true}`: clean (also under a 2 KiB memory limit), then
// after one value of the jagged tensor is changed in a shard rewritten
// with valid checksums and digest, which only the value comparison can
// tell. The finding names the batch, slot, sample, tensor and element,
// with both values exact.
func TestDeepOverConvertedJaggedParquet(t *testing.T) {
	out, _, p := converttest.ConvertJagged(t)
	m := deepManifest(t, out)
	if m.ShardFormat != "2.0" {
		t.Fatalf("manifest shard_format %q, want 2.0", m.ShardFormat)
	}
	opts := verify.Options{Dir: out, Deep: true, Source: verify.FeatureSource(nil, 0), MaxPerShard: 100}
	rep := verifytest.Run(t, opts)
	if !rep.OK || rep.DeepBatches != 4*p.Steps() {
		t.Fatalf("clean set: deep %d batches\n%s", rep.DeepBatches, verifytest.Lines(rep))
	}
	// Under a 2 KiB limit, prefetches of about a batch and row windows.
	small := opts
	small.MemoryLimit, small.Jobs = 2<<10, 2
	if rep := verifytest.Run(t, small); !rep.OK || rep.DeepBatches != 4*p.Steps() {
		t.Fatalf("clean set under 2 KiB: deep %d batches\n%s", rep.DeepBatches, verifytest.Lines(rep))
	}

	// In shard 1, element 1 of the first sample with 2 or more values of
	// l becomes 424242.
	bk, slot := -1, -1
	var id uint64
	verifytest.RewriteShard(t, out, m, 1, func(k int, block []byte, ids []uint64, pads int) ([]byte, []uint64, int) {
		if bk >= 0 {
			return block, ids, pads
		}
		for i, sid := range ids {
			if len(converttest.L(int64(sid))) >= 2 {
				bk, slot, id = k, i, sid
				break
			}
		}
		if bk < 0 {
			return block, ids, pads
		}
		g, err := shardfmt.NewGeometry(len(ids), m.Tensors)
		if err != nil {
			t.Fatal(err)
		}
		const l = 1 // tensor index of l
		off := func(j int) uint64 { return binary.LittleEndian.Uint64(block[g.SlabOffset[l]+8*uint64(j):]) }
		lay, err := g.BatchLayout([]uint64{off(g.BatchSize)})
		if err != nil {
			t.Fatal(err)
		}
		binary.LittleEndian.PutUint64(block[lay.ValuesOffset[l]+8*(off(slot)+1):], 424242)
		return block, ids, pads
	})
	if bk < 0 {
		t.Fatal("shard 1 has no sample with 2 values of l")
	}
	rep = verifytest.Run(t, opts)
	if len(rep.Findings) != 1 {
		t.Fatalf("findings:\n%s", verifytest.Lines(rep))
	}
	x := rep.Findings[0]
	want := verify.Finding{Kind: verify.KindValueMismatch, Shard: m.Shards[1].Path, Epoch: &m.Shards[1].Epoch, Rank: &m.Shards[1].Rank,
		Batch: &bk, Tensor: "l", SampleID: &id, Element: new(int), What: "value",
		Expected: strconv.Itoa(int(converttest.L(int64(id))[1])), Actual: "424242",
		Message: "slot " + strconv.Itoa(slot) + " differs from the source"}
	*want.Element = 1
	if x.String() != want.String() {
		t.Fatalf("finding\n got %s\nwant %s", x, want)
	}
}
