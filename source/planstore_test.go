package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prepml/prep/plan"
)

// options returns the options of e's client (the test server, through
// the proxy), for OpenPlanStore to make a client of its own.
func (e *s3env) options() S3Options { return e.c.o }

// TestOpenPlanStoreLocal: the plan's own root is taken as recorded, an
// override is made absolute; both give a *Local with no object-store
// traffic to report, and closing them is a no-op.
func TestOpenPlanStoreLocal(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	src := plan.Source{Root: dir, Files: []plan.SourceFile{{Path: "a.parquet"}}}
	ps, err := OpenPlanStore(ctx, src, "", S3Options{})
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := ps.Store.(*Local); !ok || l.String() != dir || ps.Root != dir || ps.S3 != nil || ps.Stats() != nil || ps.Close() != nil {
		t.Fatalf("plan root: %#v", ps)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	ps, err = OpenPlanStore(ctx, src, "moved/here", S3Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(wd, "moved", "here"); ps.Root != want || ps.Store.String() != want {
		t.Fatalf("override: root %q, store %q; want %q", ps.Root, ps.Store, want)
	}
	var nilStore *PlanStore
	if nilStore.Stats() != nil || nilStore.Close() != nil {
		t.Fatal("a nil PlanStore reports traffic or fails to close")
	}
}

// TestOpenPlanStoreBadRoots: a root that cannot be a store is refused
// before any request, wrapping ErrBadRoot and the URL's own sentinel, and
// the secret of a credential URL is not echoed.
func TestOpenPlanStoreBadRoots(t *testing.T) {
	e := newS3Env(t, S3Options{})
	src := plan.Source{Root: "s3://data/p/"}
	for root, want := range map[string]error{
		"s3://AKIAX:hunter2secret@data/p/": ErrCredentialURL,
		"s3://data/p/*.parquet":            ErrBadURL,
		"s3://Bad_Bucket/p/":               ErrBadURL,
	} {
		_, err := OpenPlanStore(context.Background(), src, root, e.options())
		if !errors.Is(err, ErrBadRoot) || !errors.Is(err, want) {
			t.Errorf("%s: %v; want ErrBadRoot and %v", root, err, want)
		}
		if err != nil && (strings.Contains(err.Error(), "hunter2secret") || err.Error() == ErrBadRoot.Error()) {
			t.Errorf("%s: message %q", root, err)
		}
	}
	if c := e.srv.Counts(); c.Gets+c.Heads+c.Lists != 0 {
		t.Fatalf("requests made for bad roots: %+v", c)
	}
}

// s3PlanSource uploads n small objects under prefix and returns the plan
// source recording them (with their ETags), as a discovery would.
func s3PlanSource(t *testing.T, e *s3env, prefix string, n int) plan.Source {
	t.Helper()
	src := plan.Source{Root: "s3://data/" + prefix}
	for i := range n {
		name := fmt.Sprintf("f%d.parquet", i)
		etag := e.put(t, prefix+name, fakeParquet(2000, 100, uint64(70+i)))
		src.Files = append(src.Files, plan.SourceFile{Path: name, Size: 2000, ETag: etag})
	}
	return src
}

// TestOpenPlanStorePinsPlanRoot: through the plan's own root (with or
// without its final '/') each object is pinned to the ETag the plan
// recorded, so a replaced object with the same size fails with a
// *ChangedError; through another root holding the same objects nothing
// is pinned ahead and the open succeeds.
func TestOpenPlanStorePinsPlanRoot(t *testing.T) {
	e := newS3Env(t, S3Options{})
	ctx := context.Background()
	src := s3PlanSource(t, e, "p/", 2)
	data := fakeParquet(2000, 100, 70)
	data[10] ^= 1
	e.put(t, "p/f0.parquet", data) // same size, new version
	e.put(t, "q/f0.parquet", data)
	for _, root := range []string{"", "s3://data/p", "s3://data/p/"} {
		ps, err := OpenPlanStore(ctx, src, root, e.options())
		if err != nil {
			t.Fatal(err)
		}
		if ps.Root != "s3://data/p/" || ps.S3 == nil || ps.Store != Store(ps.S3) {
			t.Fatalf("root %q: %#v", root, ps)
		}
		var ce *ChangedError
		if _, err := ps.Store.Open(ctx, "f0.parquet"); !errors.As(err, &ce) {
			t.Errorf("root %q: opening a replaced object: %v, want a *ChangedError", root, err)
		}
		obj, err := ps.Store.Open(ctx, "f1.parquet")
		if err != nil {
			t.Fatalf("root %q: unchanged object: %v", root, err)
		}
		obj.Close()
		ps.Close()
	}
	ps, err := OpenPlanStore(ctx, src, "s3://data/q/", e.options())
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	obj, err := ps.Store.Open(ctx, "f0.parquet")
	if err != nil {
		t.Fatalf("another root: %v", err)
	}
	obj.Close()
}

// TestOpenPlanStorePreopens: OpenPlanStore fetches every file's footer
// ahead (one tail GET each, the objects being smaller than the footer
// guess), so after one Open and Close the server has served exactly one
// GET per file, and the store's counters (Stats) report them.
func TestOpenPlanStorePreopens(t *testing.T) {
	e := newS3Env(t, S3Options{})
	ctx := context.Background()
	src := s3PlanSource(t, e, "p/", 4)
	ps, err := OpenPlanStore(ctx, src, "", e.options())
	if err != nil {
		t.Fatal(err)
	}
	obj, err := ps.Store.Open(ctx, "f2.parquet")
	if err != nil {
		t.Fatal(err)
	}
	obj.Close()
	ps.Close() // waits for the three never opened
	if c := e.srv.Counts(); c.Gets != 4 || c.Heads != 0 || c.Lists != 0 {
		t.Fatalf("requests %+v, want 4 GETs (one tail per file)", c)
	}
	if st := ps.Stats(); st == nil || st.Requests != 4 {
		t.Fatalf("stats %+v, want 4 requests", st)
	}
}

// TestPlanStoresOneStorePerRoot: a root is opened once, whatever plan
// source later calls give; another root gets a store of its own; a failed
// open is not remembered.
func TestPlanStoresOneStorePerRoot(t *testing.T) {
	e := newS3Env(t, S3Options{})
	ctx := context.Background()
	src := s3PlanSource(t, e, "p/", 1)
	c := NewPlanStores(e.options())
	defer c.Close()
	a, err := c.Store(ctx, src, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Store(ctx, plan.Source{Root: "s3://data/elsewhere/"}, "")
	if err != nil || b != a {
		t.Fatalf("second call for the plan root: %v, %v (same store: %v)", b, err, b == a)
	}
	local := t.TempDir()
	l, err := c.Store(ctx, src, local)
	if err != nil || l == a || l.String() != local {
		t.Fatalf("local root: %v, %v", l, err)
	}
	if _, err := c.Store(ctx, src, "s3://data/p/*"); !errors.Is(err, ErrBadRoot) {
		t.Fatalf("glob root: %v", err)
	}
	if _, err := c.Store(ctx, src, "s3://data/p/*"); !errors.Is(err, ErrBadRoot) {
		t.Fatalf("glob root, again: %v", err)
	}
}
