// Package source is where the bytes of Parquet files come from: discovery
// of the files a plan reads (local paths, directories and globs; object-store
// URLs), their footers and fingerprints, the "source unchanged?" check as a
// typed error, and Object, the one ranged-read interface through which every
// byte of Parquet is read. It imports pqread (for footer validation) and
// plan (for the source fingerprint types) and nothing above them.
//
// Discover turns paths into a plan.Source (prep plan); ReadInfo reads one
// file's plan record; Open opens a plan's file from a Store checked
// against the plan (convert), Check only compares it (verify); both report
// a difference as a *ChangedError (errors.Is ErrSourceChanged) and any
// other failure as an *Error giving the real cause. Local is the Store of a
// local directory, S3Store of an object-store prefix; OpenPlanStore
// resolves a plan's root (or the one a command overrides it with) to its
// Store, pinned to the plan's ETags and with the footers fetched ahead,
// and PlanStores keeps one per root for the readers of one command. Every error names its file relative to the source root,
// as the plan records it.
package source

import (
	"context"

	"github.com/prepml/prep/pqread"
)

// Object is one source file opened for ranged reads. It satisfies
// pqread.Input. Every read is pinned to the version seen when the object was
// opened (local files: size and modification time re-checked; object
// stores: the ETag sent as If-Match), so bytes of two versions are never
// mixed: a read of a changed object fails with a *ChangedError.
type Object interface {
	pqread.Input
	// Name returns the object's path relative to its store's root with '/'
	// separators, as plan.SourceFile.Path records it.
	Name() string
	// Identity returns the version the object was opened at: for a local
	// file "mtime=<unix ns> size=<bytes>", for an object store its ETag. It
	// is never a credential.
	Identity() string
	// Close releases what the object holds. It is safe to call twice.
	Close() error
}

// Store is one root of source files: a local directory or an object-store
// bucket and prefix (s3://bucket/prefix/). Names given to and returned by a
// Store are relative to its root with '/' separators.
type Store interface {
	// Open opens the named object for ranged reads. A missing object is an
	// error wrapping fs.ErrNotExist.
	Open(ctx context.Context, name string) (Object, error)
	// String returns the root as a user wrote it (a path or an s3:// URL
	// without credentials), for messages.
	String() string
}
