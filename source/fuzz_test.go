package source

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/prepml/prep/pqread"
)

// FuzzReadInfo fuzzes the footer validation prep plan runs (ReadInfo, as
// Discover calls it) with whole files, seeded from the hostile footers
// that plan once accepted and convert refused (an unknown physical type, a
// column chunk outside the data region, a deeply nested schema, row counts
// no file can hold) and the corrupt files of field case B19. Whatever the
// bytes, ReadInfo must not panic; a failure is an *Error naming the file
// relative to the root; and a file plan accepts is one convert's Open
// accepts against the record plan made of it, with the same row groups.
func FuzzReadInfo(f *testing.F) {
	good := smallParquet(f)
	f.Add(good)
	for _, edit := range []func(*format.FileMetaData){
		func(fm *format.FileMetaData) {
			fm.Schema[1].Type = thrift.New(format.Type(-7))
			fm.RowGroups[0].Columns[0].MetaData.Type = format.Type(-7)
		},
		func(fm *format.FileMetaData) {
			fm.RowGroups[0].Columns[0].MetaData.DataPageOffset = 1 << 40
			fm.RowGroups[0].Columns[0].MetaData.DictionaryPageOffset = 0
		},
		func(fm *format.FileMetaData) {
			leaf := fm.Schema[1]
			fm.Schema = fm.Schema[:1]
			fm.Schema[0].NumChildren = thrift.New[int32](1)
			for i := 0; i < 100; i++ {
				fm.Schema = append(fm.Schema, format.SchemaElement{Name: "g", RepetitionType: thrift.New(format.Optional), NumChildren: thrift.New[int32](1)})
			}
			fm.Schema = append(fm.Schema, leaf)
		},
		func(fm *format.FileMetaData) { fm.NumRows, fm.RowGroups[0].NumRows = 1<<62, 1<<62 },
		func(fm *format.FileMetaData) { fm.RowGroups[0].NumRows = -1 },
	} {
		f.Add(rewriteFooter(f, good, edit))
	}
	cases, _ := filepath.Glob(filepath.Join("..", "testdata", "cases", "B19-corrupt-files", "*.parquet"))
	for _, p := range cases {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	dir := f.TempDir()
	st, err := NewLocal(dir)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, file []byte) {
		const name = "f.parquet"
		if err := os.WriteFile(filepath.Join(dir, name), file, 0o644); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		m, err := ReadInfo(ctx, st, name)
		if err != nil {
			var se *Error
			if !errors.As(err, &se) || se.File != name {
				t.Fatalf("ReadInfo error %v (%T) does not name %s", err, err, name)
			}
			return
		}
		if m.Size != int64(len(file)) || m.Rows() > MaxRows(m.Size) {
			t.Fatalf("record %+v for a file of %d bytes", m, len(file))
		}
		sf, err := Open(ctx, st, m, pqread.Limits{})
		if err != nil {
			t.Fatalf("plan accepted the file, convert's Open refuses it: %v", err)
		}
		defer sf.Close()
		if got := sf.Parquet.RowGroups(); len(got) != len(m.RowGroups) {
			t.Fatalf("convert sees row groups %v, plan recorded %v", got, m.RowGroups)
		}
	})
}
