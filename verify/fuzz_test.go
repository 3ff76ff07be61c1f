package verify_test

import (
	"context"
	"os"
	"testing"

	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/verify"
	"github.com/prepml/prep/verify/verifytest"
)

// TestDamageInEveryRegionFound flips one byte in the middle of each region
// of a shard's layout: the manifest digest covers everything but the
// blocks, the batch checksums cover the blocks, so every flip must give at
// least one finding, all of them on that shard.
func TestDamageInEveryRegionFound(t *testing.T) {
	f := verifytest.Build(t)
	r, err := shardfmt.Open(f.ShardPath(1))
	if err != nil {
		t.Fatal(err)
	}
	regions := r.Layout().Regions
	r.Close()
	orig, err := os.ReadFile(f.ShardPath(1))
	if err != nil {
		t.Fatal(err)
	}
	for _, reg := range regions {
		if reg.Size == 0 {
			continue
		}
		for _, off := range []uint64{reg.Offset, reg.Offset + reg.Size/2, reg.Offset + reg.Size - 1} {
			b := append([]byte(nil), orig...)
			b[off] ^= 0x01
			if err := os.WriteFile(f.ShardPath(1), b, 0o644); err != nil {
				t.Fatal(err)
			}
			rep := verifytest.Run(t, verify.Options{Dir: f.Dir})
			if rep.OK {
				t.Errorf("%s: flip at offset %d not found", reg.Name, off)
			}
			for _, x := range rep.Findings {
				if x.Shard != f.Man.Shards[1].Path {
					t.Errorf("%s: flip at offset %d reported on %s: %s", reg.Name, off, x.Shard, x)
				}
			}
		}
	}
	if err := os.WriteFile(f.ShardPath(1), orig, 0o644); err != nil {
		t.Fatal(err)
	}
	if rep := verifytest.Run(t, verify.Options{Dir: f.Dir}); !rep.OK {
		t.Fatalf("restored set: %s", verifytest.Lines(rep))
	}
}

// FuzzVerifyShard overwrites bytes of one shard and truncates or extends it:
// verify must never panic or fault, and must report a finding whenever the
// bytes differ from what the manifest committed.
func FuzzVerifyShard(f *testing.F) {
	f.Add(uint32(0), []byte{0xff}, int32(0))
	f.Add(uint32(4100), []byte{1, 2, 3}, int32(0))
	f.Add(uint32(20000), []byte{}, int32(-4096))
	f.Add(uint32(300), []byte{0}, int32(17))
	fx := verifytest.Build(f)
	orig, err := os.ReadFile(fx.ShardPath(0))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, off uint32, patch []byte, grow int32) {
		b := append([]byte(nil), orig...)
		if o := int(off) % len(b); len(patch) > 0 {
			copy(b[o:], patch)
		}
		switch n := len(b) + int(grow)%len(b); {
		case n < len(b):
			b = b[:n]
		case n > len(b):
			b = append(b, make([]byte, n-len(b))...)
		}
		if err := os.WriteFile(fx.ShardPath(0), b, 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(fx.ShardPath(0), orig, 0o644)
		rep, err := verify.Run(context.Background(), verify.Options{Dir: fx.Dir, Jobs: 1})
		if err != nil {
			t.Fatal(err)
		}
		same := string(b) == string(orig)
		if same != rep.OK {
			t.Fatalf("bytes unchanged=%v but report ok=%v: %v", same, rep.OK, rep.Findings)
		}
	})
}
