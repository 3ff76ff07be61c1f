package pages

import (
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/format"

	"github.com/prepml/prep/bench/internal/gen"
)

// TestReadDecompresses walks a generated file's pages and checks that each
// compressed region decompresses to exactly the size its header states.
func TestReadDecompresses(t *testing.T) {
	zd, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer zd.Close()
	for _, v := range []gen.Variant{{Name: "s", Codec: "snappy"}, {Name: "z", Optional: true, Codec: "zstd"}} {
		p := filepath.Join(t.TempDir(), v.Name+".parquet")
		if err := gen.Write(p, v, 0, 20000); err != nil {
			t.Fatal(err)
		}
		ps, err := Read(p)
		if err != nil {
			t.Fatal(err)
		}
		in, err := Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if in.Rows != 20000 || len(in.Columns) != 11 {
			t.Fatalf("%s: %d rows, %d columns; want 20000, 11", v.Name, in.Rows, len(in.Columns))
		}
		var unc int64
		for i, pg := range ps {
			var out []byte
			switch pg.Codec {
			case format.Snappy:
				out, err = snappy.Decode(nil, pg.Compressed)
			case format.Zstd:
				out, err = zd.DecodeAll(pg.Compressed, nil)
			default:
				t.Fatalf("%s: page %d codec %v", v.Name, i, pg.Codec)
			}
			if err != nil || len(out) != pg.Uncompressed {
				t.Fatalf("%s: page %d: %d bytes (err %v), header says %d", v.Name, i, len(out), err, pg.Uncompressed)
			}
			unc += int64(len(out))
		}
		// Page payloads are the column chunks minus page headers and V2 levels.
		if len(ps) < 11 || unc <= 0 || unc > in.UncompressedBytes {
			t.Fatalf("%s: %d pages, %d payload bytes, footer says %d", v.Name, len(ps), unc, in.UncompressedBytes)
		}
	}
}
