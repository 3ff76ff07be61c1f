package convert

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/pqread"
	"github.com/prepml/prep/shardfmt"
)

// mapRow is a row of the map fixture, written from Go maps by parquet-go
// (which writes a map's entries in increasing key order): s an optional
// MAP<STRING, FLOAT>, n a required MAP<INT32, INT64>.
type mapRow struct {
	ID int64              `parquet:"id"`
	S  map[string]float32 `parquet:"s,optional"`
	N  map[int32]int64    `parquet:"n"`
}

var mapNames = []string{"a", "bb", "ccc", "dddd"}

// mapS returns row id's s: nil (a null map) when id%7 == 3, empty when
// id%5 == 1, else the names j with (id+j)%3 != 0, value id/2 + j.
func mapS(id int64) map[string]float32 {
	if id%7 == 3 {
		return nil
	}
	s := map[string]float32{}
	if id%5 == 1 {
		return s
	}
	for j, k := range mapNames {
		if (id+int64(j))%3 != 0 {
			s[k] = float32(id)*0.5 + float32(j)
		}
	}
	return s
}

// mapNKey is key j of row id's n (increasing in j); n has id%4 entries,
// value id*1000+j.
func mapNKey(id int64, j int) int32 { return int32(j*5 - 3 + int(id%3)) }

func mapN(id int64) map[int32]int64 {
	n := map[int32]int64{}
	for j := range int(id % 4) {
		n[mapNKey(id, j)] = id*1000 + int64(j)
	}
	return n
}

// writeMaps writes rows [first, first+n) of the fixture to path, row groups
// of rg rows.
func writeMaps(t testing.TB, path string, first, n, rg int64) {
	t.Helper()
	var rows []mapRow
	for id := first; id < first+n; id++ {
		rows = append(rows, mapRow{ID: id, S: mapS(id), N: mapN(id)})
	}
	pqfixture.Of(rows...).RowGroupRows(rg).PageBytes(512).WriteFile(t, path)
}

const mapSpecYAML = `
tensors:
  - {name: id, column: id, dtype: I64}
  - {name: s, column: s, dtype: F32, map: {key_bytes: {mode: hash, buckets: 1000}}, nulls: {mask: true}}
  - {name: sp, column: s, dtype: F64, map: {key_bytes: {mode: pad, max_len: 3, truncate: true}}, nulls: {}}
  - {name: n, column: n, dtype: I64, map: {key_dtype: I16}}
  - {name: sd, column: s, dtype: F32, map: {keys: [bb, dddd, zz], fill: -1}, nulls: {mask: true}}
  - {name: nd, column: n, dtype: I32, map: {keys: ["-3", "2", "-1", "9"], fill: 0}}
`

const mapTensors = "[id I64 [], s.keys I64 [] jagged, s.values F32 [] jagged, s_mask U8 [], sp.keys U8 [3] jagged, sp.values F64 [] jagged, n.keys I16 [] jagged, n.values I64 [] jagged, sd F32 [3], sd_mask U8 [], nd I32 [4]]"

// mapExpect returns the expected bytes of id's samples of mapSpecYAML's
// tensors, in table order (a jagged tensor's values).
func mapExpect(id uint64) [][]byte {
	le := binary.LittleEndian
	i := int64(id)
	s := mapS(i)
	var sk, sv, pk, pv []byte
	sd := make([]byte, 0, 12)
	for range 3 {
		sd = le.AppendUint32(sd, math.Float32bits(-1))
	}
	for j, k := range mapNames {
		v, ok := s[k]
		if !ok {
			continue
		}
		sk = le.AppendUint64(sk, feature.FNV1a64([]byte(k))%1000)
		sv = le.AppendUint32(sv, math.Float32bits(v))
		pk = append(pk, (k + "\x00\x00\x00")[:3]...)
		pv = le.AppendUint64(pv, math.Float64bits(float64(v)))
		switch j {
		case 1:
			le.PutUint32(sd[0:], math.Float32bits(v))
		case 3:
			le.PutUint32(sd[4:], math.Float32bits(v))
		}
	}
	mask := byte(1)
	if s == nil {
		mask = 0
	}
	var nk, nv []byte
	nd := make([]byte, 16)
	dense := map[int32]int{-3: 0, 2: 1, -1: 2, 9: 3}
	for j := range int(i % 4) {
		k := mapNKey(i, j)
		nk = le.AppendUint16(nk, uint16(k))
		nv = le.AppendUint64(nv, uint64(i*1000+int64(j)))
		if at, ok := dense[k]; ok {
			le.PutUint32(nd[4*at:], uint32(i*1000+int64(j)))
		}
	}
	return [][]byte{le.AppendUint64(nil, id), sk, sv, {mask}, pk, pv, nk, nv, sd, {mask}, nd}
}

func mapFixture(t testing.TB, cfg plan.Config) (*plan.Plan, *feature.Spec) {
	t.Helper()
	src := t.TempDir()
	writeMaps(t, filepath.Join(src, "a.parquet"), 0, 400, 128)
	writeMaps(t, filepath.Join(src, "b.parquet"), 400, 150, 1000)
	spec, err := feature.ParseSpec([]byte(mapSpecYAML), "maps.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return featuretest.MakePlan(t, src, cfg), spec
}

// checkShards reads every shard of out, whose tensors must be tensors and
// whose manifest shard_format and every shard's version must be format,
// and compares each sample of every tensor with expect(id), through
// shardfmt.Reader (Jagged for a jagged tensor); it returns the samples
// read.
func checkShards(t *testing.T, out, tensors, format string, expect func(uint64) [][]byte) int {
	t.Helper()
	m, err := shardfmt.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	if m.ShardFormat != format && !(format == "1.0" && m.ShardFormat == "") {
		t.Errorf("manifest shard_format %q, want %s", m.ShardFormat, format)
	}
	if got := shardfmt.TensorList(m.Tensors); got != tensors {
		t.Fatalf("tensors %s, want %s", got, tensors)
	}
	samples := 0
	for _, e := range m.Shards {
		r, err := shardfmt.Open(filepath.Join(out, e.Path))
		if err != nil {
			t.Fatal(err)
		}
		if maj, min := r.Version(); fmt.Sprintf("%d.%d", maj, min) != format {
			t.Errorf("%s: version %d.%d, want %s", e.Path, maj, min, format)
		}
		for k := 0; k < r.NumBatches(); k++ {
			ids, err := r.SampleIDs(k)
			if err != nil {
				t.Fatal(err)
			}
			block, err := r.Block(k)
			if err != nil {
				t.Fatal(err)
			}
			for i, id := range ids {
				samples++
				exp := expect(id)
				for ti := range m.Tensors {
					got := slotBytes(t, r, k, block, ti, i)
					if !bytes.Equal(got, exp[ti]) {
						t.Fatalf("%s batch %d slot %d (id %d) tensor %s = %x, want %x", e.Path, k, i, id, m.Tensors[ti].Name, got, exp[ti])
					}
				}
			}
		}
		r.Close()
	}
	return samples
}

// TestRunMapsMatchSource: maps with string keys (hashed, padded) and
// integer keys, null and empty maps, as jagged <name>.keys and
// <name>.values and as dense tensors over listed keys (some never
// present), read back through shardfmt equal the source maps; in memory,
// with records and values arena spilled, with row groups read in row
// windows and under Jobs 1 and 4 the shards are byte-identical.
func TestRunMapsMatchSource(t *testing.T) {
	p, spec := mapFixture(t, featuretest.JagConfig)
	ref := filepath.Join(t.TempDir(), "mem")
	sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: ref, Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if sum.ValuesArenaFile || sum.SpillWindows != 0 || sum.RowGroupsSliced != 0 {
		t.Errorf("in-memory run: summary %+v", sum)
	}
	if n := checkShards(t, ref, mapTensors, "2.0", mapExpect); n < 2*550 {
		t.Errorf("%d samples read, want at least %d", n, 2*550)
	}
	want := snapshot(t, ref)
	for _, c := range []struct {
		limit int64
		jobs  int
	}{{0, 1}, {0, 4}, {8 << 10, 1}, {8 << 10, 4}, {1, 2}} {
		out := filepath.Join(t.TempDir(), fmt.Sprintf("l%dj%d", c.limit, c.jobs))
		sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: c.jobs, MemoryLimit: c.limit})
		if err != nil {
			t.Fatal(err)
		}
		if c.limit > 0 && (!sum.ValuesArenaFile || sum.SpillWindows == 0 || sum.RowGroupsSliced == 0) {
			t.Errorf("limit %d: arena file %v, %d spill windows, %d row groups sliced", c.limit, sum.ValuesArenaFile, sum.SpillWindows, sum.RowGroupsSliced)
		}
		if snapshot(t, out) != want {
			t.Errorf("limit %d jobs %d: shards differ from the in-memory run", c.limit, c.jobs)
		}
	}
}

// TestRunMapDenseOnlyIsFormat1: a spec whose only map is dense writes
// format 1.0 shards with the fixed [len(keys)] tensor.
func TestRunMapDenseOnlyIsFormat1(t *testing.T) {
	p, _ := mapFixture(t, featuretest.JagConfig)
	spec, err := feature.ParseSpec([]byte(`tensors:
  - {name: id, column: id, dtype: I64}
  - {name: nd, column: n, dtype: I32, map: {keys: ["-3", "2", "-1", "9"], fill: 0}}
`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "o")
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: 2}); err != nil {
		t.Fatal(err)
	}
	checkShards(t, out, "[id I64 [], nd I32 [4]]", "1.0", func(id uint64) [][]byte {
		e := mapExpect(id)
		return [][]byte{e[0], e[10]}
	})
}

// TestMaterializeMaps: Materialize gives every map tensor's samples as
// the shards hold them, whole and with row groups read in row windows
// into staging in memory.
func TestMaterializeMaps(t *testing.T) {
	p, spec := mapFixture(t, featuretest.JagConfig)
	ids := []uint64{0, 1, 3, 10, 17, 127, 128, 549, 400, 3}
	for _, limit := range []int64{0, 4 << 10} {
		s, err := feature.Materialize(context.Background(), nil, p, spec, ids, feature.Bounds{Memory: limit})
		if err != nil {
			t.Fatal(err)
		}
		if got := shardfmt.TensorList(s.Tensors); got != mapTensors {
			t.Fatalf("tensors %s, want %s", got, mapTensors)
		}
		for i, id := range ids {
			for ti, want := range mapExpect(id) {
				if got := s.Sample(ti, i); !bytes.Equal(got, want) {
					t.Errorf("limit %d id %d tensor %s = %x, want %x", limit, id, s.Tensors[ti].Name, got, want)
				}
			}
		}
	}
}

// mapLevelsSchema: id INT64 and n, a required MAP<INT32, optional INT64>,
// for rows written with explicit levels (n.key column 1, n.value column
// 2; an entry has definition level 1, a present value 2).
func mapLevelsSchema() *parquet.Schema {
	return parquet.NewSchema("schema", parquet.Group{
		"id": parquet.Leaf(parquet.Int64Type),
		"n":  parquet.Map(parquet.Leaf(parquet.Int32Type), parquet.Optional(parquet.Leaf(parquet.Int64Type))),
	})
}

// levelsRow is row id with the map entries kv (a nil value: null), each
// key and value column given its own entries: keys holds kv's keys unless
// extra adds one more key without a value.
func levelsRow(id int64, kv [][2]*int64, extraKey bool) parquet.Row {
	row := parquet.Row{parquet.Int64Value(id).Level(0, 0, 0)}
	if len(kv) == 0 {
		return append(row, parquet.NullValue().Level(0, 0, 1), parquet.NullValue().Level(0, 0, 2))
	}
	for e, p := range kv {
		rep := 1
		if e == 0 {
			rep = 0
		}
		row = append(row, parquet.Int32Value(int32(*p[0])).Level(rep, 1, 1))
	}
	if extraKey {
		row = append(row, parquet.Int32Value(99).Level(1, 1, 1))
	}
	for e, p := range kv {
		rep := 1
		if e == 0 {
			rep = 0
		}
		if p[1] == nil {
			row = append(row, parquet.NullValue().Level(rep, 1, 2))
		} else {
			row = append(row, parquet.Int64Value(*p[1]).Level(rep, 2, 2))
		}
	}
	return row
}

func i64(v int64) *int64 { return &v }

// TestRunMapRowErrors: a listed key twice in one row, a null value and a
// null map are refused naming file, column, row group, row and entry; a
// key and value leaf disagreeing on a row's entries is corrupt input.
func TestRunMapRowErrors(t *testing.T) {
	write := func(rows []parquet.Row) *plan.Plan {
		src := t.TempDir()
		pqfixture.Raw(mapLevelsSchema(), rows...).RowGroupRows(4).WriteFile(t, filepath.Join(src, "a.parquet"))
		return featuretest.MakePlan(t, src, jagSeqCfg)
	}
	ok := func(id int64) parquet.Row {
		return levelsRow(id, [][2]*int64{{i64(1), i64(id)}, {i64(2), i64(-id)}}, false)
	}
	dup := write([]parquet.Row{ok(0), ok(1), ok(2), ok(3), ok(4),
		levelsRow(5, [][2]*int64{{i64(1), i64(5)}, {i64(3), i64(6)}, {i64(1), i64(7)}}, false), ok(6), ok(7)})
	nullValue := write([]parquet.Row{ok(0), ok(1), levelsRow(2, [][2]*int64{{i64(1), i64(1)}, {i64(3), nil}}, false), ok(3)})
	mismatch := write([]parquet.Row{ok(0), ok(1), ok(2), ok(3), ok(4), ok(5), levelsRow(6, [][2]*int64{{i64(1), i64(6)}}, true), ok(7)})
	for _, c := range []struct {
		p        *plan.Plan
		spec     string
		want     string
		sentinel error
	}{
		{dup, `tensors: [{name: d, column: n, dtype: I64, map: {keys: ["3", "1"], fill: 0}}]`,
			`a.parquet: column "n.key", row group 1, row 1, element 2: map key 1 (map.keys[1]) appears twice in this row`, feature.ErrValue},
		{dup, `tensors: [{name: d, column: n, dtype: I64, map: {keys: ["3", "2"], fill: 0}}]`, "", nil}, // 1 not listed: its duplicate is not read
		{nullValue, `tensors: [{name: d, column: n, dtype: I64, map: {keys: ["3"], fill: 0}}]`,
			`a.parquet: column "n.value", row group 0, row 2, element 1: null value of map key 3 (set list.element_fill to replace null values)`, feature.ErrValue},
		{nullValue, `tensors: [{name: d, column: n, dtype: I64, map: {keys: ["1"], fill: 0}}]`, "", nil},
		{nullValue, `tensors: [{name: d, column: n, dtype: I64, map: {keys: ["3"], fill: 0}, list: {element_fill: 7}}]`, "", nil},
		{nullValue, `tensors: [{name: m, column: n, dtype: I64, map: {key_dtype: I32}}]`,
			`a.parquet: column "n.value", row group 0, row 2, element 1: null map value (1 null values in this column chunk; set list.element_fill or list.element_mask)`, feature.ErrValue},
		{nullValue, `tensors: [{name: m, column: n, dtype: I64, map: {key_dtype: I32}, list: {element_mask: true}}]`, "", nil},
		{mismatch, `tensors: [{name: m, column: n, dtype: I64, map: {key_dtype: I32}}]`,
			`a.parquet: column "n.value", row group 1, row 2: corrupt parquet data: the leaves of "n" disagree on this row (2 entries in "n.key", 1 in "n.value"); the columns of one list or map hold the same entries in every row`, pqread.ErrCorrupt},
		{mismatch, `tensors: [{name: d, column: n, dtype: I64, map: {keys: ["1"], fill: 0}}]`,
			`a.parquet: column "n.value", row group 1, row 2: corrupt parquet data: the leaves of "n" disagree on this row (2 entries in "n.key", 1 in "n.value"); the columns of one list or map hold the same entries in every row`, pqread.ErrCorrupt},
	} {
		spec, err := feature.ParseSpec([]byte(c.spec), "s.yaml")
		if err != nil {
			t.Fatal(err)
		}
		for _, limit := range []int64{0, 1} {
			_, err = Run(context.Background(), Options{Plan: c.p, Spec: spec, Output: filepath.Join(t.TempDir(), "o"), Jobs: 2, MemoryLimit: limit})
			if c.want == "" {
				if err != nil {
					t.Errorf("%s (limit %d): %v", c.spec, limit, err)
				}
				continue
			}
			if err == nil || err.Error() != c.want || !errors.Is(err, c.sentinel) {
				t.Errorf("%s (limit %d): error\n  %v\nwant\n  %s", c.spec, limit, err, c.want)
			}
			// Staging in memory, row groups whole or in row windows.
			var ids []uint64
			for id := range c.p.NumSamples() {
				ids = append(ids, id)
			}
			_, err = feature.Materialize(context.Background(), nil, c.p, spec, ids, feature.Bounds{Memory: limit})
			if err == nil || err.Error() != c.want || !errors.Is(err, c.sentinel) {
				t.Errorf("%s: Materialize (limit %d): error\n  %v\nwant\n  %s", c.spec, limit, err, c.want)
			}
		}
	}
}

// TestRunMapNullErrors: a null map without nulls is an error for both
// forms.
func TestRunMapNullErrors(t *testing.T) {
	p, _ := mapFixture(t, featuretest.JagConfig)
	for _, c := range []string{
		`tensors: [{name: s, column: s, dtype: F32, map: {key_bytes: {mode: hash, buckets: 10}}}]`,
		`tensors: [{name: s, column: s, dtype: F32, map: {keys: [a], fill: 0}}]`,
	} {
		spec, err := feature.ParseSpec([]byte(c), "s.yaml")
		if err != nil {
			t.Fatal(err)
		}
		_, err = Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "o"), Jobs: 1})
		col := "s.key"
		if bytes.Contains([]byte(c), []byte("keys:")) {
			col = "s.value"
		}
		want := fmt.Sprintf(`a.parquet: column %q, row group 0, row 3: null map (18 nulls in this column chunk; give nulls: {} to read them as empty maps)`, col)
		if err == nil || err.Error() != want || !errors.Is(err, feature.ErrValue) {
			t.Errorf("%s: error\n  %v\nwant\n  %s", c, err, want)
		}
	}
}

// TestRunMapSchemaErrors: a map policy the map's types do not fit is
// refused at the schema check with its reason.
func TestRunMapSchemaErrors(t *testing.T) {
	p, _ := mapFixture(t, featuretest.JagConfig)
	for _, c := range []struct {
		spec, want string
		sentinel   error
	}{
		{`tensors: [{name: m, column: s, dtype: F32, map: {}}]`,
			`a.parquet: column "s.key": map "s" has BYTE_ARRAY STRING keys: give map.key_bytes ({mode: hash, buckets: N} or {mode: pad, max_len: L}) to make numbers of them`, feature.ErrSpec},
		{`tensors: [{name: m, column: s, dtype: F32, map: {key_dtype: I32}}]`,
			`a.parquet: column "s.key": map "s" has BYTE_ARRAY STRING keys: give map.key_bytes ({mode: hash, buckets: N} or {mode: pad, max_len: L}) to make numbers of them`, feature.ErrSpec},
		{`tensors: [{name: m, column: n, dtype: I64, map: {}}]`,
			`a.parquet: column "n.key": map "n" has INT32 INT(32,true) keys: give map.key_dtype, the dtype of m.keys`, feature.ErrSpec},
		{`tensors: [{name: m, column: n, dtype: I64, map: {key_bytes: {mode: hash, buckets: 3}}}]`,
			`a.parquet: column "n.key": map "n" has INT32 INT(32,true) keys, which take map.key_dtype, not map.key_bytes`, feature.ErrSpec},
		{`tensors: [{name: m, column: n, dtype: I64, map: {key_dtype: U8}}]`,
			`a.parquet: column "n.key", row group 0, row 1, element 0: value -2 out of range for U8 [0, 255]`, feature.ErrValue},
		{`tensors: [{name: m, column: n, dtype: I64, map: {keys: [x], fill: 0}}]`,
			`a.parquet: column "n.key": map.keys[0] "x" is no INT32 INT(32,true) key (map "n" has integer keys, given as decimal text)`, feature.ErrSpec},
		{`tensors: [{name: m, column: n, dtype: I64, map: {keys: ["1", "01"], fill: 0}}]`,
			`a.parquet: column "n.key": map.keys[0] "1" and map.keys[1] "01" are the same key`, feature.ErrSpec},
		{`tensors: [{name: m, column: n, dtype: I8, map: {keys: ["1"], fill: 300}}]`,
			`a.parquet: column "n.key": map.fill 300: value 300 out of range for I8 [-128, 127]`, feature.ErrSpec},
		{`tensors: [{name: m, column: n, dtype: I64, map: {keys: ["1", "2147483648"], fill: 0}}]`,
			`a.parquet: column "n.key": map.keys[1] "2147483648" is out of the range of map "n"'s INT32 INT(32,true) keys [-2147483648, 2147483647]; no row can hold it`, feature.ErrSpec},
		{`tensors: [{name: m, column: n, dtype: I64, map: {keys: ["-2147483649"], fill: 0}}]`,
			`a.parquet: column "n.key": map.keys[0] "-2147483649" is out of the range of map "n"'s INT32 INT(32,true) keys [-2147483648, 2147483647]; no row can hold it`, feature.ErrSpec},
		{`tensors: [{name: m, column: n, dtype: I64, map: {keys: ["99999999999999999999"], fill: 0}}]`,
			`a.parquet: column "n.key": map.keys[0] "99999999999999999999" is out of the range of map "n"'s INT32 INT(32,true) keys [-2147483648, 2147483647]; no row can hold it`, feature.ErrSpec},
		{`tensors: [{name: m, column: n, dtype: F16, map: {keys: ["1"], fill: 1e6}}]`,
			`a.parquet: column "n.key": map.fill 1e+06: 1e+06 overflows F16 (largest finite 65504); write Inf or -Inf for an infinite value`, feature.ErrSpec},
		{`tensors: [{name: m, column: id, dtype: I64, map: {key_dtype: I32}}]`,
			`a.parquet: column "id": "id" is a INT64 INT(64,true) column, not a map; a map policy reads a MAP column`, feature.ErrSchema},
		{`tensors: [{name: m, column: nope, dtype: I64, map: {key_dtype: I32}}]`,
			`a.parquet: column "nope": no map "nope"; the file's columns are "id", "s.key", "s.value", "n.key", "n.value"`, feature.ErrSchema},
	} {
		spec, err := feature.ParseSpec([]byte(c.spec), "s.yaml")
		if err != nil {
			t.Fatal(err)
		}
		_, err = Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "o"), Jobs: 1})
		if err == nil || err.Error() != c.want || !errors.Is(err, c.sentinel) {
			t.Errorf("%s: error\n  %v\nwant\n  %s", c.spec, err, c.want)
		}
	}
}

// TestMapNullValues: a null map value takes list.element_fill, and
// list.element_mask adds the jagged <name>_element_mask beside
// <name>.values (0 for the null value); a dense tensor's listed key with
// a null value takes element_fill.
func TestMapNullValues(t *testing.T) {
	src := t.TempDir()
	rows := []parquet.Row{
		levelsRow(0, [][2]*int64{{i64(1), i64(10)}, {i64(3), nil}}, false),
		levelsRow(1, nil, false),
		levelsRow(2, [][2]*int64{{i64(3), i64(32)}}, false),
	}
	pqfixture.Raw(mapLevelsSchema(), rows...).WriteFile(t, filepath.Join(src, "a.parquet"))
	p := featuretest.MakePlan(t, src, jagSeqCfg)
	spec, err := feature.ParseSpec([]byte(`tensors:
  - {name: m, column: n, dtype: I32, map: {key_dtype: I64}, list: {element_fill: -7, element_mask: true}}
  - {name: d, column: n, dtype: I16, map: {keys: ["3", "1"], fill: -1}, list: {element_fill: -9}}
`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := feature.Materialize(context.Background(), nil, p, spec, []uint64{0, 1, 2}, feature.Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	i32s := func(v ...int32) []byte {
		var b []byte
		for _, x := range v {
			b = le.AppendUint32(b, uint32(x))
		}
		return b
	}
	i16s := func(v ...int16) []byte {
		var b []byte
		for _, x := range v {
			b = le.AppendUint16(b, uint16(x))
		}
		return b
	}
	want := [][][]byte{
		{{1, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0}, i32s(10, -7), {1, 0}, i16s(-9, 10)},
		{nil, nil, nil, i16s(-1, -1)},
		{{3, 0, 0, 0, 0, 0, 0, 0}, i32s(32), {1}, i16s(32, -1)},
	}
	if got := shardfmt.TensorList(s.Tensors); got != "[m.keys I64 [] jagged, m.values I32 [] jagged, m_element_mask U8 [] jagged, d I16 [2]]" {
		t.Fatalf("tensors %s", got)
	}
	for i := range 3 {
		for ti := range s.Tensors {
			if got := s.Sample(ti, i); !bytes.Equal(got, want[i][ti]) {
				t.Errorf("row %d tensor %s = %x, want %x", i, s.Tensors[ti].Name, got, want[i][ti])
			}
		}
	}
}

// parquetTestingData is the repository's copy of apache/parquet-testing's
// data files.
const parquetTestingData = "../testdata/parquet-testing/data"

// testingFilePlan copies parquet-testing file into a fresh source folder
// and plans its rows in file order.
func testingFilePlan(t *testing.T, file string) *plan.Plan {
	t.Helper()
	src := t.TempDir()
	b, err := os.ReadFile(filepath.Join(parquetTestingData, file))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, file), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return featuretest.MakePlan(t, src, jagSeqCfg)
}

// TestMapParquetTesting: parquet-testing's map files. map_no_value's
// my_map holds keys [1 2 3], [4 5 6], [7 8 9] with every value null (as
// parquet-go reads it): element_fill and element_mask give them, a dense
// tensor finds the listed keys; its my_map_no_v (a map without a value
// field) is refused naming the key leaf to read instead;
// incorrect_map_schema's string values and nonnullable.impala's int_map
// inside a list are refused; nonnullable.impala's Int_Map (string keys,
// required) reads with hashed and padded keys.
func TestMapParquetTesting(t *testing.T) {
	le := binary.LittleEndian
	i32s := func(v ...int32) []byte {
		var b []byte
		for _, x := range v {
			b = le.AppendUint32(b, uint32(x))
		}
		return b
	}
	p := testingFilePlan(t, "map_no_value.parquet")
	spec, err := feature.ParseSpec([]byte(`tensors:
  - {name: mm, column: my_map, dtype: I32, map: {key_dtype: I32}, list: {element_fill: -5, element_mask: true}}
  - {name: md, column: my_map, dtype: I32, map: {keys: ["1", "5", "9", "10"], fill: -1}, list: {element_fill: -5}}
`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := feature.Materialize(context.Background(), nil, p, spec, []uint64{0, 1, 2}, feature.Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		k := int32(3 * i)
		md := []int32{-1, -1, -1, -1}
		md[i] = -5
		want := [][]byte{i32s(k+1, k+2, k+3), i32s(-5, -5, -5), {0, 0, 0}, i32s(md...)}
		for ti := range s.Tensors {
			if got := s.Sample(ti, i); !bytes.Equal(got, want[ti]) {
				t.Errorf("map_no_value row %d tensor %s = %x, want %x", i, s.Tensors[ti].Name, got, want[ti])
			}
		}
	}

	impala := testingFilePlan(t, "nonnullable.impala.parquet")
	spec, err = feature.ParseSpec([]byte(`tensors:
  - {name: h, column: Int_Map, dtype: I32, map: {key_bytes: {mode: hash, buckets: 1000003}}}
  - {name: p, column: Int_Map, dtype: I64, map: {key_bytes: {mode: pad, max_len: 2}}}
`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err = feature.Materialize(context.Background(), nil, impala, spec, []uint64{0}, feature.Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	// Int_Map of the one row: {"k1": -1} (DuckDB and parquet-go agree).
	want := [][]byte{le.AppendUint64(nil, feature.FNV1a64([]byte("k1"))%1000003), i32s(-1), []byte("k1"), le.AppendUint64(nil, ^uint64(0))}
	for ti := range s.Tensors {
		if got := s.Sample(ti, 0); !bytes.Equal(got, want[ti]) {
			t.Errorf("impala tensor %s = %x, want %x", s.Tensors[ti].Name, got, want[ti])
		}
	}

	for _, c := range []struct {
		p          *plan.Plan
		spec, want string
		sentinel   error
	}{
		{p, `tensors: [{name: m, column: my_map_no_v, dtype: I32, map: {key_dtype: I32}}]`,
			`map_no_value.parquet: column "my_map_no_v": map "my_map_no_v" has no value field (its keys read as a jagged list: {column: "my_map_no_v.key", list: {jagged: true}})`, feature.ErrSchema},
		{testingFilePlan(t, "incorrect_map_schema.parquet"), `tensors: [{name: m, column: my_map, dtype: F32, map: {key_bytes: {mode: hash, buckets: 9}}}]`,
			`incorrect_map_schema.parquet: column "my_map.value": map "my_map" has BYTE_ARRAY STRING values, which convert to no dtype; a map policy reads numeric values (read the leaves as jagged lists instead, sharing offsets: {column: "my_map.key", list: {jagged: true}, dtype: I64, bytes: {mode: hash, buckets: N}}, {column: "my_map.value", list: {jagged: true}, dtype: I64, bytes: {mode: hash, buckets: N}})`, feature.ErrSchema},
		{impala, `tensors: [{name: m, column: int_map_array, dtype: I32, map: {key_bytes: {mode: hash, buckets: 9}}}]`,
			`nonnullable.impala.parquet: column "int_map_array": unsupported parquet feature: "int_map_array" is a nested column that cannot be read: column "int_map_array.key": map "int_map_array" inside a list or map (2 levels of repetition); only a map at the first level of repetition is supported`, pqread.ErrUnsupported},
	} {
		spec, err := feature.ParseSpec([]byte(c.spec), "s.yaml")
		if err != nil {
			t.Fatal(err)
		}
		_, err = Run(context.Background(), Options{Plan: c.p, Spec: spec, Output: filepath.Join(t.TempDir(), "o"), Jobs: 1})
		if err == nil || err.Error() != c.want || !errors.Is(err, c.sentinel) {
			t.Errorf("%s: error\n  %v\nwant\n  %s", c.spec, err, c.want)
		}
	}
}

// TestMapRefusalHintsConvert: the leaves a map refusal names convert as
// given (the hint is no dead end): incorrect_map_schema's string keys and
// string values, each hashed, with one offsets per row for both.
func TestMapRefusalHintsConvert(t *testing.T) {
	p := testingFilePlan(t, "incorrect_map_schema.parquet")
	spec, err := feature.ParseSpec([]byte(`tensors:
  - {name: k, column: "my_map.key", list: {jagged: true}, dtype: I64, bytes: {mode: hash, buckets: 9}}
  - {name: v, column: "my_map.value", list: {jagged: true}, dtype: I64, bytes: {mode: hash, buckets: 9}}
`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := feature.Materialize(context.Background(), nil, p, spec, []uint64{0}, feature.Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	if k, v := s.Sample(0, 0), s.Sample(1, 0); len(k) == 0 || len(k) != len(v) {
		t.Errorf("row 0: %d bytes of keys, %d of values; want as many, not none", len(k), len(v))
	}
	for ti := range s.Tensors {
		b := s.Sample(ti, 0)
		for j := 0; j < len(b); j += 8 {
			if h := binary.LittleEndian.Uint64(b[j:]); h >= 9 {
				t.Errorf("%s value %d = %d, not below the 9 buckets", s.Tensors[ti].Name, j/8, h)
			}
		}
	}
}

// TestRunListOfStructsMismatch: two fields of one list of structs that
// disagree on a row's entries are refused as corrupt input naming the
// list, both columns, row group and row; agreeing fields convert.
func TestRunListOfStructsMismatch(t *testing.T) {
	sch := parquet.NewSchema("schema", parquet.Group{
		"ev": parquet.List(parquet.Group{"a": parquet.Leaf(parquet.Int32Type), "b": parquet.Leaf(parquet.Int32Type)}),
	})
	var rows []parquet.Row
	for i := range 10 {
		var row parquet.Row
		nb := 2
		if i == 7 {
			nb = 1
		}
		for k := range 2 {
			row = append(row, parquet.Int32Value(int32(i+k)).Level(min(k, 1), 1, 0))
		}
		for k := range nb {
			row = append(row, parquet.Int32Value(int32(-i-k)).Level(min(k, 1), 1, 1))
		}
		rows = append(rows, row)
	}
	src := t.TempDir()
	pqfixture.Raw(sch, rows...).RowGroupRows(5).WriteFile(t, filepath.Join(src, "a.parquet"))
	p := featuretest.MakePlan(t, src, jagSeqCfg)
	both, err := feature.ParseSpec([]byte(`tensors: [{name: a, column: ev.a, dtype: I32, list: {jagged: true}}, {name: b, column: ev.b, dtype: I32, list: {jagged: true}}]`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := `a.parquet: column "ev.b", row group 1, row 2: corrupt parquet data: the leaves of "ev" disagree on this row (2 entries in "ev.a", 1 in "ev.b"); the columns of one list or map hold the same entries in every row`
	for _, limit := range []int64{0, 1} {
		_, err := Run(context.Background(), Options{Plan: p, Spec: both, Output: filepath.Join(t.TempDir(), "o"), Jobs: 2, MemoryLimit: limit})
		if err == nil || err.Error() != want || !errors.Is(err, pqread.ErrCorrupt) {
			t.Errorf("limit %d: error\n  %v\nwant\n  %s", limit, err, want)
		}
		_, err = feature.Materialize(context.Background(), nil, p, both, []uint64{0, 7}, feature.Bounds{Memory: limit})
		if err == nil || err.Error() != want {
			t.Errorf("Materialize limit %d: error\n  %v\nwant\n  %s", limit, err, want)
		}
	}
	one, err := feature.ParseSpec([]byte(`tensors: [{name: a, column: ev.a, dtype: I32, list: {jagged: true}}]`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := feature.Materialize(context.Background(), nil, p, one, []uint64{7}, feature.Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Sample(0, 0); !bytes.Equal(got, []byte{7, 0, 0, 0, 8, 0, 0, 0}) {
		t.Errorf("ev.a of row 7 = %x", got)
	}
}
