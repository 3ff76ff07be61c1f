package verify_test

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

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
