package main

import (
	"strings"
	"testing"
)

// TestJaggedDeliveryTarget checks the jagged host-delivery target: the
// pread mode's median x-plain against 0.9, the mmap median beside it, the
// load average at the start of the run, and "not measured" without figures.
func TestJaggedDeliveryTarget(t *testing.T) {
	rep := &report{d: &driver{root: "/r", work: "/r/w"}, LoadAvg: [2]string{"2.88 3.09 3.42", "4.51 3.49 3.54"}}
	if got := rep.jaggedDeliveryTarget(); got.Known || got.Measured != "not measured" {
		t.Errorf("target without figures = %+v", got)
	}
	rep.JaggedDelivery = []*deliveryMetric{
		{Mode: "pread", Metric: fixedPrefix + "x-plain", Values: []float64{0.95, 0.96, 0.97}},
		{Mode: "pread", Metric: "x-plain", Values: []float64{0.52, 0.668, 0.65, 1.106, 0.79}},
		{Mode: "mmap", Metric: "x-plain", Values: []float64{0.85, 0.79, 0.93}},
	}
	got := rep.jaggedDeliveryTarget()
	if !got.Known || got.Met || got.Measured != "0.67x pread (0.85x mmap) at load average 2.88" || got.Gap != "missed by 26 %" {
		t.Errorf("target = %+v", got)
	}
	rep.JaggedDelivery[1].Values = []float64{0.9, 0.95, 0.91}
	if got := rep.jaggedDeliveryTarget(); !got.Met || got.Measured != "0.91x pread (0.85x mmap) at load average 2.88" {
		t.Errorf("met target = %+v", got)
	}
	rep.JaggedDeliveryErr = "run 1 failed"
	if got := rep.jaggedDeliveryTarget(); got.Known {
		t.Errorf("target of a failed run = %+v", got)
	}
}

// TestDeliveryTable checks the jagged delivery table: one row per mode of
// the jagged benchmark, the fixed-shape x-plain of the same mode in its own
// column, a value all runs share printed once, and a dash for a missing one.
func TestDeliveryTable(t *testing.T) {
	rep := &report{d: &driver{root: "/r", work: "/r/w"}, Runs: 3, JaggedDeliveryCmd: "go test ./gpuload"}
	rep.JaggedDelivery = []*deliveryMetric{
		{Mode: "pread", Metric: fixedPrefix + "x-plain", Values: []float64{0.8, 0.9, 0.85}},
		{Mode: "pread", Metric: "x-plain", Values: []float64{0.6, 0.7, 0.5}},
		{Mode: "pread", Metric: "x-values", Values: []float64{1.218, 1.218, 1.218}},
		{Mode: "mmap", Metric: "x-plain", Values: []float64{0.9, 0.8, 1}},
	}
	var b strings.Builder
	rep.deliveryTable(&b)
	want := "| mode | x-plain | fixed-shape x-plain, same runs | x-values | padded-x-values | mean-len |\n|---|---|---|---|---|---|\n" +
		"| pread | 0.600 (0.500–0.700) | 0.850 (0.800–0.900) | 1.218 | – | – |\n" +
		"| mmap | 0.900 (0.800–1.000) | – | – | – | – |\n\n"
	if got := b.String(); !strings.HasSuffix(got, want) || !strings.HasPrefix(got, "`go test ./gpuload` (one shard") {
		t.Errorf("table =\n%s\nwant it to end\n%s", got, want)
	}
}
