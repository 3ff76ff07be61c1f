package verify_test

import (
	"fmt"
	"os"
	"reflect"
	"sync"
	"testing"

	"github.com/prepml/prep/verify"
	"github.com/prepml/prep/verify/verifytest"
)

// fileLog counts the shard files verify opens and closes, and the most
// open at once.
type fileLog struct {
	mu             sync.Mutex
	opens, closes  int
	open, mostOpen int
	perShard       map[string]int                // opens per shard
	onClose        func(name string, closes int) // called with the shard's closes so far
	shardCloses    map[string]int
}

func (l *fileLog) hook(name string, open bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perShard == nil {
		l.perShard, l.shardCloses = map[string]int{}, map[string]int{}
	}
	if open {
		l.opens++
		l.open++
		l.perShard[name]++
		l.mostOpen = max(l.mostOpen, l.open)
		return
	}
	l.closes++
	l.open--
	l.shardCloses[name]++
	if l.onClose != nil {
		l.onClose(name, l.shardCloses[name])
	}
}

// TestDeepPartsOpenShardsCapped: over the fixture of
// TestDeepPartsFindingsAsBatchByBatch (4 shards, values changed in
// three), with at most 1, 2 or 3 shard files open (Jobs 1 or 2: none or
// one shard held open to the end, the others reopened for each pass), the
// deep check by parts reports the findings, in order, and the batches
// compared of the run with the default (every shard held open: 4 opens).
// No more files are open at once than the cap, every one opened is
// closed, and a shard not held open is opened once for its integrity
// check, once for the first part's ids and once per part (Holds): none
// of the 4 shards lacks an id of any part, none has an empty batch.
func TestDeepPartsOpenShardsCapped(t *testing.T) {
	f := threeShardsChanged(t)
	for _, limit := range []int64{4 << 10, 16 << 10, 1 << 30} {
		for _, c := range []struct{ jobs, cap, held int }{{1, 1, 0}, {1, 2, 1}, {2, 2, 0}, {2, 3, 1}} {
			opts := verify.Options{Dir: f.Dir, Deep: true, Jobs: c.jobs, MaxPerShard: 5, MemoryLimit: limit}
			var base fileLog
			restore := verify.SetShardFiles(0, base.hook)
			opts.Source = verifytest.OpenSource
			want := verifytest.Run(t, opts)
			restore()
			if len(want.Findings) != 3*6 || base.opens != 4 || base.closes != 4 {
				t.Fatalf("default: %d findings, %d opens, %d closes; want 18, 4, 4\n%s", len(want.Findings), base.opens, base.closes, verifytest.Lines(want))
			}
			var l fileLog
			var holds holdLog
			restore = verify.SetShardFiles(c.cap, l.hook)
			opts.Source = holds.opener
			got := verifytest.Run(t, opts)
			restore()
			name := fmt.Sprintf("limit %d jobs %d cap %d", limit, c.jobs, c.cap)
			if !reflect.DeepEqual(got.Findings, want.Findings) || got.DeepBatches != want.DeepBatches {
				t.Errorf("%s: capped (deep %d):\n%s\ndefault (deep %d):\n%s", name, got.DeepBatches, verifytest.Lines(got), want.DeepBatches, verifytest.Lines(want))
			}
			if l.mostOpen > c.cap || l.open != 0 || l.opens != l.closes {
				t.Errorf("%s: %d files open at most, %d left open (%d opens, %d closes)", name, l.mostOpen, l.open, l.opens, l.closes)
			}
			if wantOpens := c.held + (4-c.held)*(2+len(holds.holds)); l.opens != wantOpens {
				t.Errorf("%s: %d opens over %d parts, want %d (per shard %v)", name, l.opens, len(holds.holds), wantOpens, l.perShard)
			}
		}
	}
}

// TestDeepPartsShardReplacedBetweenParts: with every shard reopened for
// each pass (1 file open at a time, Jobs 1) under a limit that cuts the
// set into 16 parts, shard 1 changed once the first part's ids are read
// (its second close) is reported once, with no batch, and none of its
// batches is counted as compared: replaced by a copy of itself (another
// file of the same bytes) an io_error, cut short in place a size_mismatch
// giving both sizes. A shard held open to the end (cap 2: shard 0, the
// first checked) reads the file it checked: replaced at that moment, its
// copy is never seen.
func TestDeepPartsShardReplacedBetweenParts(t *testing.T) {
	f := verifytest.BuildSize(t, verifytest.Size{Rows: 800, Dim: 3, GlobalBatch: 16, RowGroups: 8})
	steps := f.Plan.Steps()
	replace := func(i int) func() {
		return func() {
			path := f.ShardPath(i)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path+".new", b, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(path+".new", path); err != nil {
				t.Fatal(err)
			}
		}
	}
	size := f.Man.Shards[1].Size
	truncate := func() {
		if err := os.Truncate(f.ShardPath(1), size-4096); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name   string
		cap    int
		shard  int
		change func()
		want   *verify.Finding // nil: none
	}{
		{"replaced", 1, 1, replace(1), &verify.Finding{Kind: verify.KindIOError,
			Message: "shard was replaced during verification (its name holds another file than the one checked): its values were no longer compared"}},
		{"truncated", 1, 1, truncate, &verify.Finding{Kind: verify.KindSizeMismatch, What: "size", Expected: fmt.Sprint(size), Actual: fmt.Sprint(size - 4096),
			Message: "shard changed size during verification: its values were no longer compared"}},
		{"held open", 2, 0, replace(0), nil},
	} {
		backup, err := os.ReadFile(f.ShardPath(c.shard))
		if err != nil {
			t.Fatal(err)
		}
		name := f.Man.Shards[c.shard].Path
		changed := 0
		l := fileLog{onClose: func(n string, closes int) {
			if n == f.Man.Shards[1].Path && closes == 2 {
				changed++
				c.change()
			}
		}}
		restore := verify.SetShardFiles(c.cap, l.hook)
		var holds holdLog
		rep := verifytest.Run(t, verify.Options{Dir: f.Dir, Deep: true, Source: holds.opener, Jobs: 1, MemoryLimit: 4 << 10})
		restore()
		if changed != 1 || len(holds.holds) != 16 {
			t.Fatalf("%s: test premise: %d changes, %d parts; want 1, 16", c.name, changed, len(holds.holds))
		}
		var want []verify.Finding
		deep := 4 * steps
		if c.want != nil {
			w := *c.want
			w.Shard, w.Epoch, w.Rank = name, &f.Man.Shards[c.shard].Epoch, &f.Man.Shards[c.shard].Rank
			want, deep = []verify.Finding{w}, 3*steps
		}
		if len(rep.Findings)+len(want) > 0 && !reflect.DeepEqual(rep.Findings, want) || rep.DeepBatches != deep {
			t.Errorf("%s: deep %d of %d batches, findings:\n%s\nwant %v", c.name, rep.DeepBatches, deep, verifytest.Lines(rep), want)
		}
		if l.open != 0 || l.mostOpen > c.cap {
			t.Errorf("%s: %d files left open, %d at most", c.name, l.open, l.mostOpen)
		}
		if err := os.WriteFile(f.ShardPath(c.shard), backup, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
