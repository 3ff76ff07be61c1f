package source

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/pqread"
)

// smallParquet returns a Parquet file of 3 int64 rows in one row group.
func smallParquet(t testing.TB) []byte {
	t.Helper()
	return pqfixture.New().Int64("id", 1, 2, 3).Bytes(t)
}

// rewriteFooter returns file with its FileMetaData decoded, edited and
// encoded again (thrift compact), the footer length updated.
func rewriteFooter(t testing.TB, file []byte, edit func(*format.FileMetaData)) []byte {
	t.Helper()
	n := int(binary.LittleEndian.Uint32(file[len(file)-8:]))
	var fm format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), file[len(file)-8-n:len(file)-8], &fm); err != nil {
		t.Fatal(err)
	}
	edit(&fm)
	meta, err := thrift.Marshal(new(thrift.CompactProtocol), &fm)
	if err != nil {
		t.Fatal(err)
	}
	out := append([]byte(nil), file[:len(file)-8-n]...)
	out = append(out, meta...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(meta)))
	return append(out, "PAR1"...)
}

// TestPlanRefusesFootersConvertRefuses pins the fault where prep plan
// accepted footers convert refuses (an unknown physical type, a column
// chunk outside the data region, a schema nested 1,000,000 deep): discovery
// runs pqread's footer validation, so both refuse each one, with ErrFooter
// naming the file relative to the root.
func TestPlanRefusesFootersConvertRefuses(t *testing.T) {
	good := smallParquet(t)
	deep := func(fm *format.FileMetaData) {
		const depth = 1_000_000
		leaf := fm.Schema[1]
		fm.Schema = fm.Schema[:1]
		fm.Schema[0].NumChildren = thrift.New[int32](1)
		for i := 0; i < depth; i++ {
			fm.Schema = append(fm.Schema, format.SchemaElement{Name: "g", RepetitionType: thrift.New(format.Optional), NumChildren: thrift.New[int32](1)})
		}
		fm.Schema = append(fm.Schema, leaf)
	}
	for _, tt := range []struct {
		name string
		edit func(*format.FileMetaData)
	}{
		{"physical type -7", func(fm *format.FileMetaData) {
			fm.Schema[1].Type = thrift.New(format.Type(-7))
			fm.RowGroups[0].Columns[0].MetaData.Type = format.Type(-7)
		}},
		{"column chunk outside the data region", func(fm *format.FileMetaData) {
			fm.RowGroups[0].Columns[0].MetaData.DataPageOffset = 1 << 40
			fm.RowGroups[0].Columns[0].MetaData.DictionaryPageOffset = 0
		}},
		{"schema nested 1,000,000 deep", deep},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "bad.parquet")
			if err := os.WriteFile(path, rewriteFooter(t, good, tt.edit), 0o644); err != nil {
				t.Fatal(err)
			}
			_, perr := pqread.Open(path, pqread.Limits{})
			if perr == nil {
				t.Fatal("test premise: pqread (convert) accepts the file")
			}
			_, err := Discover(context.Background(), []string{dir})
			var se *Error
			if !errors.Is(err, ErrFooter) || !errors.As(err, &se) || se.File != "bad.parquet" || strings.Contains(err.Error(), dir) {
				t.Fatalf("Discover: %v; want ErrFooter naming bad.parquet relative to the root", err)
			}
		})
	}
	// The unedited file passes both.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "good.parquet"), rewriteFooter(t, good, func(*format.FileMetaData) {}), 0o644); err != nil {
		t.Fatal(err)
	}
	if src, err := Discover(context.Background(), []string{dir}); err != nil || src.NumSamples() != 3 {
		t.Fatalf("good file: %v", err)
	}
}

// TestRowsBeyondWhatTheFileCanHold pins the fault where a footer claiming
// 2^62 rows (or 10^12 in a small file) was planned: a file of S bytes holds
// at most floor(S/21) * (2^31-1) + 2^27-1 rows, and a file with rows needs a column.
func TestRowsBeyondWhatTheFileCanHold(t *testing.T) {
	good := smallParquet(t)
	for _, rows := range []int64{1 << 62, 1_000_000_000_000} {
		file := rewriteFooter(t, good, func(fm *format.FileMetaData) {
			fm.NumRows = rows
			fm.RowGroups[0].NumRows = rows
		})
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "huge.parquet"), file, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Discover(context.Background(), []string{dir})
		if !errors.Is(err, ErrFooter) || !strings.Contains(err.Error(), "more than a file of") {
			t.Errorf("%d rows in %d bytes: %v", rows, len(file), err)
		}
	}
	for _, tt := range []struct{ size, want int64 }{
		{0, 0}, {16, 0}, {17, 1<<27 - 1}, {20, 1<<27 - 1}, {21, 2147483647}, {37, 2147483647}, {38, 2147483647 + 1<<27 - 1},
		{42, 2 * 2147483647}, {1 << 62, 9223372036854775807},
	} {
		if got := MaxRows(tt.size); got != tt.want {
			t.Errorf("MaxRows(%d) = %d, want %d", tt.size, got, tt.want)
		}
	}
}

// hostileFooter returns an uncompressed file of three INT64 columns and
// k rows whose footer claims rows rows in its one row group, and column
// a's chunk length (total_compressed_size).
func hostileFooter(t *testing.T, k int, rows int64) (file []byte, chunk int64) {
	a, b, c := make([]int64, k), make([]int64, k), make([]int64, k)
	for i := range a {
		v := int64(i) * 2654435761
		a[i], b[i], c[i] = v, v^0x5555, v*3
	}
	plain := pqfixture.New().Int64("a", a...).Int64("b", b...).Int64("c", c...).Codec(&parquet.Uncompressed).Bytes(t)
	file = rewriteFooter(t, plain, func(fm *format.FileMetaData) {
		fm.NumRows = rows
		fm.RowGroups[0].NumRows = rows
		chunk = fm.RowGroups[0].Columns[0].MetaData.TotalCompressedSize
	})
	return file, chunk
}

// discoverOne writes file as dir/hostile.parquet and discovers dir.
func discoverOne(t *testing.T, file []byte) error {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hostile.parquet"), file, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Discover(context.Background(), []string{dir})
	var se *Error
	if !errors.Is(err, ErrFooter) || !errors.As(err, &se) || se.File != "hostile.parquet" {
		t.Fatalf("Discover: %v; want ErrFooter naming hostile.parquet", err)
	}
	return err
}

// TestHostileRowCountRefused pins the fault where a file of about 8 KB
// whose footer claims 10^12 rows was planned (for hours, hashing ids of
// rows that do not exist): at 17 bytes a page over the whole file the
// claim fitted. A page of 2^27 values or more takes at least 21 bytes, and
// each column chunk must hold its row group's rows, so both the 8 KB file
// and a 12 KB one (which passes the whole-file bound) are refused at
// discovery, naming the file, and the second the row group and the chunk.
func TestHostileRowCountRefused(t *testing.T) {
	const rows = 1_000_000_000_000
	file, _ := hostileFooter(t, 300, rows)
	if int64(len(file))/17*(1<<31-1) < rows || len(file) > 8192 {
		t.Fatalf("fixture of %d bytes: want one that 17 bytes a page accepts, at most 8 KiB", len(file))
	}
	err := discoverOne(t, file)
	if want := fmt.Sprintf("footer claims %d rows, more than a file of %d bytes can hold (%d)", rows, len(file), MaxRows(int64(len(file)))); !strings.Contains(err.Error(), want) {
		t.Errorf("8 KB file: %v\nwant it to contain %s", err, want)
	}

	file, n := hostileFooter(t, 480, rows)
	if MaxRows(int64(len(file))) < rows {
		t.Fatalf("fixture of %d bytes: want one the whole-file bound accepts", len(file))
	}
	err = discoverOne(t, file)
	// n bytes hold floor(n/21) full pages of 2^31-1 values, and one of
	// 2^27-1 in 17 to 20 bytes left over.
	most := n / 21 * (1<<31 - 1)
	if n%21 >= 17 {
		most += 1<<27 - 1
	}
	if want := fmt.Sprintf("row group 0 claims %d rows, more than its column chunk a of %d bytes can hold (%d)", rows, n, most); !strings.Contains(err.Error(), want) {
		t.Errorf("12 KB file: %v\nwant it to contain %s", err, want)
	}
}

// TestUnreadableSourceIsNotChanged pins the fault where a source file that
// could not be read (permission denied) was reported as "source changed
// since the plan was made": the real cause is reported, and a missing file
// is a ChangedError that suggests --source-root.
func TestUnreadableSourceIsNotChanged(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "part-0.parquet")
	if err := os.WriteFile(path, smallParquet(t), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := Discover(context.Background(), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	local, _ := NewLocal(dir)
	stores := map[string]Store{"denying store": denyStore{local}}
	if os.Geteuid() != 0 { // root reads files whatever their mode
		if err := os.Chmod(path, 0); err != nil {
			t.Fatal(err)
		}
		stores["mode 0"] = local
	}
	for sname, st := range stores {
		for name, err := range map[string]error{
			"Open":  openErr(st, src.Files[0]),
			"Check": Check(context.Background(), st, src.Files[0]),
		} {
			if errors.Is(err, ErrSourceChanged) || !errors.Is(err, fs.ErrPermission) || err.Error() != "part-0.parquet: open: permission denied" {
				t.Errorf("%s, %s: %v; want the permission error, not a change", sname, name, err)
			}
		}
	}
}

// denyStore is a Local store whose files cannot be opened, as a file of
// mode 0 is for a user other than root.
type denyStore struct{ *Local }

func (s denyStore) Open(ctx context.Context, name string) (Object, error) {
	return nil, &Error{File: name, Err: fmt.Errorf("open: %w", fs.ErrPermission)}
}

func openErr(st Store, m plan.SourceFile) error {
	f, err := Open(context.Background(), st, m, pqread.Limits{})
	if err == nil {
		f.Close()
	}
	return err
}

// TestChangedErrors checks each difference Open and Check report, with
// what differs, and the --source-root hint only for a missing file.
func TestChangedErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "part-0.parquet")
	good := smallParquet(t)
	if err := os.WriteFile(path, good, 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := Discover(context.Background(), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	m := src.Files[0]
	st, _ := NewLocal(dir)
	if err := Check(context.Background(), st, m); err != nil {
		t.Fatal(err)
	}
	if f, err := Open(context.Background(), st, m, pqread.Limits{}); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	check := func(what, want string) {
		t.Helper()
		for _, err := range []error{openErr(st, m), Check(context.Background(), st, m)} {
			var ce *ChangedError
			if !errors.As(err, &ce) || !errors.Is(err, ErrSourceChanged) || ce.What != what || err.Error() != want {
				t.Errorf("got %v, want %q", err, want)
			}
		}
	}
	os.WriteFile(path, good[:len(good)-1], 0o644)
	check("size", "part-0.parquet: source changed since the plan was made: size "+itoa(len(good)-1)+", plan has "+itoa(len(good)))
	other := append([]byte(nil), good...)
	other[len(other)-9] ^= 0xff // last byte of the footer
	os.WriteFile(path, other, 0o644)
	var ce *ChangedError
	if err := Check(context.Background(), st, m); !errors.As(err, &ce) || ce.What != "footer sha256" || ce.Expected != m.FooterSHA256 {
		t.Errorf("footer edit: %v", err)
	}
	os.Remove(path)
	check("file", "part-0.parquet: source changed since the plan was made: file is missing (source root "+dir+"; if the data moved, give its directory with --source-root)")
}

func itoa(n int) string { return strconv.Itoa(n) }
