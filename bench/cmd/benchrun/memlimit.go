package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/prepml/prep/bench/internal/gen"
)

// The memory-limit rows: peak RSS of prep convert and prep verify --deep
// on inputs whose decoded size dwarfs their files (gen.WriteLongZeroLists:
// rows of a million zeros), against the --memory-limit they ran under.
// The target is peak RSS within the limit plus memLimitConstant.

// memLimitConstant is what peak RSS may exceed --memory-limit by: the
// mapped program text and the Go runtime (about 30 MiB together), and the
// page buffers and decode copies of one long row beyond the bytes it was
// admitted at.
const memLimitConstant = 96 << 20

// specLongI32 and specLongI64 read the long lists as jagged tensors.
const (
	specLongI32 = "tensors:\n  - {name: v, column: v, dtype: I32, list: {jagged: true}}\n"
	specLongI64 = "tensors:\n  - {name: v, column: v, dtype: I64, list: {jagged: true}}\n"
)

// memLimitRows returns the convert row (260 rows of 1,000,000 INT32
// zeros, --memory-limit 1GiB --jobs 1), the verify --deep row (40 rows of
// 1,000,000 INT64 zeros converted under 32 MiB with a global batch of 1,
// checked under 32 MiB) and the verify --deep row of the wide input
// (verifyWideRow).
func (d *driver) memLimitRows() []*Row {
	prep := d.exe("prep")
	i32, i64 := filepath.Join(d.data, "long-i32.parquet"), filepath.Join(d.data, "long-i64.parquet")
	spec32, spec64 := filepath.Join(d.work, "spec-long-i32.yaml"), filepath.Join(d.work, "spec-long-i64.yaml")
	os.WriteFile(spec32, []byte(specLongI32), 0o644)
	os.WriteFile(spec64, []byte(specLongI64), 0o644)
	plan32, plan64 := filepath.Join(d.work, "plan-long-i32.json"), filepath.Join(d.work, "plan-long-i64.json")
	out32, out64 := filepath.Join(d.work, "out-long-i32-m1g"), filepath.Join(d.work, "out-long-i64-m32")
	run := func(args ...string) error {
		if b, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s %s: %v: %s", args[1], args[2], err, oneLine(string(b)))
		}
		return nil
	}
	conv := &Row{ID: "convert-long-m1g", Label: fmt.Sprintf("`prep convert` --jobs 1 --memory-limit 1GiB: %d rows of LIST<INT32>, %d zeros each (1.04 GB of values)", gen.LongI32Rows, gen.LongLen),
		Argv: []string{prep, "convert", "--plan", plan32, "--spec", spec32, "-o", out32, "--jobs", "1", "--memory-limit", "1GiB"},
		Rows: gen.LongI32Rows, Bytes: gen.LongI32Rows * gen.LongLen * 4, Runs: 3,
		Note: "the memory-limit rows are measured 3 times each"}
	planned := false
	conv.Setup = func() error {
		if !planned {
			if err := run(prep, "plan", "--source", i32, "--seed", "1", "--global-batch", "4", "-o", plan32); err != nil {
				return err
			}
			planned = true
		}
		return os.RemoveAll(out32)
	}
	ver := &Row{ID: "verify-long-m32", Label: fmt.Sprintf("`prep verify --deep` --memory-limit 32MiB: %d rows of LIST<INT64>, %d zeros each (320 MB of values), converted under 32 MiB", gen.LongI64Rows, gen.LongLen),
		Argv: []string{prep, "verify", out64, "--deep", "--memory-limit", "32MiB"},
		Rows: gen.LongI64Rows, Bytes: gen.LongI64Rows * gen.LongLen * 8, Runs: 3}
	made := false
	ver.Setup = func() error {
		if made {
			return nil
		}
		if err := run(prep, "plan", "--source", i64, "--seed", "1", "--global-batch", "1", "-o", plan64); err != nil {
			return err
		}
		os.RemoveAll(out64)
		if err := run(prep, "convert", "--plan", plan64, "--spec", spec64, "-o", out64, "--memory-limit", "32MiB"); err != nil {
			return err
		}
		made = true
		return nil
	}
	rows := []*Row{conv, ver, d.verifyWideRow(run)}
	if !d.has("prep") {
		for _, r := range rows {
			r.Err = d.missing("cmd/prep")
		}
	}
	return rows
}

// verifyWideRow is the verify --deep row over wide footers: the shard set
// of the wide input (16 files of gen.WideColumns columns, about 6 MiB of
// heap per decoded footer), converted once under 32 MiB as the wide
// convert row converts it, checked under 32 MiB.
func (d *driver) verifyWideRow(run func(args ...string) error) *Row {
	prep := d.exe("prep")
	const files = 16
	spec, planPath := filepath.Join(d.work, "spec-wide.yaml"), filepath.Join(d.work, "plan-verify-wide-m32.json")
	out := filepath.Join(d.work, "out-verify-wide-m32")
	rows := int64(files * gen.WideRows)
	r := &Row{ID: "verify-wide-m32", Label: fmt.Sprintf("`prep verify --deep` --memory-limit 32MiB: %d files of %d columns, %d rows each, converted under 32 MiB", files, gen.WideColumns, gen.WideRows),
		Argv: []string{prep, "verify", out, "--deep", "--memory-limit", "32MiB"},
		Rows: rows, Bytes: rows * gen.WideColumns * 4, Runs: 3}
	made := false
	r.Setup = func() error {
		if made {
			return nil
		}
		if err := os.WriteFile(spec, []byte(specWide), 0o644); err != nil {
			return err
		}
		if err := run(prep, "plan", "--source", filepath.Join(d.data, "wide"), "--seed", "1", "--global-batch", "64", "--shuffle", "global", "-o", planPath); err != nil {
			return err
		}
		os.RemoveAll(out)
		if err := run(prep, "convert", "--plan", planPath, "--spec", spec, "-o", out, "--jobs", "2", "--memory-limit", "32MiB"); err != nil {
			return err
		}
		made = true
		return nil
	}
	return r
}

// memLimitTargets are the targets of the memory-limit rows: peak RSS (the
// largest of the runs) at most the limit plus memLimitConstant.
func (rep *report) memLimitTargets() []target {
	var ts []target
	for _, c := range []struct {
		id, name string
		limit    int64
	}{
		{"convert-long-m1g", "convert peak RSS, 260 rows x 1,000,000 INT32 zeros (--memory-limit 1GiB --jobs 1)", 1 << 30},
		{"verify-long-m32", "verify --deep peak RSS, 40 rows x 1,000,000 INT64 zeros (--memory-limit 32MiB)", 32 << 20},
		{"verify-wide-m32", "verify --deep peak RSS, 16 files x 5,000 columns (--memory-limit 32MiB)", 32 << 20},
	} {
		t := target{Name: c.name, Goal: fmt.Sprintf("<= %s + %s", fmtBytes(c.limit), fmtBytes(memLimitConstant))}
		if r := rep.row(c.id); r != nil && r.OK() {
			t.Known = true
			rss := r.PeakRSS()
			t.Measured = fmt.Sprintf("%s (largest of the runs)", fmtBytes(rss))
			t.Met = rss <= c.limit+memLimitConstant
			if !t.Met {
				t.Gap = fmt.Sprintf("over by %s", fmtBytes(rss-c.limit-memLimitConstant))
			}
		} else {
			t.Measured = "not measured"
		}
		ts = append(ts, t)
	}
	return ts
}
