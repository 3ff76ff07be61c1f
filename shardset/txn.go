package shardset

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"

	"github.com/prepml/prep/shardfmt"
)

// Txn is one writing run on a shard set (a convert): it holds the
// directory's lock from Begin to End, creates and commits shards through
// the set's root, keeps the manifest on disk listing only committed shards,
// and on failure puts the directory back as it was (Rollback). Its methods
// are safe for concurrent use by the shard writers of one run.
type Txn struct {
	set     *Set
	lock    *DirLock
	created bool // Begin created the directory

	mu          sync.Mutex
	man         *shardfmt.Manifest // in-memory manifest (SetManifest)
	oldManifest []byte             // manifest.json before the run; nil if none
	oldPlan     []byte             // plan.json before the run; nil if none
	wroteMan    bool               // this run wrote (or tried to write) manifest.json
	wrotePlan   bool               // this run wrote (or tried to write) plan.json
	replaced    bool               // Replace removed the shards of another set
	committed   []string           // shard names this run put in place
	manVersion  int                // in-memory manifest changes by Commit
	manWriteMu  sync.Mutex         // serialises manifest writes (syncManifest)
	manWritten  int                // manVersion last written (under manWriteMu)
}

// Begin starts a write transaction on dir: it creates dir if missing, takes
// its lock (a *HeldError when another run holds it; a lock name that is a
// symbolic link is refused), removes what killed runs left behind (the
// staging directory TempDirName and unfinished atomic writes of shards, the
// manifest and the plan copy; a symbolic link at any of these names is
// removed itself, never followed) and reads the manifest and plan copy
// found there (OldManifest, OldPlan). On error nothing is left: a
// directory Begin created is removed again.
func Begin(dir string) (*Txn, error) {
	created := false
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		created = true
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating output directory: %w", err)
	}
	t := &Txn{created: created}
	fail := func(err error) (*Txn, error) {
		if t.lock != nil {
			t.lock.Release()
		}
		if t.set != nil {
			t.set.Close()
		}
		if created {
			os.Remove(dir)
		}
		return nil, err
	}
	var err error
	if t.set, err = OpenDir(dir); err != nil {
		return fail(err)
	}
	if t.lock, err = Lock(dir); err != nil {
		var he *HeldError
		if errors.As(err, &he) {
			return fail(fmt.Errorf("output directory %s: %w", dir, err))
		}
		return fail(err)
	}
	t.removeLeftovers()
	if t.oldManifest, err = t.set.ReadFile(ManifestName); errors.Is(err, fs.ErrNotExist) {
		t.oldManifest = nil
	} else if err != nil {
		return fail(fmt.Errorf("reading manifest: %w", err))
	}
	if t.oldPlan, err = t.set.ReadFile(PlanName); errors.Is(err, fs.ErrNotExist) {
		t.oldPlan = nil
	} else if err != nil {
		return fail(fmt.Errorf("reading plan copy: %w", err))
	}
	return t, nil
}

// removeLeftovers removes the staging directory and the temporary files of
// atomic writes (of shards, the manifest and the plan copy) killed runs
// left behind.
func (t *Txn) removeLeftovers() {
	t.set.RemoveAll(TempDirName)
	for _, st := range t.set.Strays(nil) {
		if isAtomicTemp(st) {
			t.set.Remove(st.Path)
		}
	}
}

// isAtomicTemp reports whether st is the temporary file of an atomic write
// of a shard, the manifest or the plan copy ("<name>.tmp-*"), which only a
// run holding the lock can be writing.
func isAtomicTemp(st Stray) bool {
	base := path.Base(st.Path)
	switch {
	case st.Kind != StrayTemp || !strings.Contains(base, TempInfix):
		return false
	case st.Epoch >= 0:
		return strings.HasPrefix(st.Path, ShardPath(st.Epoch, st.Rank)+TempInfix)
	}
	return strings.HasPrefix(st.Path, ManifestName+TempInfix) || strings.HasPrefix(st.Path, PlanName+TempInfix)
}

// Set returns the transaction's shard set.
func (t *Txn) Set() *Set { return t.set }

// Lock returns the held lock (Lock().Stale names the owner of a stale lock
// Begin took over).
func (t *Txn) Lock() *DirLock { return t.lock }

// OldManifest returns the bytes of manifest.json as Begin found it, nil if
// there was none.
func (t *Txn) OldManifest() []byte { return t.oldManifest }

// OldPlan returns the bytes of plan.json as Begin found it, nil if there was
// none.
func (t *Txn) OldPlan() []byte { return t.oldPlan }

// SetManifest sets the in-memory manifest Commit adds entries to (the
// earlier manifest when resuming, or a new one). The Txn owns m from then
// on: read it only through Manifest.
func (t *Txn) SetManifest(m *shardfmt.Manifest) {
	t.mu.Lock()
	t.man = m
	t.mu.Unlock()
}

// Complete reports whether the shard of entry e is on disk, reached without
// a symbolic link, as long as the manifest says (a rerun skips it).
func (t *Txn) Complete(e shardfmt.ShardEntry) bool {
	fi, err := t.set.CheckName(e.Path)
	return err == nil && fi.Mode().IsRegular() && fi.Size() == e.Size
}

// Replace is for a run replacing a set made from other inputs: it writes
// the in-memory manifest, then removes the shards old listed. Rollback
// then removes the manifest instead of restoring old's.
func (t *Txn) Replace(old *shardfmt.Manifest) error {
	t.mu.Lock()
	t.replaced, t.wroteMan = true, true
	b, err := t.man.Encode()
	t.mu.Unlock()
	if err != nil {
		return err
	}
	if err := t.set.WriteFile(ManifestName, b); err != nil {
		return err
	}
	for _, s := range old.Shards {
		t.set.Remove(s.Path)
	}
	return nil
}

// WritePlan writes plan.json atomically. Rollback undoes it (puts back
// OldPlan, or removes the file), also when the write failed after its
// rename.
func (t *Txn) WritePlan(b []byte) error {
	t.mu.Lock()
	t.wrotePlan = true
	t.mu.Unlock()
	if err := t.set.WriteFile(PlanName, b); err != nil {
		return fmt.Errorf("writing plan copy: %w", err)
	}
	return nil
}

// CreateShard starts the (epoch, rank) shard at ShardPath through the set's
// root (shardfmt.CreateIn): its epoch directory and temporary file can
// never be created through a symbolic link.
func (t *Txn) CreateShard(epoch, rank int, opts shardfmt.WriterOptions) (*shardfmt.Writer, error) {
	name := ShardPath(epoch, rank)
	if err := t.set.checkParents(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return shardfmt.CreateIn(t.set.root, name, opts)
}

// Commit commits w (the shard of entry.Epoch, entry.Rank from CreateShard)
// and records it in the manifest: entry's Path, Size and Digest are set from
// w, the entry replaces any of the same (epoch, rank), and manifest.json is
// rewritten atomically before Commit returns, so the manifest on disk only
// ever lists committed shards. Commits that pile up behind one manifest
// fsync share the next. A shard renamed into place whose directory fsync
// failed is still one Rollback removes. It returns the committed entry.
func (t *Txn) Commit(w *shardfmt.Writer, entry shardfmt.ShardEntry) (shardfmt.ShardEntry, error) {
	name := ShardPath(entry.Epoch, entry.Rank)
	if err := w.Commit(); err != nil {
		if errors.Is(err, shardfmt.ErrNotDurable) {
			t.mu.Lock()
			t.committed = append(t.committed, name)
			t.mu.Unlock()
		}
		return entry, err
	}
	entry.Path, entry.Size, entry.Digest = name, w.Size(), w.Digest()
	t.mu.Lock()
	t.committed = append(t.committed, name)
	replaced := false
	for i, s := range t.man.Shards {
		if s.Epoch == entry.Epoch && s.Rank == entry.Rank {
			t.man.Shards[i], replaced = entry, true
		}
	}
	if !replaced {
		t.man.Shards = append(t.man.Shards, entry)
	}
	t.wroteMan = true
	t.manVersion++
	mine := t.manVersion
	t.mu.Unlock()
	return entry, t.syncManifest(mine)
}

// syncManifest makes sure manifest.json on disk holds version v of the
// in-memory manifest or a later one. Writers take turns (manWriteMu) and
// each writes the latest version, encoded under t.mu, so the fsyncs run
// outside the lock that guards the in-memory state and a writer whose shard
// a later manifest already lists writes nothing.
func (t *Txn) syncManifest(v int) error {
	t.manWriteMu.Lock()
	defer t.manWriteMu.Unlock()
	if t.manWritten >= v {
		return nil
	}
	t.mu.Lock()
	b, err := t.man.Encode()
	latest := t.manVersion
	t.mu.Unlock()
	if err != nil {
		return err
	}
	if err := t.set.WriteFile(ManifestName, b); err != nil {
		return fmt.Errorf("writing manifest: %w", err)
	}
	t.manWritten = latest
	return nil
}

// removeFile removes a name of the set; a variable so tests can observe the
// order of Rollback's steps.
var removeFile = func(s *Set, name string) error { return s.Remove(name) }

// Rollback undoes a failed run: first the manifest is put back atomically
// (the one from before the run, less any shard this run rewrote; or none
// when there was none or Replace had replaced it), and only then are the
// shards this run committed removed, and the plan copy put back. A kill
// between the two steps leaves shard files that no manifest lists (a rerun
// rewrites them; gc removes them), never a manifest listing a missing
// file. If the manifest cannot be put back, the shards it lists are kept
// and the error is returned. The staging directory is removed either way.
func (t *Txn) Rollback() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	defer t.set.RemoveAll(TempDirName)
	var err error
	switch {
	case t.oldManifest != nil && !t.replaced && len(t.committed) > 0:
		err = t.restoreManifest()
	case (t.oldManifest == nil || t.replaced) && t.wroteMan:
		if err = removeFile(t.set, ManifestName); errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("restoring %s: %w", t.set.Path(ManifestName), err)
	}
	for _, name := range t.committed {
		removeFile(t.set, name)
	}
	if t.wrotePlan {
		if t.oldPlan != nil && !t.replaced {
			t.set.WriteFile(PlanName, t.oldPlan)
		} else {
			removeFile(t.set, PlanName)
		}
	}
	return nil
}

// restoreManifest writes back the manifest found before the run: its bytes
// unchanged when this run rewrote none of the shards it lists, otherwise
// without those shards (their files are about to be removed).
func (t *Txn) restoreManifest() error {
	var old shardfmt.Manifest
	if err := json.Unmarshal(t.oldManifest, &old); err != nil {
		return t.set.WriteFile(ManifestName, t.oldManifest)
	}
	rewritten := map[string]bool{}
	for _, name := range t.committed {
		rewritten[name] = true
	}
	touched := false
	for _, s := range old.Shards {
		touched = touched || rewritten[s.Path]
	}
	if !touched {
		return t.set.WriteFile(ManifestName, t.oldManifest)
	}
	// Same inputs (otherwise nothing was committed before Replace): the
	// in-memory manifest is the old one plus this run's shards.
	m := *t.man
	m.Shards = []shardfmt.ShardEntry{}
	for _, s := range t.man.Shards {
		if !rewritten[s.Path] {
			m.Shards = append(m.Shards, s)
		}
	}
	return t.set.WriteManifest(&m)
}

// RemoveTemp removes the staging directory (TempDirName), as an interrupted
// run that keeps its committed shards does.
func (t *Txn) RemoveTemp() { t.set.RemoveAll(TempDirName) }

// End finishes the transaction: after a failed run (failed true) the epoch
// directories left empty are removed while the lock still keeps other runs
// out; then the lock is released, and a directory Begin created is removed
// if it is empty. End is safe to call once.
func (t *Txn) End(failed bool) error {
	if failed {
		if ents, err := fs.ReadDir(t.set.root.FS(), "."); err == nil {
			for _, e := range ents {
				if _, ok := ParseEpochDir(e.Name()); ok && e.IsDir() {
					t.set.root.Remove(e.Name()) // fails unless empty
				}
			}
		}
	}
	err := t.lock.Release()
	t.set.Close()
	if failed && t.created {
		os.Remove(t.set.dir) // fails unless empty
	}
	return err
}
