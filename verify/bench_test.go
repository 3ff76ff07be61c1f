package verify_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/verify"
	"github.com/prepml/prep/verify/verifytest"
)

// BenchmarkVerify measures verify over a shard set in the page cache: 4
// shards x 32 batches of 1 MiB (x: 256 samples of 1024 F32, 128 MiB in all).
// Integrity is the checksum-and-plan pass (target >= 2 GB/s on 2 cores);
// Deep adds re-materializing every batch from the (fake) source and a byte
// comparison. b.SetBytes counts block bytes, so ns/op reads as MB/s.
func BenchmarkVerify(b *testing.B) {
	f := verifytest.BuildSize(b, verifytest.Size{Rows: 16384, Dim: 1023, GlobalBatch: 512})
	for _, bc := range []struct {
		name string
		deep bool
	}{{"Integrity", false}, {"Deep", true}} {
		b.Run(bc.name, func(b *testing.B) {
			var bytes int64
			for i := 0; i < b.N; i++ {
				rep, err := verify.Run(context.Background(), verify.Options{Dir: f.Dir, Deep: bc.deep, Source: verifytest.OpenSource})
				if err != nil || !rep.OK {
					b.Fatalf("err %v, findings %v", err, rep.Findings)
				}
				bytes = rep.Bytes
			}
			b.SetBytes(bytes)
		})
	}
}

// BenchmarkVerifyRatio alternates a plain sequential read of the fixture's
// shard files (1 MiB read calls) and an integrity run of verify (every
// batch checksum, plan conformance) over them in each iteration, and reports
// verify's throughput as a fraction of the plain read's ("x-plain"; target
// >= 0.8 on 2 cores from the page cache):
//
//	go test -run '^$' -bench VerifyRatio -benchtime 10x ./verify/
func BenchmarkVerifyRatio(b *testing.B) {
	f := verifytest.BuildSize(b, verifytest.Size{Rows: 16384, Dim: 1023, GlobalBatch: 512})
	buf := make([]byte, 1<<20)
	plainRead := func() int64 {
		var n int64
		for i := range f.Man.Shards {
			fh, err := os.Open(f.ShardPath(i))
			if err != nil {
				b.Fatal(err)
			}
			for {
				m, err := fh.Read(buf)
				n += int64(m)
				if err == io.EOF {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			fh.Close()
		}
		return n
	}
	plainRead() // warm the page cache
	var plain, ver time.Duration
	var plainBytes, verBytes int64
	for b.Loop() {
		t0 := time.Now()
		plainBytes += plainRead()
		t1 := time.Now()
		rep, err := verify.Run(context.Background(), verify.Options{Dir: f.Dir})
		if err != nil || !rep.OK {
			b.Fatalf("err %v, findings %v", err, rep.Findings)
		}
		ver += time.Since(t1)
		plain += t1.Sub(t0)
		verBytes += rep.Bytes
	}
	plainGBs := float64(plainBytes) / plain.Seconds() / 1e9
	verGBs := float64(verBytes) / ver.Seconds() / 1e9
	b.ReportMetric(plainGBs, "plain-GB/s")
	b.ReportMetric(verGBs, "verify-GB/s")
	b.ReportMetric(verGBs/plainGBs, "x-plain")
}

// rowGroupDecoder wraps the fixture's source so that each Prefetch or
// Hold costs what a Parquet source's does: every row of every row group
// holding a requested id is read (decoded) once per call. It counts the
// row groups decoded.
type rowGroupDecoder struct {
	verify.SampleSource
	p       *plan.Plan
	data    []byte
	decoded *int
	sink    *int64
}

func (r rowGroupDecoder) decode(ids []uint64) {
	var start uint64
	groups := map[int][2]uint64{}
	for g, n := range r.p.Source.Files[0].RowGroups {
		groups[g] = [2]uint64{start, start + uint64(n)}
		start += uint64(n)
	}
	touched := map[int]bool{}
	for _, id := range ids {
		for g, b := range groups {
			if id >= b[0] && id < b[1] {
				touched[g] = true
			}
		}
	}
	for g := range touched {
		*r.decoded++
		for id := groups[g][0]; id < groups[g][1]; id++ {
			*r.sink += verifytest.SourceValue(r.data, id)
		}
	}
}

func (r rowGroupDecoder) Prefetch(_ context.Context, ids []uint64) error {
	r.decode(ids)
	return nil
}

func (r rowGroupDecoder) Hold(ctx context.Context, ids []uint64) error {
	r.decode(ids)
	return r.SampleSource.(verify.PartSource).Hold(ctx, ids)
}

func (r rowGroupDecoder) Held(t, i int) []byte { return r.SampleSource.(verify.PartSource).Held(t, i) }

// BenchmarkDeepMemoryLimit measures verify --deep per source row under
// the default memory limit and a small one, by parts of row groups
// ("Parts", each row group decoded once for the set: 64) and batch by
// batch ("Windows"), over 262,144 rows in 64 row groups (global shuffle,
// world size 2, 2 epochs: 4 shards). The source decodes whole row groups
// (rowGroupDecoder); "rg-decodes/op" is how many it decoded:
//
//	go test -run '^$' -bench DeepMemoryLimit -benchtime 3x ./verify/
func BenchmarkDeepMemoryLimit(b *testing.B) {
	size := verifytest.Size{Rows: 1 << 18, Dim: 3, GlobalBatch: 1024, RowGroups: 64}
	f := verifytest.BuildSize(b, size)
	for _, mode := range []string{"Parts", "Windows"} {
		for _, lim := range []struct {
			name  string
			bytes int64
		}{{"Default", 0}, {"1MiB", 1 << 20}} {
			b.Run(mode+"/"+lim.name, func(b *testing.B) {
				var decoded int
				var sink int64
				opener := func(p *plan.Plan, m *shardfmt.Manifest, root string, g shardfmt.Geometry, ts []shardfmt.TensorInfo) (verify.SampleSource, error) {
					src, err := verifytest.OpenSource(p, m, root, g, ts)
					if err != nil {
						return nil, err
					}
					data, err := os.ReadFile(filepath.Join(root, p.Source.Files[0].Path))
					rd := rowGroupDecoder{src, p, data, &decoded, &sink}
					if mode == "Windows" {
						return windowSource{rd}, err
					}
					return rd, err
				}
				for b.Loop() {
					rep, err := verify.Run(context.Background(), verify.Options{Dir: f.Dir, Deep: true, Source: opener, Jobs: 1, MemoryLimit: lim.bytes})
					if err != nil || !rep.OK {
						b.Fatalf("err %v, findings %v", err, rep.Findings)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(2*size.Rows), "ns/row")
				b.ReportMetric(float64(decoded)/float64(b.N), "rg-decodes/op")
			})
		}
	}
}

// windowSource is rowGroupDecoder without Hold and Held (not a
// PartSource): verify compares batch by batch, prefetching windows.
type windowSource struct{ r rowGroupDecoder }

func (w windowSource) FillBlock(ctx context.Context, ids []uint64, block []byte) error {
	return w.r.FillBlock(ctx, ids, block)
}
func (w windowSource) Close() error { return w.r.Close() }
func (w windowSource) Prefetch(ctx context.Context, ids []uint64) error {
	return w.r.Prefetch(ctx, ids)
}

// BenchmarkDeepReopenedShards measures the deep check by parts with
// every shard held open ("Held", the default for a set of fewer shards
// than the open files cap) and with every shard reopened for each pass
// ("Reopened", a cap of 1 file at Jobs 1), over the set of
// BenchmarkDeepMemoryLimit at its 1 MiB limit (many parts); "opens/op" is
// how many shard files verify opened:
//
//	go test -run '^$' -bench DeepReopenedShards -benchtime 3x ./verify/
func BenchmarkDeepReopenedShards(b *testing.B) {
	size := verifytest.Size{Rows: 1 << 18, Dim: 3, GlobalBatch: 1024, RowGroups: 64}
	f := verifytest.BuildSize(b, size)
	for _, c := range []struct {
		name string
		cap  int
	}{{"Held", 0}, {"Reopened", 1}} {
		b.Run(c.name, func(b *testing.B) {
			var opens atomic.Int64
			defer verify.SetShardFiles(c.cap, func(_ string, open bool) {
				if open {
					opens.Add(1)
				}
			})()
			for b.Loop() {
				rep, err := verify.Run(context.Background(), verify.Options{Dir: f.Dir, Deep: true, Source: verifytest.OpenSource, Jobs: 1, MemoryLimit: 1 << 20})
				if err != nil || !rep.OK {
					b.Fatalf("err %v, findings %v", err, rep.Findings)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(2*size.Rows), "ns/row")
			b.ReportMetric(float64(opens.Load())/float64(b.N), "opens/op")
		})
	}
}
