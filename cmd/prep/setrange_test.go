package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prepml/prep/plan"
)

// TestLoadExportOutOfRangeAreUsageErrors: an epoch or rank outside the shard
// set's plan exits 2 naming the valid range, as `prep plan show` does, rather
// than failing as a missing shard (exit 1).
func TestLoadExportOutOfRangeAreUsageErrors(t *testing.T) {
	pp := convertFixture(t) // 2 epochs, world size 2
	out := filepath.Join(t.TempDir(), "shards")
	if code, _, stderr := runPrep("convert", "--plan", pp, "--tensor", "id=id:I64", "-o", out); code != 0 {
		t.Fatalf("convert: exit %d: %s", code, stderr)
	}
	p, err := plan.Load(pp)
	if err != nil {
		t.Fatal(err)
	}
	steps, last := fmt.Sprintf("%d steps", p.Steps()), strconv.Itoa(p.Steps()-1)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"load", out, "--epoch", "0", "--rank", "2"}, "--rank 2 out of range: the shard set's plan has world size 2 (ranks 0-1)"},
		{[]string{"load", out, "--epoch", "2", "--rank", "0"}, "--epoch 2 out of range: the shard set's plan has epochs 0-1"},
		{[]string{"export", out, "--epoch", "0", "--rank", "7", "--step", "0", "-o", t.TempDir()}, "--rank 7 out of range"},
		{[]string{"export", out, "--epoch", "9", "--rank", "0", "--step", "0", "-o", t.TempDir()}, "--epoch 9 out of range"},
		// A step beyond the epoch is the same kind of error as an epoch
		// beyond the plan: exit 2, not 1.
		{[]string{"export", out, "--epoch", "0", "--rank", "0", "--step", "99", "-o", t.TempDir()}, "--step 99 out of range: the shard set's plan has " + steps + " per rank per epoch (steps 0-" + last + ")"},
	} {
		code, _, stderr := runPrep(tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("prep %s: exit %d, stderr %q; want exit 2 naming %q", strings.Join(tc.args[:1], " "), code, stderr, tc.want)
		}
	}
	// In range still works.
	if code, _, stderr := runPrep("export", out, "--epoch", "1", "--rank", "1", "--step", last, "-o", t.TempDir(), "-q"); code != 0 {
		t.Fatalf("export of the last step: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runPrep("load", out, "--epoch", "1", "--rank", "1", "-q"); code != 0 {
		t.Fatalf("load in range: exit %d: %s", code, stderr)
	}
}

// TestConvertEpochListIsBounded: --epochs goes through the same bounded list
// parser as --ranks, so a huge range is a usage error instead of a list of
// 10^12 epochs built in memory, and a list is deduplicated and sorted.
func TestConvertEpochListIsBounded(t *testing.T) {
	pp := convertFixture(t)
	out := filepath.Join(t.TempDir(), "shards")
	code, _, stderr := runPrep("convert", "--plan", pp, "--tensor", "id=id:I64", "-o", out, "--epochs", "0-1000000000000")
	if code != exitUsage || !strings.Contains(stderr, `--epochs: bad list "0-1000000000000": range "0-1000000000000" too large`) {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := runPrep("convert", "--plan", pp, "--tensor", "id=id:I64", "-o", out, "--epochs", "1,0,1", "--json"); code != 0 {
		t.Fatalf("--epochs 1,0,1: exit %d: %s", code, stderr)
	}
	if code, stdout, stderr := runPrep("verify", out); code != 0 || !strings.HasPrefix(stdout, "0 findings (4 shards, ") {
		t.Fatalf("verify after --epochs 1,0,1: exit %d\n%s%s", code, stdout, stderr)
	}
}
