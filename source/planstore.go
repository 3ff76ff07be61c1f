package source

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/prepml/prep/plan"
)

// ErrBadRoot is wrapped by OpenPlanStore's error for a root that cannot be
// a Store: a local path that cannot be made absolute, or an s3:// URL that
// is malformed, a glob or carries credentials (that error wraps ErrBadURL
// or ErrCredentialURL as well). Its message is the cause's.
var ErrBadRoot = errors.New("bad source root")

// badRoot marks err as ErrBadRoot without changing its message.
type badRoot struct{ err error }

func (e badRoot) Error() string        { return e.err.Error() }
func (e badRoot) Unwrap() error        { return e.err }
func (e badRoot) Is(target error) bool { return target == ErrBadRoot }

// PlanStore is the Store of a plan's source files that OpenPlanStore
// resolved, for one command.
type PlanStore struct {
	// Store is a *Local or an *S3Store (never a wrapper: readers tell a
	// local store by its type).
	Store Store
	// Root is the resolved root: a local directory (absolute when given
	// as an override) or an s3://bucket/prefix/ URL (S3Store.String). A
	// command reading the plan's files through the store records it as
	// the plan's plan.Source.Root.
	Root string
	// S3 is Store when it is an object store, else nil.
	S3 *S3Store
}

// Stats returns the object-store traffic of the store's client so far:
// nil for a local store (and for a nil *PlanStore).
func (p *PlanStore) Stats() *S3Stats {
	if p == nil || p.S3 == nil {
		return nil
	}
	st := p.S3.Client().Stats()
	return &st
}

// Close closes what an object store opened ahead and no reader took
// (S3Store.Close). It is a no-op for a local store and a nil *PlanStore.
func (p *PlanStore) Close() error {
	if p == nil || p.S3 == nil {
		return nil
	}
	return p.S3.Close()
}

// OpenPlanStore returns the Store a command reads a plan's source files
// from. src is the plan's source (plan.Plan.Source: its root and files);
// root, when not "", replaces src.Root (--source-root: the same files
// moved or copied elsewhere): a local directory, made absolute, or an
// s3:// URL.
//
// A local root gets a *Local. An s3:// root gets an *S3Store over a new
// S3Client with options o (the standard AWS credential chain unless
// o.Config is set; o.ReadAheadBytes is the read-ahead budget). Through the
// plan's own root (the same URL, a final '/' aside) every object is pinned
// to the ETag the plan recorded for it (S3Store.Pin), so an object
// replaced since the plan was made fails even with its size and footer
// unchanged; through another root each object is pinned to the version
// its first read sees, once its size and footer hash matched the plan
// (Open). Every file's footer is then fetched ahead, o.Concurrency at a
// time (S3Store.Preopen, bounded by ctx), so readers that open the files
// one after the other pay no round trip per file. No request is made
// before that.
//
// Errors: a root that cannot be a Store wraps ErrBadRoot (an s3:// one
// also ErrBadURL or ErrCredentialURL); a client that cannot be configured
// returns NewS3Client's error.
func OpenPlanStore(ctx context.Context, src plan.Source, root string, o S3Options) (*PlanStore, error) {
	switch {
	case root == "":
		root = src.Root
	case !IsS3URL(root):
		abs, err := filepath.Abs(root)
		if err != nil {
			return nil, badRoot{fmt.Errorf("source root %s: %w", root, err)}
		}
		root = abs
	}
	if !IsS3URL(root) {
		st, err := NewLocal(root)
		if err != nil {
			return nil, badRoot{err}
		}
		return &PlanStore{Store: st, Root: root}, nil
	}
	c, err := NewS3Client(ctx, o)
	if err != nil {
		return nil, err
	}
	st, err := c.Store(root)
	if err != nil {
		return nil, badRoot{err}
	}
	if st.String() == strings.TrimSuffix(src.Root, "/")+"/" {
		pins := map[string]string{}
		for _, f := range src.Files {
			if f.ETag != "" {
				pins[f.Path] = f.ETag
			}
		}
		st.Pin(pins)
	}
	// Readers open the plan's files one after the other: fetch every
	// footer ahead, Concurrency at a time, so each open costs no round trip.
	st.Preopen(ctx, src.Files)
	return &PlanStore{Store: st, Root: st.String(), S3: st}, nil
}

// PlanStores resolves the Store of a plan's files once per root
// (OpenPlanStore), for the several readers of one command (verify's
// fingerprint check and each shard's deep source), so that they share one
// client, its counters and the footers fetched ahead. It is safe for
// concurrent use; the zero value is not: use NewPlanStores.
type PlanStores struct {
	o      S3Options
	mu     sync.Mutex
	stores map[string]*PlanStore
	order  []string // roots in the order they were opened, for Close
}

// NewPlanStores returns an empty cache whose object stores are opened with
// options o.
func NewPlanStores(o S3Options) *PlanStores {
	return &PlanStores{o: o, stores: map[string]*PlanStore{}}
}

// Store returns the Store of src's files under root (OpenPlanStore's
// arguments and errors), opened at the first call for root: a later call
// with the same root returns that store, whatever src it gives. A failed
// open is not remembered.
func (c *PlanStores) Store(ctx context.Context, src plan.Source, root string) (Store, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ps, ok := c.stores[root]; ok {
		return ps.Store, nil
	}
	ps, err := OpenPlanStore(ctx, src, root, c.o)
	if err != nil {
		return nil, err
	}
	c.stores[root] = ps
	c.order = append(c.order, root)
	return ps.Store, nil
}

// Close closes every store opened (PlanStore.Close).
func (c *PlanStores) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.order {
		c.stores[r].Close()
	}
	return nil
}
