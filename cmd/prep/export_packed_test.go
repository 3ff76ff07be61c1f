package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prepml/prep/internal/duckdbtest"
	"github.com/prepml/prep/internal/npy"
)

// readNpyInts reads an exported '<i4' or '<i8' .npy file as int64 values
// and its shape.
func readNpyInts(t *testing.T, path string) ([]int64, []int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := npy.ReadHeader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	data := b[h.DataOffset:]
	var out []int64
	switch h.Descr {
	case "<i4":
		for i := 0; i+4 <= len(data); i += 4 {
			out = append(out, int64(int32(binary.LittleEndian.Uint32(data[i:]))))
		}
	case "<i8":
		for i := 0; i+8 <= len(data); i += 8 {
			out = append(out, int64(binary.LittleEndian.Uint64(data[i:])))
		}
	default:
		t.Fatalf("%s: descr %s", path, h.Descr)
	}
	return out, h.Shape
}

// TestExportPackedRowsMatchDuckDB: prep plan --pack, convert, then export
// of every batch of every rank; the tokens of every exported packed row
// equal the concatenation of the document pieces export names
// (documents.npy: sample id, offset, length), read from DuckDB, each
// followed by the EOD where the piece reaches the document's end, then
// the pad id; over the epoch, every token of every document is exported
// exactly once in a non-pad row.
func TestExportPackedRowsMatchDuckDB(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	q := func(name string) string { return duckdbtest.Quote(filepath.Join(src, name)) }
	duckdbtest.Query(t, fmt.Sprintf(`
CREATE TABLE t AS SELECT i AS id,
  CASE WHEN i %% 11 = 4 THEN NULL ELSE list_transform(range((i * 104729) %% 400), x -> (x * 7 + i * 1000)::INT) END AS tokens
FROM range(200) r(i);
COPY (SELECT * FROM t WHERE id < 80 ORDER BY id) TO %s (FORMAT parquet, ROW_GROUP_SIZE 50);
COPY (SELECT * FROM t WHERE id >= 80 ORDER BY id) TO %s (FORMAT parquet, ROW_GROUP_SIZE 70);
SELECT 1`, q("a.parquet"), q("b.parquet")))
	res := duckdbtest.Query(t, fmt.Sprintf(`SELECT tokens FROM read_parquet(%s, filename = true, file_row_number = true) ORDER BY filename, file_row_number`, duckdbtest.Quote(filepath.Join(src, "*.parquet"))))
	docs := make([][]int64, len(res.Rows))
	for i, r := range res.Rows {
		if r[0] != nil {
			for _, v := range duckdbtest.List(t, r[0]) {
				docs[i] = append(docs[i], duckdbtest.Int64(t, v))
			}
		}
	}
	planFile, out := filepath.Join(dir, "plan.json"), filepath.Join(dir, "out")
	const L, eod, pad = 256, -2, -9
	if code, _, errs := runCLI("plan", "--source", src, "--global-batch", "4", "--world-size", "2", "--seed", "5", "--remainder", "pad",
		"--pack", fmt.Sprintf("tokens:%d", L), "--pack-eod", fmt.Sprint(eod), "--pack-pad", fmt.Sprint(pad), "--pack-window", "32", "-o", planFile); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
	if code, _, errs := runCLI("convert", "--plan", planFile, "--tensor", "tokens=tokens:I32", "-o", out); code != 0 {
		t.Fatalf("convert: exit %d: %s", code, errs)
	}
	var meta struct {
		Derived struct {
			Steps int `json:"steps_per_epoch"`
		} `json:"derived"`
	}
	b, _ := os.ReadFile(planFile)
	if err := json.Unmarshal(b, &meta); err != nil || meta.Derived.Steps == 0 {
		t.Fatalf("plan: %v %+v", err, meta)
	}
	seen := make([][]int, len(docs))
	for d := range docs {
		seen[d] = make([]int, len(docs[d])+1)
	}
	for rank := 0; rank < 2; rank++ {
		for step := 0; step < meta.Derived.Steps; step++ {
			ex := filepath.Join(dir, fmt.Sprintf("ex-%d-%d", rank, step))
			code, stdout, errs := runCLI("export", out, "--epoch", "0", "--rank", fmt.Sprint(rank), "--step", fmt.Sprint(step), "-o", ex)
			if code != 0 || !strings.Contains(stdout, "packed row ") {
				t.Fatalf("export: exit %d: %s%s", code, stdout, errs)
			}
			toks, shape := readNpyInts(t, filepath.Join(ex, "tokens.npy"))
			pieces, _ := readNpyInts(t, filepath.Join(ex, "documents.npy"))
			offs, _ := readNpyInts(t, filepath.Join(ex, "documents_offsets.npy"))
			mask, _ := os.ReadFile(filepath.Join(ex, "pad_mask.npy"))
			count := shape[0]
			for i := 0; i < count; i++ {
				var want []int64
				isPad := mask[len(mask)-count+i] == 1
				for j := offs[i]; j < offs[i+1]; j++ {
					d, o, n := pieces[3*j], pieces[3*j+1], pieces[3*j+2]
					stream := append(append([]int64(nil), docs[d]...), eod)
					want = append(want, stream[o:o+n]...)
					for x := o; x < o+n && !isPad; x++ {
						seen[d][x]++
					}
				}
				for len(want) < L {
					want = append(want, pad)
				}
				if got := toks[i*L : (i+1)*L]; fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("rank %d step %d row %d: tokens %v, want %v", rank, step, i, got, want)
				}
			}
		}
	}
	for d := range docs {
		for x, n := range seen[d] {
			if want := min(1, len(docs[d])); n != want {
				t.Fatalf("document %d token %d exported %d times, want %d", d, x, n, want)
			}
		}
	}
}
