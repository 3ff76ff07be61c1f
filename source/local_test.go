package source

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestObjectChangedWhileRead: a local Object whose file is rewritten
// after it was opened fails its next read with a ChangedError (identity),
// never returning bytes of the new version.
func TestObjectChangedWhileRead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.parquet")
	good := smallParquet(t)
	os.WriteFile(path, good, 0o644)
	st, _ := NewLocal(dir)
	obj, err := st.Open(context.Background(), "a.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	b := make([]byte, 4)
	if _, err := obj.ReadAt(b, 0); err != nil || string(b) != "PAR1" {
		t.Fatalf("read %q, %v", b, err)
	}
	if obj.Name() != "a.parquet" || obj.Size() != int64(len(good)) || !strings.HasPrefix(obj.Identity(), "mtime=") {
		t.Errorf("name %q size %d identity %q", obj.Name(), obj.Size(), obj.Identity())
	}
	os.WriteFile(path, good[:20], 0o644) // truncated in place
	_, err = obj.ReadAt(b, 0)
	var ce *ChangedError
	if !errors.As(err, &ce) || ce.What != "identity" || ce.File != "a.parquet" {
		t.Fatalf("after truncation: %v", err)
	}
	if _, err := st.Open(context.Background(), "../a.parquet"); err == nil {
		t.Error("a name outside the root was opened")
	}
}
