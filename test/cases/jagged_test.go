package cases

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prepml/prep/internal/duckdbtest"
)

// Jagged tensors end to end: Parquet files written by DuckDB (LIST with
// null and empty rows and null elements, MAP, a list of structs, a list of
// lists; two files, three row groups), planned with a shuffle over two
// ranks, converted with a jagged spec, and batches exported; each exported
// sample's values and offsets must equal DuckDB's reading of the row its
// sample id names.

// jaggedRows is the number of rows of the generated source (2500 in a.parquet,
// in row groups of 2048 and 452, and 1500 in b.parquet).
const jaggedRows = 4000

// jaggedSQL writes the source files; {a} and {b} stand for the quoted paths
// of a.parquet and b.parquet.
const jaggedSQL = `SET threads = 1;
CREATE TABLE t AS SELECT i::BIGINT AS id,
  CASE WHEN i % 17 = 5 THEN NULL WHEN i % 11 = 3 THEN []::INTEGER[]
       ELSE list_transform(range((i * 7) % 13 + 1), j -> (i * 1000 + j - 6000)::INTEGER) END AS l,
  list_transform(range(i % 5), j -> CASE WHEN (i + j) % 4 = 0 THEN NULL ELSE (i * 100000000007 + j)::BIGINT END) AS le,
  map_from_entries(list_transform(range(i % 4), j -> {'k': (j * 3 + i % 5)::INTEGER, 'v': (i + j / 8.0 - 100)::DOUBLE})) AS m,
  list_transform(range(i % 3 + (i % 7 = 0)::INTEGER * 5), j -> {'a': (i - j)::INTEGER, 'b': (i * 0.25 + j)::DOUBLE}) AS ev,
  list_transform(range(i % 4), j -> list_transform(range((i + j) % 3), k -> (i * 10 + j * 3 + k)::INTEGER)) AS ll
FROM range(4000) r(i);
COPY (SELECT * FROM t WHERE id < 2500 ORDER BY id) TO {a} (FORMAT parquet, ROW_GROUP_SIZE 2048);
COPY (SELECT * FROM t WHERE id >= 2500 ORDER BY id) TO {b} (FORMAT parquet, ROW_GROUP_SIZE 2048)`

// jaggedSource writes the source files into dir/src with DuckDB and returns
// a run over them with the specs of testdata/jagged.
func jaggedSource(t *testing.T) *caseRun {
	t.Helper()
	duckdbtest.Require(t)
	dir := t.TempDir()
	r := &caseRun{t: t, dir: dir, src: filepath.Join(dir, "src"), plan: filepath.Join(dir, "plan.json"),
		specDir: filepath.Join("testdata", "jagged")}
	if err := os.Mkdir(r.src, 0o755); err != nil {
		t.Fatal(err)
	}
	duckdbtest.Query(t, strings.NewReplacer("{a}", duckdbtest.Quote(filepath.Join(r.src, "a.parquet")),
		"{b}", duckdbtest.Quote(filepath.Join(r.src, "b.parquet"))).Replace(jaggedSQL))
	return r
}

// duckdbRows reads columns cols of every Parquet file of src with DuckDB and
// returns them by sample id: the global row index over the files in path
// order, row-group order and row order (plan/PLAN.md §2), which for one
// directory is (file name, row in file).
func duckdbRows(t *testing.T, files []string, cols ...string) map[int64][]any {
	t.Helper()
	var quoted []string
	for _, f := range files {
		quoted = append(quoted, duckdbtest.Quote(f))
	}
	sql := "SELECT row_number() OVER (ORDER BY filename, file_row_number) - 1 AS gid, " + strings.Join(cols, ", ") +
		" FROM read_parquet([" + strings.Join(quoted, ", ") + "], filename = true) ORDER BY gid"
	res := duckdbtest.Query(t, sql)
	rows := make(map[int64][]any, len(res.Rows))
	for _, row := range res.Rows {
		rows[duckdbtest.Int64(t, row[0])] = row[1:]
	}
	return rows
}

// jaggedArray is one exported jagged tensor: its values (each element as
// its bit pattern: integers sign-extended to 64 bits, floats as their IEEE
// bits) and its offsets.
type jaggedArray struct {
	values  []uint64
	offsets []int64
}

// sample returns the values of sample k.
func (j jaggedArray) sample(k int) []uint64 { return j.values[j.offsets[k]:j.offsets[k+1]] }

// jagged reads jagged tensor name of an export of count samples:
// <name>.npy, values of descr with shape [N], and <name>_offsets.npy, <i8
// [count+1], checked as FORMAT.md's offsets (0 first, never decreasing, N
// last).
func jagged(t *testing.T, a map[string]array, name, descr string, count int) jaggedArray {
	t.Helper()
	v := tensor(t, a, name, descr)
	off := tensor(t, a, name+"_offsets", "<i8")
	var j jaggedArray
	switch descr {
	case "<i4":
		for _, x := range v.i32() {
			j.values = append(j.values, uint64(int64(x)))
		}
	case "<i8", "<f8", "<u8":
		j.values = v.u64()
	case "|u1":
		for _, x := range v.u8() {
			j.values = append(j.values, uint64(x))
		}
	default:
		t.Fatalf("jagged %s: descr %s not handled by the test", name, descr)
	}
	if !slices.Equal(v.shape, []int{len(j.values)}) {
		t.Fatalf("%s: shape %v, want [%d] (values flat)", name, v.shape, len(j.values))
	}
	j.offsets = off.i64()
	if !slices.Equal(off.shape, []int{count + 1}) || j.offsets[0] != 0 || j.offsets[count] != int64(len(j.values)) {
		t.Fatalf("%s_offsets: shape %v, first %d, last %d; want [%d], 0, %d", name, off.shape,
			j.offsets[0], j.offsets[len(j.offsets)-1], count+1, len(j.values))
	}
	for k := range count {
		if j.offsets[k+1] < j.offsets[k] {
			t.Fatalf("%s_offsets decrease at %d: %v", name, k, j.offsets[k:k+2])
		}
	}
	return j
}

// intBits and floatBits give a DuckDB value's expected bit pattern.
func intBits(t *testing.T, v any) uint64   { return uint64(duckdbtest.Int64(t, v)) }
func floatBits(t *testing.T, v any) uint64 { return math.Float64bits(duckdbtest.Float64(t, v)) }

// jaggedBatches plans the source over 2 ranks (global batch 256, shuffled,
// remainder pad), converts it with spec and calls check with every exported
// batch of steps 0, 9 and 15 (the last, padded) of both ranks, its sample
// ids and count.
func (r *caseRun) jaggedBatches(spec string, check func(a map[string]array, ids []int64)) {
	r.t.Helper()
	t := r.t
	if _, err := os.Stat(r.plan); err != nil {
		prep(t, "plan", "--source", r.src, "--seed", "7", "--global-batch", "256", "--world-size", "2",
			"--shuffle", "global", "--remainder", "pad", "-o", r.plan).OK(t)
	}
	out, res := r.convert(spec)
	res.OK(t)
	seen := 0
	for rank := range 2 {
		for _, step := range []int{0, 9, 15} {
			a := r.export(out, 0, rank, step)
			ids := tensor(t, a, "sample_ids", "<i8").i64()
			if len(ids) != 128 {
				t.Fatalf("rank %d step %d: %d samples, want 128", rank, step, len(ids))
			}
			check(a, ids)
			seen += len(ids)
		}
	}
	if seen != 6*128 {
		t.Fatalf("checked %d samples, want %d", seen, 6*128)
	}
}

func (r *caseRun) files() []string {
	return []string{filepath.Join(r.src, "a.parquet"), filepath.Join(r.src, "b.parquet")}
}

// checkSample compares one sample's values with the expected bit patterns.
func checkSample(t *testing.T, what string, id int64, got, want []uint64) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s of sample %d = %x, want %x", what, id, got, want)
	}
}

func TestJaggedListAgainstDuckDB(t *testing.T) {
	r := jaggedSource(t)
	ref := duckdbRows(t, r.files(), "id", "l")
	nulls, empties := 0, 0
	r.jaggedBatches("list.yaml", func(a map[string]array, ids []int64) {
		l := jagged(t, a, "l", "<i4", len(ids))
		mask := tensor(t, a, "l_mask", "|u1").u8()
		idv := tensor(t, a, "id", "<i8").i64()
		for k, id := range ids {
			row := ref[id]
			if idv[k] != duckdbtest.Int64(t, row[0]) {
				t.Errorf("id of sample %d = %d, DuckDB %v", id, idv[k], row[0])
			}
			var want []uint64
			wantMask := uint8(1)
			if row[1] == nil {
				wantMask = 0
				nulls++
			} else {
				for _, e := range duckdbtest.List(t, row[1]) {
					want = append(want, intBits(t, e))
				}
				if len(want) == 0 {
					empties++
				}
			}
			checkSample(t, "l", id, l.sample(k), want)
			if mask[k] != wantMask {
				t.Errorf("l_mask of sample %d = %d, want %d", id, mask[k], wantMask)
			}
		}
	})
	if nulls == 0 || empties == 0 {
		t.Errorf("the batches checked held %d null and %d empty rows: the test covers neither", nulls, empties)
	}
}

// TestPaddedListAgainstDuckDB checks the same batches through the fixed
// layout (shape [13], pad 0, lengths): the padded form the jagged one
// replaces, and the id-to-row mapping the jagged tests rely on.
func TestPaddedListAgainstDuckDB(t *testing.T) {
	r := jaggedSource(t)
	ref := duckdbRows(t, r.files(), "id", "l")
	r.jaggedBatches("list_padded.yaml", func(a map[string]array, ids []int64) {
		l := tensor(t, a, "l", "<i4")
		if !slices.Equal(l.shape, []int{len(ids), 13}) {
			t.Fatalf("l shape %v, want [%d 13]", l.shape, len(ids))
		}
		vals := l.i32()
		lens := tensor(t, a, "l_lengths", "<i8").i64()
		mask := tensor(t, a, "l_mask", "|u1").u8()
		idv := tensor(t, a, "id", "<i8").i64()
		for k, id := range ids {
			row := ref[id]
			if idv[k] != duckdbtest.Int64(t, row[0]) {
				t.Errorf("id of sample %d = %d, DuckDB %v", id, idv[k], row[0])
			}
			want := make([]uint64, 13)
			var n int64
			wantMask := uint8(0)
			if row[1] != nil {
				wantMask = 1
				for j, e := range duckdbtest.List(t, row[1]) {
					want[j] = intBits(t, e)
					n++
				}
			}
			got := make([]uint64, 13)
			for j := range got {
				got[j] = uint64(int64(vals[13*k+j]))
			}
			checkSample(t, "l", id, got, want)
			if lens[k] != n || mask[k] != wantMask {
				t.Errorf("sample %d: l_lengths %d, l_mask %d; want %d, %d", id, lens[k], mask[k], n, wantMask)
			}
		}
	})
}

func TestJaggedListNullElementsAgainstDuckDB(t *testing.T) {
	r := jaggedSource(t)
	ref := duckdbRows(t, r.files(), "le")
	nullElems := 0
	r.jaggedBatches("elements.yaml", func(a map[string]array, ids []int64) {
		le := jagged(t, a, "le", "<i8", len(ids))
		em := jagged(t, a, "le_element_mask", "|u1", len(ids))
		if !slices.Equal(le.offsets, em.offsets) {
			t.Fatalf("le_element_mask offsets %v differ from le's %v", em.offsets, le.offsets)
		}
		for k, id := range ids {
			var want, wantMask []uint64
			for _, e := range duckdbtest.List(t, ref[id][0]) {
				if e == nil {
					want, wantMask = append(want, uint64(math.MaxUint64)), append(wantMask, 0) // element_fill -1
					nullElems++
					continue
				}
				want, wantMask = append(want, intBits(t, e)), append(wantMask, 1)
			}
			checkSample(t, "le", id, le.sample(k), want)
			checkSample(t, "le_element_mask", id, em.sample(k), wantMask)
		}
	})
	if nullElems == 0 {
		t.Error("no null element in the batches checked")
	}
}

func TestJaggedMapAgainstDuckDB(t *testing.T) {
	checkIntFloatFields(t, "map.yaml", "m", "m.keys", "key", "m.values", "value")
}

// checkIntFloatFields converts the source with spec and checks its two
// jagged tensors over the elements of column col (a MAP or a list of
// structs, whose DuckDB elements are structs): ints (<i4, field fi of each
// element) and floats (<f8, field ff), which must share offsets.
func checkIntFloatFields(t *testing.T, spec, col, ints, fi, floats, ff string) {
	r := jaggedSource(t)
	ref := duckdbRows(t, r.files(), col)
	r.jaggedBatches(spec, func(a map[string]array, ids []int64) {
		ja := jagged(t, a, ints, "<i4", len(ids))
		jb := jagged(t, a, floats, "<f8", len(ids))
		if !slices.Equal(ja.offsets, jb.offsets) {
			t.Fatalf("%s offsets %v differ from %s offsets %v", ints, ja.offsets, floats, jb.offsets)
		}
		for k, id := range ids {
			var wa, wb []uint64
			for _, e := range duckdbtest.List(t, ref[id][0]) {
				s := e.(map[string]any)
				wa, wb = append(wa, intBits(t, s[fi])), append(wb, floatBits(t, s[ff]))
			}
			checkSample(t, ints, id, ja.sample(k), wa)
			checkSample(t, floats, id, jb.sample(k), wb)
		}
	})
}

func TestJaggedMapDenseKeysAgainstDuckDB(t *testing.T) {
	r := jaggedSource(t)
	ref := duckdbRows(t, r.files(), "m")
	r.jaggedBatches("map_dense.yaml", func(a map[string]array, ids []int64) {
		md := tensor(t, a, "md", "<f8")
		if !slices.Equal(md.shape, []int{len(ids), 3}) {
			t.Fatalf("md shape %v, want [%d 3]", md.shape, len(ids))
		}
		got := md.u64()
		for k, id := range ids {
			want := []uint64{math.Float64bits(-1), math.Float64bits(-1), math.Float64bits(-1)}
			for _, e := range duckdbtest.List(t, ref[id][0]) {
				kv := e.(map[string]any)
				if i := slices.Index([]int64{1, 4, 7}, duckdbtest.Int64(t, kv["key"])); i >= 0 {
					want[i] = floatBits(t, kv["value"])
				}
			}
			checkSample(t, "md", id, got[3*k:3*k+3], want)
		}
	})
}

func TestJaggedListOfStructsAgainstDuckDB(t *testing.T) {
	checkIntFloatFields(t, "structs.yaml", "ev", "ev_a", "a", "ev_b", "b")
}

func TestJaggedListOfListsAgainstDuckDB(t *testing.T) {
	r := jaggedSource(t)
	ref := duckdbRows(t, r.files(), "ll")
	r.jaggedBatches("lists.yaml", func(a map[string]array, ids []int64) {
		ll := jagged(t, a, "ll", "<i4", len(ids))
		inner := jagged(t, a, "ll_inner_lengths", "<i8", len(ids))
		for k, id := range ids {
			var flat, lens []uint64
			for _, in := range duckdbtest.List(t, ref[id][0]) {
				l := duckdbtest.List(t, in)
				lens = append(lens, uint64(len(l)))
				for _, e := range l {
					flat = append(flat, intBits(t, e))
				}
			}
			checkSample(t, "ll", id, ll.sample(k), flat)
			checkSample(t, "ll_inner_lengths", id, inner.sample(k), lens)
		}
	})
}
