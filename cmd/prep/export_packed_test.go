package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prepml/prep/internal/duckdbtest"
	"github.com/prepml/prep/internal/npy"
)

// readNpyInts reads an exported '<i2', '<i4' or '<i8' .npy file as int64
// values (a '<f8' file as the values' float64 bits) and its shape.
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
	case "<i2":
		for i := 0; i+2 <= len(data); i += 2 {
			out = append(out, int64(int16(binary.LittleEndian.Uint16(data[i:]))))
		}
	case "<f8": // the float64 bits
		for i := 0; i+8 <= len(data); i += 8 {
			out = append(out, int64(binary.LittleEndian.Uint64(data[i:])))
		}
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

// TestExportPackedMixtureMatchesDuckDB: prep plan --sources with a
// packing block (web: 100 rows, filter lang = 'en' selecting the 66 with
// id % 3 != 0; code: 30 rows; weights 1 and 1, epoch_samples 100: 50
// documents each, by hand), 2 epochs, convert, then export of every batch
// of both epochs on both ranks, for both scopes. Every exported packed
// row's tokens equal the concatenation of the named pieces read from
// DuckDB (EOD, then pad); documents_sources.npy names each piece's
// source; with per_source a row holds one source and sample_sources.npy
// names it, with across it is -1. Each epoch packs its own draws (PLAN.md
// §12.1), token by token: in epoch 0, 50 distinct selected web documents
// once each and no unselected one, the code documents 20 of them twice
// and 10 once (50 draws of 30 rows); over both epochs web's 100 draws
// are its 66 rows' first pass and 34 of its second (32 documents once,
// 34 twice), code's 100 draws 3 passes and 10 (20 three times, 10 four
// times); verify --deep of the 2 epochs passes.
func TestExportPackedMixtureMatchesDuckDB(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	for _, d := range []string{"web", "code"} {
		if err := os.MkdirAll(filepath.Join(src, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	q := func(name string) string { return duckdbtest.Quote(filepath.Join(src, name)) }
	duckdbtest.Query(t, fmt.Sprintf(`
CREATE TABLE w AS SELECT i AS id, CASE WHEN i %% 3 = 0 THEN 'de' ELSE 'en' END AS lang,
  list_transform(range(1 + (i * 7919) %% 150), x -> (x * 3 + i * 1000)::INT) AS tokens FROM range(100) r(i);
CREATE TABLE c AS SELECT i AS id, 'en' AS lang,
  list_transform(range(1 + (i * 104729) %% 90), x -> (x * 5 + 500000 + i * 1000)::INT) AS tokens FROM range(30) r(i);
COPY (SELECT * FROM w ORDER BY id) TO %s (FORMAT parquet, ROW_GROUP_SIZE 40);
COPY (SELECT * FROM c ORDER BY id) TO %s (FORMAT parquet, ROW_GROUP_SIZE 16);
SELECT 1`, q("web/a.parquet"), q("code/b.parquet")))
	// Global row ids follow the files' paths: code/b.parquet (ids 0-29),
	// then web/a.parquet (ids 30-129).
	res := duckdbtest.Query(t, fmt.Sprintf(`SELECT tokens, lang FROM read_parquet([%s, %s], filename = true, file_row_number = true) ORDER BY filename, file_row_number`,
		q("code/b.parquet"), q("web/a.parquet")))
	docs := make([][]int64, len(res.Rows))
	selected := make([]bool, len(res.Rows))
	for i, r := range res.Rows {
		for _, v := range duckdbtest.List(t, r[0]) {
			docs[i] = append(docs[i], duckdbtest.Int64(t, v))
		}
		selected[i] = i < 30 || r[1] == "en"
	}
	const L, eod, pad = 128, -2, -9
	for _, scope := range []string{"across", "per_source"} {
		t.Run(scope, func(t *testing.T) {
			sdir := filepath.Join(dir, scope)
			sources := filepath.Join(sdir, "sources.yaml")
			if err := os.MkdirAll(sdir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(sources, []byte(fmt.Sprintf(`sources:
  - name: web
    path: %s
    weight: 1
    filter: "lang = 'en'"
  - name: code
    path: %s
    weight: 1
epoch_samples: 100
packing:
  column: tokens
  length: %d
  eod: %d
  pad: %d
  window: 16
  scope: %s
`, filepath.Join(src, "web"), filepath.Join(src, "code"), L, eod, pad, scope)), 0o644); err != nil {
				t.Fatal(err)
			}
			planFile, out := filepath.Join(sdir, "plan.json"), filepath.Join(sdir, "out")
			if code, _, errs := runCLI("plan", "--sources", sources, "--global-batch", "4", "--world-size", "2", "--seed", "3", "--remainder", "pad", "--epochs", "2", "-o", planFile); code != 0 {
				t.Fatalf("plan: exit %d: %s", code, errs)
			}
			if code, _, errs := runCLI("convert", "--plan", planFile, "--tensor", "tokens=tokens:I32", "-o", out); code != 0 {
				t.Fatalf("convert: exit %d: %s", code, errs)
			}
			var meta struct {
				Derived struct {
					Steps int `json:"steps_per_epoch"`
				} `json:"derived"`
				Mixture struct {
					Sources []struct {
						Samples int `json:"samples_per_epoch"`
					} `json:"sources"`
				} `json:"mixture"`
			}
			b, _ := os.ReadFile(planFile)
			if err := json.Unmarshal(b, &meta); err != nil || meta.Derived.Steps == 0 || len(meta.Mixture.Sources) != 2 ||
				meta.Mixture.Sources[0].Samples != 50 || meta.Mixture.Sources[1].Samples != 50 {
				t.Fatalf("plan: %v %+v", err, meta)
			}
			srcOf := func(d int64) int64 { // index in the sources file: web 0, code 1
				if d < 30 {
					return 1
				}
				return 0
			}
			seen := make([][]int, len(docs)) // over both epochs
			for d := range docs {
				seen[d] = make([]int, len(docs[d])+1)
			}
			var epoch0 [][]int
			for epoch := 0; epoch < 2; epoch++ {
				for rank := 0; rank < 2; rank++ {
					for step := 0; step < meta.Derived.Steps; step++ {
						ex := filepath.Join(sdir, fmt.Sprintf("ex-%d-%d-%d", epoch, rank, step))
						code, stdout, errs := runCLI("export", out, "--epoch", fmt.Sprint(epoch), "--rank", fmt.Sprint(rank), "--step", fmt.Sprint(step), "-o", ex)
						if code != 0 || !strings.Contains(stdout, "packed row ") {
							t.Fatalf("export: exit %d: %s%s", code, stdout, errs)
						}
						toks, shape := readNpyInts(t, filepath.Join(ex, "tokens.npy"))
						pieces, _ := readNpyInts(t, filepath.Join(ex, "documents.npy"))
						offs, _ := readNpyInts(t, filepath.Join(ex, "documents_offsets.npy"))
						psrc, _ := readNpyInts(t, filepath.Join(ex, "documents_sources.npy"))
						ssrc, _ := readNpyInts(t, filepath.Join(ex, "sample_sources.npy"))
						mask, _ := os.ReadFile(filepath.Join(ex, "pad_mask.npy"))
						count := shape[0]
						for i := 0; i < count; i++ {
							var want []int64
							isPad := mask[len(mask)-count+i] == 1
							rowSrc := int64(-2)
							for j := offs[i]; j < offs[i+1]; j++ {
								d, o, n := pieces[3*j], pieces[3*j+1], pieces[3*j+2]
								if !selected[d] {
									t.Fatalf("row %d: document %d is not selected by the filter", i, d)
								}
								if psrc[j] != srcOf(d) {
									t.Fatalf("row %d: document %d named source %d, want %d", i, d, psrc[j], srcOf(d))
								}
								if rowSrc == -2 {
									rowSrc = srcOf(d)
								} else if rowSrc != srcOf(d) {
									rowSrc = -1
								}
								stream := append(append([]int64(nil), docs[d]...), eod)
								want = append(want, stream[o:o+n]...)
								for x := o; x < o+n && !isPad; x++ {
									seen[d][x]++
								}
							}
							if scope == "per_source" && (rowSrc < 0 || ssrc[i] != rowSrc) {
								t.Fatalf("per_source row %d: documents of source %d, sample source %d", i, rowSrc, ssrc[i])
							}
							if scope == "across" && ssrc[i] != -1 {
								t.Fatalf("across row %d: sample source %d, want -1", i, ssrc[i])
							}
							for len(want) < L {
								want = append(want, pad)
							}
							if got := toks[i*L : (i+1)*L]; fmt.Sprint(got) != fmt.Sprint(want) {
								t.Fatalf("epoch %d rank %d step %d row %d: tokens %v, want %v", epoch, rank, step, i, got, want)
							}
						}
					}
				}
				if epoch == 0 {
					for d := range seen {
						epoch0 = append(epoch0, slices.Clone(seen[d]))
					}
				}
			}
			// times[d]: how many times document d is exported, checked
			// the same for each of its tokens.
			times := func(seen [][]int) (web, code map[int]int) {
				web, code = map[int]int{}, map[int]int{}
				for d := range docs {
					k := seen[d][0]
					for x, n := range seen[d] {
						if n != k {
							t.Fatalf("document %d token %d exported %d times, token 0 %d times", d, x, n, k)
						}
					}
					switch {
					case d < 30:
						code[k]++
					case !selected[d] && k > 0:
						t.Fatalf("unselected web document %d exported", d)
					case selected[d]:
						web[k]++
					}
				}
				return web, code
			}
			web, code := times(epoch0)
			if fmt.Sprint(web) != fmt.Sprint(map[int]int{0: 16, 1: 50}) || fmt.Sprint(code) != fmt.Sprint(map[int]int{1: 10, 2: 20}) {
				t.Fatalf("epoch 0: web documents by times exported %v (want 50 once, 16 not), code %v (want 20 twice, 10 once)", web, code)
			}
			web, code = times(seen)
			if fmt.Sprint(web) != fmt.Sprint(map[int]int{1: 32, 2: 34}) || fmt.Sprint(code) != fmt.Sprint(map[int]int{3: 20, 4: 10}) {
				t.Fatalf("epochs 0 and 1: web documents by times exported %v (want 32 once, 34 twice), code %v (want 20 three times, 10 four times)", web, code)
			}
			if code, stdout, errs := runCLI("verify", out, "--deep"); code != 0 {
				t.Fatalf("verify --deep: exit %d: %s%s", code, stdout, errs)
			}
			// plan show names a per_source row's source, and "*" for a row
			// of scope across.
			rc, stdout, errs := runCLI("plan", "show", planFile, "--epoch", "1", "--rank", "1", "--limit", "2")
			if rc != 0 {
				t.Fatalf("plan show: exit %d: %s", code, errs)
			}
			for _, f := range strings.Fields(stdout) {
				if !strings.Contains(f, "@") {
					continue
				}
				_, name, _ := strings.Cut(f, "@") // then '*' for a pad sample
				if scope == "across" && name != "*" && name != "**" ||
					scope == "per_source" && strings.TrimSuffix(name, "*") != "web" && strings.TrimSuffix(name, "*") != "code" {
					t.Fatalf("plan show, scope %s: %q in\n%s", scope, f, stdout)
				}
			}
		})
	}
}

// TestExportPackedExtrasMatchDuckDB: a packed convert with per-document
// columns (SPEC.md §2.9.1) — src (SMALLINT) per token as I16 with pad -1,
// q (DOUBLE) per document as F64, opt (INT, null every 4th row) per token
// with nulls.fill -5 and pad 0 — then export of every batch: in every
// packed row, src and opt repeat each piece's document value (read from
// DuckDB) over the piece's tokens, then the pad value; q holds one value
// per piece in order, as many as cu_seqlens says; verify --deep passes.
func TestExportPackedExtrasMatchDuckDB(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	file := duckdbtest.Quote(filepath.Join(src, "a.parquet"))
	duckdbtest.Query(t, fmt.Sprintf(`
COPY (SELECT i AS id, list_transform(range(1 + (i * 7919) %% 90), x -> (x + i * 1000)::INT) AS tokens,
  (i %% 7 - 3)::SMALLINT AS src, i / 16.0 + 0.001 AS q, CASE WHEN i %% 4 = 1 THEN NULL ELSE (i * 3)::INT END AS opt
  FROM range(150) r(i) ORDER BY i) TO %s (FORMAT parquet, ROW_GROUP_SIZE 64);
SELECT 1`, file))
	res := duckdbtest.Query(t, fmt.Sprintf(`SELECT len(tokens), src, q, opt FROM read_parquet(%s, file_row_number = true) ORDER BY file_row_number`, file))
	type doc struct {
		n, src, opt int64
		q           float64
	}
	docs := make([]doc, len(res.Rows))
	for i, r := range res.Rows {
		docs[i] = doc{n: duckdbtest.Int64(t, r[0]), src: duckdbtest.Int64(t, r[1]), q: duckdbtest.Float64(t, r[2]), opt: -5}
		if r[3] != nil {
			docs[i].opt = duckdbtest.Int64(t, r[3])
		}
	}
	specFile := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(specFile, []byte(`tensors:
  - {name: tokens, column: tokens, dtype: I32}
  - {name: src, column: src, dtype: I16, packed: {per: token, pad: -1}}
  - {name: q, column: q, dtype: F64, packed: {per: document}}
  - {name: opt, column: opt, dtype: I32, nulls: {fill: -5}, packed: {per: token}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	planFile, out := filepath.Join(dir, "plan.json"), filepath.Join(dir, "out")
	const L = 100
	if code, _, errs := runCLI("plan", "--source", src, "--global-batch", "4", "--world-size", "2", "--seed", "8", "--remainder", "pad",
		"--pack", fmt.Sprintf("tokens:%d", L), "--pack-eod", "7", "--pack-window", "20", "-o", planFile); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
	if code, _, errs := runCLI("convert", "--plan", planFile, "--spec", specFile, "-o", out); code != 0 {
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
	pieces := 0
	for rank := 0; rank < 2; rank++ {
		for step := 0; step < meta.Derived.Steps; step++ {
			ex := filepath.Join(dir, fmt.Sprintf("ex-%d-%d", rank, step))
			if code, stdout, errs := runCLI("export", out, "--epoch", "0", "--rank", fmt.Sprint(rank), "--step", fmt.Sprint(step), "-o", ex); code != 0 {
				t.Fatalf("export: exit %d: %s%s", code, stdout, errs)
			}
			read := func(name string) []int64 { v, _ := readNpyInts(t, filepath.Join(ex, name)); return v }
			srcs, opts, qs, qoffs := read("src.npy"), read("opt.npy"), read("q.npy"), read("q_offsets.npy")
			docsOf, offs, cu, cuOffs := read("documents.npy"), read("documents_offsets.npy"), read("tokens_cu_seqlens.npy"), read("tokens_cu_seqlens_offsets.npy")
			count := len(offs) - 1
			if len(srcs) != count*L || len(opts) != count*L || len(qoffs) != count+1 {
				t.Fatalf("rank %d step %d: %d rows, src %d values, opt %d, q offsets %d", rank, step, count, len(srcs), len(opts), len(qoffs))
			}
			for i := 0; i < count; i++ {
				var wantSrc, wantOpt, wantQ []int64
				for j := offs[i]; j < offs[i+1]; j++ {
					d := docs[docsOf[3*j]]
					for x := int64(0); x < docsOf[3*j+2]; x++ {
						wantSrc, wantOpt = append(wantSrc, d.src), append(wantOpt, d.opt)
					}
					wantQ = append(wantQ, int64(math.Float64bits(d.q)))
					pieces++
				}
				for len(wantSrc) < L {
					wantSrc, wantOpt = append(wantSrc, -1), append(wantOpt, 0)
				}
				if fmt.Sprint(srcs[i*L:(i+1)*L]) != fmt.Sprint(wantSrc) || fmt.Sprint(opts[i*L:(i+1)*L]) != fmt.Sprint(wantOpt) {
					t.Fatalf("rank %d step %d row %d: src %v opt %v, want %v %v", rank, step, i, srcs[i*L:(i+1)*L], opts[i*L:(i+1)*L], wantSrc, wantOpt)
				}
				if got := qs[qoffs[i]:qoffs[i+1]]; fmt.Sprint(got) != fmt.Sprint(wantQ) || int(cuOffs[i+1]-cuOffs[i]) != len(wantQ)+1 || len(cu) == 0 {
					t.Fatalf("rank %d step %d row %d: q bits %v, want %v (cu_seqlens %d values)", rank, step, i, got, wantQ, cuOffs[i+1]-cuOffs[i])
				}
			}
		}
	}
	if pieces < len(docs) {
		t.Fatalf("%d pieces checked for %d documents", pieces, len(docs))
	}
	if code, stdout, errs := runCLI("verify", out, "--deep"); code != 0 {
		t.Fatalf("verify --deep: exit %d: %s%s", code, stdout, errs)
	}
}
