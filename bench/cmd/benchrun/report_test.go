package main

import (
	"strings"
	"testing"

	"github.com/prepml/prep/bench/internal/result"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}, {[]float64{5}, 5}, {nil, 0}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func row(id string, bytes int64, times ...float64) *Row {
	r := &Row{ID: id, Bytes: bytes, Times: times}
	for range times {
		r.Results = append(r.Results, result.Result{})
		r.RSS = append(r.RSS, 100<<20)
		r.CPU = append(r.CPU, 1)
	}
	return r
}

// TestTargets checks the target arithmetic: rate at the median, ratios of
// rates, and the "missed by" wording.
func TestTargets(t *testing.T) {
	d := &driver{root: "/r", work: "/r/w"}
	rep := &report{d: d}
	rep.Convert = []*Row{row("convert-req-plain-snappy", 600e6, 1, 2, 0.5)} // 600 MB/s at the median 1 s
	rep.Peers = []*Row{row("pqarrow-req-plain-snappy", 600e6, 2, 3, 4)}     // 200 MB/s
	rep.Verify = []*Row{row("verify", 1e9, 1), row("read-shards", 1e9, 0.5)}
	ts := rep.targets("", "")
	byName := map[string]target{}
	for _, x := range ts {
		byName[x.Name] = x
	}
	c := byName["convert, req-plain-snappy"]
	if !c.Known || c.Met || c.Measured != "600 MB/s" || c.Gap != "missed by 50 % (needs 2.0x the speed)" {
		t.Errorf("convert target = %+v", c)
	}
	p := byName["convert vs pqarrow, req-plain-snappy"]
	if !p.Known || !p.Met || !strings.HasPrefix(p.Measured, "3.00x") {
		t.Errorf("pqarrow target = %+v", p)
	}
	v := byName["verify vs plain read"]
	if !v.Known || v.Met || !strings.HasPrefix(v.Measured, "0.50x") || v.Gap != "missed by 38 % (needs 1.60x the speed)" {
		t.Errorf("verify target = %+v", v)
	}
	if h := byName["gpuload host delivery vs plain read"]; h.Known || h.Measured != "not measured" {
		t.Errorf("host target without rows = %+v", h)
	}
	// Only one profile per stage, and only for missed targets.
	if c.Profile == nil || p.Profile != nil || v.Profile == nil {
		t.Errorf("profiles: convert %v, pqarrow %v, verify %v", c.Profile != nil, p.Profile != nil, v.Profile != nil)
	}
}

// TestConvertBound checks the bound's arithmetic: half the 1-core
// decompression time plus the fsynced write time is the floor, and the
// bound is the convert row's bytes over it.
func TestConvertBound(t *testing.T) {
	rep := &report{d: &driver{root: "/r", work: "/r/w"}}
	if got := rep.convertBound(); got != "" {
		t.Fatalf("bound without rows = %q, want none", got)
	}
	rep.Limits = []*Row{row("decompress-req-plain-snappy", 200e6, 0.1, 0.2, 0.3), row("write-shards-fsync", 240e6, 0.1, 0.15, 0.2)}
	rep.Peers = []*Row{row("pqarrow-req-plain-snappy", 500e6, 2)} // 250 MB/s
	rep.Convert = []*Row{row("convert-req-plain-snappy", 500e6, 1)}
	got := rep.convertBound()
	// floor = 0.2/2 + 0.15 = 0.25 s; bound = 500 MB / 0.25 s = 2 GB/s.
	for _, want := range []string{"(0.200 s / 2,", "(0.150 s, the write row below): 0.250 s", "at most 2.00 GB/s",
		"target is 0.60x that bound", "3x pqarrow (750 MB/s) is 0.38x it", "convert takes 1.000 s (4.00x the floor)"} {
		if !strings.Contains(got, want) {
			t.Errorf("bound text lacks %q:\n%s", want, got)
		}
	}
}
