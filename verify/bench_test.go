package verify_test

import (
	"context"
	"testing"

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
