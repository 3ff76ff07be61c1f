package metrics

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

const header = `# HELP prep_runs_total Runs of prep finished, successful or not.
# TYPE prep_runs_total counter
`

func TestWriteFileFirstSuccess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "prep.prom")
	err := WriteFile(path, Run{
		Command: "convert", Output: "/local/shards",
		Rows: 103, Bytes: 1 << 20, ShardsWritten: 8, ShardsSkipped: 0, PeakRSSBytes: 300 << 20, SpillBytes: 4096,
		Duration: 2500 * time.Millisecond, End: time.Unix(1700000000, 250e6), Success: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	l := `{command="convert",output="/local/shards"}`
	want := header +
		"prep_runs_total" + l + " 1\n" +
		"# HELP prep_errors_total Runs of prep that failed.\n# TYPE prep_errors_total counter\n" +
		"prep_errors_total" + l + " 0\n" +
		"# HELP prep_rows_total Sample rows written to shards.\n# TYPE prep_rows_total counter\n" +
		"prep_rows_total" + l + " 103\n" +
		"# HELP prep_bytes_written_total Bytes of shard files written.\n# TYPE prep_bytes_written_total counter\n" +
		"prep_bytes_written_total" + l + " 1048576\n" +
		"# HELP prep_shards_written Shards written by the last run.\n# TYPE prep_shards_written gauge\n" +
		"prep_shards_written" + l + " 8\n" +
		"# HELP prep_shards_skipped Shards already complete and skipped by the last run.\n# TYPE prep_shards_skipped gauge\n" +
		"prep_shards_skipped" + l + " 0\n" +
		"# HELP prep_duration_seconds Wall time of the last run in seconds.\n# TYPE prep_duration_seconds gauge\n" +
		"prep_duration_seconds" + l + " 2.5\n" +
		"# HELP prep_last_run_timestamp_seconds Unix time in seconds when the last run ended.\n# TYPE prep_last_run_timestamp_seconds gauge\n" +
		"prep_last_run_timestamp_seconds" + l + " 1700000000.25\n" +
		"# HELP prep_last_run_success 1 if the last run succeeded, 0 if it failed.\n# TYPE prep_last_run_success gauge\n" +
		"prep_last_run_success" + l + " 1\n" +
		"# HELP prep_last_success_timestamp_seconds Unix time in seconds when the last successful run ended; 0 if none.\n# TYPE prep_last_success_timestamp_seconds gauge\n" +
		"prep_last_success_timestamp_seconds" + l + " 1700000000.25\n" +
		"# HELP prep_peak_rss_bytes Peak resident set size of the last run in bytes.\n# TYPE prep_peak_rss_bytes gauge\n" +
		"prep_peak_rss_bytes" + l + " 314572800\n" +
		"# HELP prep_spill_bytes Bytes of staging the last run spilled to disk for exceeding its memory limit; 0 if none.\n# TYPE prep_spill_bytes gauge\n" +
		"prep_spill_bytes" + l + " 4096\n"
	if string(got) != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v, want 0644", fi.Mode().Perm())
	}
	// No temporary file is left next to it.
	ents, _ := os.ReadDir(filepath.Dir(path))
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !reflect.DeepEqual(names, []string{"prep.prom", "prep.prom.lock"}) {
		t.Fatalf("directory holds %v", names)
	}
}

func values(t *testing.T, path string) map[string]float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ss, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]float64{}
	for _, s := range ss {
		m[s.Command+"|"+s.Output+"|"+s.Name] = s.Value
	}
	return m
}

func TestFailedRunKeepsLastSuccess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "prep.prom")
	runs := []Run{
		{Command: "convert", Output: "/o", Rows: 10, Bytes: 4096, ShardsWritten: 2, Duration: time.Second, End: time.Unix(1000, 0), Success: true},
		{Command: "convert", Output: "/o", Rows: 5, Bytes: 100, ShardsWritten: 0, ShardsSkipped: 1, Duration: 3 * time.Second, End: time.Unix(2000, 0), Success: false},
		{Command: "gc", Output: "/o", Duration: 0, End: time.Unix(2500, 0), Success: true},
	}
	for _, r := range runs {
		if err := WriteFile(path, r); err != nil {
			t.Fatal(err)
		}
	}
	got := values(t, path)
	want := map[string]float64{
		"convert|/o|prep_runs_total":                     2,
		"convert|/o|prep_errors_total":                   1,
		"convert|/o|prep_rows_total":                     15,
		"convert|/o|prep_bytes_written_total":            4196,
		"convert|/o|prep_shards_written":                 0,
		"convert|/o|prep_shards_skipped":                 1,
		"convert|/o|prep_duration_seconds":               3,
		"convert|/o|prep_last_run_timestamp_seconds":     2000,
		"convert|/o|prep_last_run_success":               0,
		"convert|/o|prep_last_success_timestamp_seconds": 1000,
		"gc|/o|prep_runs_total":                          1,
		"gc|/o|prep_errors_total":                        0,
		"gc|/o|prep_rows_total":                          0,
		"gc|/o|prep_bytes_written_total":                 0,
		"gc|/o|prep_shards_written":                      0,
		"gc|/o|prep_shards_skipped":                      0,
		"gc|/o|prep_duration_seconds":                    0,
		"gc|/o|prep_last_run_timestamp_seconds":          2500,
		"gc|/o|prep_last_run_success":                    1,
		"gc|/o|prep_last_success_timestamp_seconds":      2500,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}

func TestFailedFirstRunHasZeroLastSuccess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.prom")
	if err := WriteFile(path, Run{Command: "convert", Output: "o", End: time.Unix(5, 0)}); err != nil {
		t.Fatal(err)
	}
	got := values(t, path)
	if got["convert|o|prep_last_success_timestamp_seconds"] != 0 || got["convert|o|prep_errors_total"] != 1 || got["convert|o|prep_last_run_success"] != 0 {
		t.Fatalf("got %v", got)
	}
}

func TestLabelEscaping(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.prom")
	out := "/data/a \"b\"\\c\nd"
	if err := WriteFile(path, Run{Command: "convert", Output: out, Rows: 7, End: time.Unix(1, 0), Success: true}); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	line := `prep_rows_total{command="convert",output="/data/a \"b\"\\c\nd"} 7`
	if !strings.Contains(string(raw), line+"\n") {
		t.Fatalf("file lacks %s:\n%s", line, raw)
	}
	if got := values(t, path)["convert|"+out+"|prep_rows_total"]; got != 7 {
		t.Fatalf("round trip of escaped label: %v", got)
	}
}

func TestParseSkipsOtherMetricsAndRejectsBadLines(t *testing.T) {
	in := "# comment\n\nnode_load1 3\nprep_rows_total{command=\"c\",output=\"o\"} 12 1700000000000\n"
	ss, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if want := []Sample{{Name: "prep_rows_total", Command: "c", Output: "o", Value: 12}}; !reflect.DeepEqual(ss, want) {
		t.Fatalf("got %+v", ss)
	}
	for _, bad := range []string{
		"prep_rows_total{command=\"c\"} x\n",
		"prep_rows_total{command=\"c} 1\n",
		"prep_rows_total{command=\"c\"}\n",
	} {
		_, err := Parse(strings.NewReader("# x\n" + bad))
		var pe *ParseError
		if !errors.Is(err, ErrSyntax) || !errors.As(err, &pe) || pe.Line != 2 {
			t.Errorf("Parse(%q) = %v, want ErrSyntax at line 2", bad, err)
		}
	}
}

func TestCorruptPreviousFileIsReported(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.prom")
	if err := os.WriteFile(path, []byte("prep_rows_total{ 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := WriteFile(path, Run{Command: "convert", Output: "o", End: time.Unix(1, 0), Success: true})
	if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), path+":1:") {
		t.Fatalf("err = %v", err)
	}
}

func TestConcurrentWritersLoseNoRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.prom")
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			out := []string{"/a", "/b"}[i%2]
			if err := WriteFile(path, Run{Command: "convert", Output: out, Rows: 1, End: time.Unix(int64(i), 0), Success: true}); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	got := values(t, path)
	if got["convert|/a|prep_runs_total"] != 4 || got["convert|/b|prep_runs_total"] != 4 || got["convert|/a|prep_rows_total"] != 4 {
		t.Fatalf("got %v", got)
	}
}

// TestSourceCountersAccumulate: object-store traffic is written only for
// runs that had some, and adds up over runs like the other counters.
func TestSourceCountersAccumulate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "prep.prom")
	runs := []Run{
		{Command: "convert", Output: "/o", SourceRequests: 10, SourceRetries: 2, SourceBytesFetched: 5000, SourceBytesNeeded: 4900, End: time.Unix(1000, 0), Success: true},
		{Command: "convert", Output: "/o", SourceRequests: 3, SourceRetries: 0, SourceBytesFetched: 700, SourceBytesNeeded: 690, End: time.Unix(2000, 0), Success: true},
		{Command: "convert", Output: "/local", End: time.Unix(2000, 0), Success: true},
	}
	for _, r := range runs {
		if err := WriteFile(path, r); err != nil {
			t.Fatal(err)
		}
	}
	got := values(t, path)
	for k, v := range map[string]float64{
		"convert|/o|prep_source_requests_total":      13,
		"convert|/o|prep_source_retries_total":       2,
		"convert|/o|prep_source_bytes_fetched_total": 5700,
		"convert|/o|prep_source_bytes_needed_total":  5590,
	} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if _, ok := got["convert|/local|prep_source_requests_total"]; ok {
		t.Error("a local run wrote object-store counters")
	}
}
