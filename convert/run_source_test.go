package convert

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/pqread"
	"github.com/prepml/prep/source"
)

// TestErrorsNameFilesRelativeToTheRoot pins the fault where footer and
// decode errors named files by absolute path while null, range and schema
// errors gave base names: every error names the file as the plan records
// it, relative to the source root ("b/x.parquet", never the root's path).
func TestErrorsNameFilesRelativeToTheRoot(t *testing.T) {
	root := t.TempDir()
	cases := filepath.Join("..", "testdata", "cases", "B19-corrupt-files")
	for from, to := range map[string]string{"good.parquet": "a/good.parquet", "bad_page_header_rg1_x.parquet": "b/x.parquet"} {
		b, err := os.ReadFile(filepath.Join(cases, from))
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Join(root, filepath.Dir(to)), 0o755)
		if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(to)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src, err := source.Discover(context.Background(), []string{root})
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.New(src, plan.Config{Epochs: 1, GlobalBatch: 10, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderDrop})
	if err != nil {
		t.Fatal(err)
	}
	run := func(spec *feature.Spec) error {
		_, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "out")})
		return err
	}
	// A decode error (pqread's): the damaged page header in row group 1.
	err = run(&feature.Spec{Tensors: []feature.TensorSpec{{Name: "x", Column: "x", DType: "F32"}}})
	var pe *pqread.Error
	if !errors.As(err, &pe) || pe.File != "b/x.parquet" || !strings.HasPrefix(err.Error(), "b/x.parquet: ") || strings.Contains(err.Error(), root) {
		t.Errorf("decode error: %v", err)
	}
	// A schema error (convert's): a column no file has.
	err = run(&feature.Spec{Tensors: []feature.TensorSpec{{Name: "n", Column: "no_such_column", DType: "F32"}}})
	if !errors.Is(err, feature.ErrSchema) || !strings.HasPrefix(err.Error(), "a/good.parquet: ") || strings.Contains(err.Error(), root) {
		t.Errorf("schema error: %v", err)
	}
	// A footer error (source's): the file damaged after planning.
	os.WriteFile(filepath.Join(root, "a", "good.parquet"), []byte("PAR1 not a parquet file PAR1"), 0o644)
	err = run(&feature.Spec{Tensors: []feature.TensorSpec{{Name: "x", Column: "x", DType: "F32"}}})
	if !errors.Is(err, feature.ErrSourceChanged) || !strings.HasPrefix(err.Error(), "a/good.parquet: ") || strings.Contains(err.Error(), root) {
		t.Errorf("changed file: %v", err)
	}
}

// TestUnreadableSourceIsNotReportedChanged pins the fault where a source
// that could not be read (permission denied) failed convert with "source
// changed since the plan was made": the error gives the real cause.
func TestUnreadableSourceIsNotReportedChanged(t *testing.T) {
	p := featuretest.CaseSource(t, "B19-corrupt-files", "good.parquet")
	local, err := source.NewLocal(p.Source.Root)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), Options{Plan: p, Source: featuretest.DenyStore{Local: local}, Output: filepath.Join(t.TempDir(), "out"),
		Spec: &feature.Spec{Tensors: []feature.TensorSpec{{Name: "x", Column: "x", DType: "F32"}}}})
	if errors.Is(err, feature.ErrSourceChanged) || !errors.Is(err, fs.ErrPermission) || err.Error() != "good.parquet: open: permission denied" {
		t.Errorf("got %v, want the permission error naming good.parquet", err)
	}
}
