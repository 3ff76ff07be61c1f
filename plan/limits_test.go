package plan

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestHugeCountsRejectedBeforeAllocation pins the faults where
// `prep plan --epochs 1000000000000` died with "fatal error: runtime: out
// of memory" (one epoch cache and digest allocated per epoch) and
// `--global-batch 9223372036854775807` panicked in EpochDigest ("makeslice:
// cap out of range", 8*G bytes per CPU): New and Parse refuse counts above
// the documented limits with ErrConfig naming the field, before allocating.
func TestHugeCountsRejectedBeforeAllocation(t *testing.T) {
	src := synthSource([]int64{100})
	base := Config{Epochs: 1, GlobalBatch: 16, WorldSize: 1, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderDrop}
	for _, tt := range []struct {
		name  string
		edit  func(*Config)
		field string
		want  string
	}{
		{"epochs 1e12", func(c *Config) { c.Epochs = 1_000_000_000_000 }, "epochs", "1000000000000 exceeds the limit of 65536 epochs"},
		{"epochs max int", func(c *Config) { c.Epochs = math.MaxInt }, "epochs", "9223372036854775807 exceeds the limit of 65536 epochs"},
		{"global batch max int", func(c *Config) { c.GlobalBatch = math.MaxInt }, "global_batch", "9223372036854775807 exceeds the limit of 16777216 samples per step"},
		{"world size max int", func(c *Config) { c.GlobalBatch, c.WorldSize = 1<<24, math.MaxInt }, "world_size", "9223372036854775807 exceeds the limit of 1048576 ranks"},
		{"workers 1e12", func(c *Config) { c.Workers = 1_000_000_000_000 }, "workers", "1000000000000 exceeds the limit of 1024 workers"},
		{"window max int", func(c *Config) { c.Shuffle, c.Window = ShuffleBlocks, math.MaxInt }, "window", "9223372036854775807 exceeds the limit of 1073741824 row groups"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			tt.edit(&cfg)
			_, err := New(src, cfg)
			var pe *Error
			if !errors.Is(err, ErrConfig) || !errors.As(err, &pe) || pe.Field != tt.field || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v; want ErrConfig on field %s containing %q", err, tt.field, tt.want)
			}
		})
	}
	// The limits themselves are accepted.
	cfg := base
	cfg.Epochs, cfg.Workers = 3, MaxWorkers
	if _, err := New(src, cfg); err != nil {
		t.Errorf("workers = MaxWorkers refused: %v", err)
	}
	cfg = base
	cfg.GlobalBatch, cfg.Remainder = MaxGlobalBatch, RemainderPad
	if err := cfg.Validate(); err != nil {
		t.Errorf("global batch = MaxGlobalBatch refused: %v", err)
	}
}

// TestNonUTF8SourcePathRefused pins a plan that could never be used: a
// source file whose name is not valid UTF-8 was planned, but plan.json
// (JSON text) recorded the name with U+FFFD in place of the bad bytes, so
// the fingerprint computed from the real name did not match the one
// recomputed from the file, and convert refused the plan as a bad plan
// file. The name is refused at planning, naming the file.
func TestNonUTF8SourcePathRefused(t *testing.T) {
	src := synthSource([]int64{100}, []int64{50})
	src.Files[1].Path = "bad\xffname.parquet"
	cfg := Config{Epochs: 1, GlobalBatch: 16, WorldSize: 1, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderDrop}
	_, err := New(src, cfg)
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `"bad\xffname.parquet" is not valid UTF-8`) {
		t.Fatalf("New = %v; want ErrConfig naming the file as not valid UTF-8", err)
	}
	// Any valid UTF-8 name round-trips through the plan file.
	src.Files[1].Path = "région/Тест.parquet"
	p, err := New(src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(b); err != nil {
		t.Fatalf("plan with a UTF-8 path does not parse back: %v", err)
	}
}
