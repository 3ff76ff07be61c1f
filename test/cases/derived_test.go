package cases

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prepml/prep/internal/duckdbtest"
)

// Every derived tensor end to end: row masks, lengths, element masks, inner
// lengths and the offsets of each jagged tensor, of every list, map,
// list-of-structs and list-of-lists layout, in both bytes modes (hash and
// pad), with null rows, empty rows, null elements and null inner lists.
// DuckDB writes the source (two files, three row groups), prep plans it over
// two ranks with a padded last batch, converts it with
// testdata/jagged/derived.yaml and exports every batch; each tensor's
// declared shape and each sample's bytes must be what DuckDB's reading of
// the sample's row gives, by the rules of feature/SPEC.md (the hash is Go's
// hash/fnv FNV-1a 64).

// derivedRows is the number of rows of the source: 400 in a.parquet (row
// groups of 256 and 144), 220 in b.parquet.
const derivedRows = 620

// derivedSQL writes the source; {a} and {b} stand for the quoted paths of
// a.parquet and b.parquet.
const derivedSQL = `SET threads = 1;
CREATE TABLE t AS SELECT i::BIGINT AS id,
  CASE WHEN i % 13 = 4 THEN NULL WHEN i % 11 = 3 THEN []::VARCHAR[]
       ELSE list_transform(range(i % 6 + 1), j -> CASE WHEN (i + j) % 5 = 2 THEN NULL ELSE repeat(chr(97 + ((i + j) % 26)::INTEGER), ((i * 3 + j) % 10)::INTEGER) END) END AS ls,
  CASE WHEN i % 10 = 7 THEN NULL
       ELSE list_transform(range(i % 4), j -> {'a': CASE WHEN (i + j) % 4 = 1 THEN NULL ELSE 'e' || (i * j)::VARCHAR END, 'b': (i + j)::INTEGER}) END AS ev,
  CASE WHEN i % 9 = 2 THEN NULL
       ELSE map_from_entries(list_transform(range(i % 4), j -> {'k': 'k' || j::VARCHAR || repeat('x', (i % 5)::INTEGER), 'v': CASE WHEN (i + j) % 3 = 0 THEN NULL ELSE (i * 0.5 + j)::DOUBLE END})) END AS ms,
  CASE WHEN i % 8 = 5 THEN NULL
       ELSE map_from_entries(list_transform(range(i % 3), j -> {'k': (j * 2 + i % 5)::INTEGER, 'v': CASE WHEN (i + j) % 4 = 2 THEN NULL ELSE (i * 7 - j)::INTEGER END})) END AS mi,
  CASE WHEN i % 12 = 5 THEN NULL
       ELSE list_transform(range(i % 4), j -> CASE WHEN (i + j) % 7 = 3 THEN NULL ELSE list_transform(range((i + j) % 3), k -> CASE WHEN (i + k) % 5 = 1 THEN NULL ELSE 'v' || (i * 10 + j * 3 + k)::VARCHAR END) END) END AS lls,
  CASE WHEN i % 12 = 7 THEN NULL
       ELSE list_transform(range(i % 4), j -> CASE WHEN (i + j) % 7 = 4 THEN NULL ELSE list_transform(range((i + j) % 3), k -> CASE WHEN (i + k) % 5 = 2 THEN NULL ELSE (i * 10 + j * 3 + k)::INTEGER END) END) END AS lli,
  CASE WHEN i % 14 = 6 THEN NULL
       ELSE list_transform(range(i % 6), j -> CASE WHEN (i + j) % 5 = 0 THEN NULL ELSE (i * 100 + j)::INTEGER END) END AS ln,
  CASE WHEN i % 8 = 3 THEN NULL ELSE 'str' || repeat('z', (i % 11)::INTEGER) END AS s
FROM range(620) r(i);
COPY (SELECT * FROM t WHERE id < 400 ORDER BY id) TO {a} (FORMAT parquet, ROW_GROUP_SIZE 256);
COPY (SELECT * FROM t WHERE id >= 400 ORDER BY id) TO {b} (FORMAT parquet, ROW_GROUP_SIZE 256)`

// derivedCol is one source column's index in a duckdbRows row.
const (
	dID = iota
	dLS
	dEV
	dMS
	dMI
	dLLS
	dLLI
	dLN
	dS
)

// exportedSample is what a sample holds of every exported tensor: for a
// fixed tensor its bytes, for a jagged one its values' bytes, back to back.
type exportedSample map[string][]byte

// derivedTensor is an exported tensor's expected descr and shape: per
// sample (fixed) or per value (jagged).
type derivedTensor struct {
	descr  string
	shape  []int
	jagged bool
	// offsetsOf, for a jagged tensor, names the tensor whose offsets it
	// shares ("" for its own values alone).
	offsetsOf string
}

// derivedTensors is every tensor of derived.yaml, by exported name.
var derivedTensors = map[string]derivedTensor{
	"id":                   {"<i8", nil, false, ""},
	"ls_pad":               {"|u1", []int{8}, true, ""},
	"ls_pad_mask":          {"|u1", nil, false, ""},
	"ls_pad_element_mask":  {"|u1", nil, true, "ls_pad"},
	"ls_hash":              {"<i8", nil, true, "ls_pad"},
	"ls_hash_mask":         {"|u1", nil, false, ""},
	"ls_hash_element_mask": {"|u1", nil, true, "ls_pad"},
	"ev_pad":               {"|u1", []int{6}, true, ""},
	"ev_pad_mask":          {"|u1", nil, false, ""},
	"ev_pad_element_mask":  {"|u1", nil, true, "ev_pad"},
	"ev_hash":              {"<i8", nil, true, "ev_pad"},
	"ev_hash_mask":         {"|u1", nil, false, ""},
	"ev_hash_element_mask": {"|u1", nil, true, "ev_pad"},
	"ev_b":                 {"<i4", nil, true, "ev_pad"},
	"ev_b_mask":            {"|u1", nil, false, ""},
	"msp.keys":             {"|u1", []int{8}, true, ""},
	"msp.values":           {"<f8", nil, true, "msp.keys"},
	"msp_mask":             {"|u1", nil, false, ""},
	"msp_element_mask":     {"|u1", nil, true, "msp.keys"},
	"msh.keys":             {"<i8", nil, true, "msp.keys"},
	"msh.values":           {"<f8", nil, true, "msp.keys"},
	"msh_mask":             {"|u1", nil, false, ""},
	"msh_element_mask":     {"|u1", nil, true, "msp.keys"},
	"mi.keys":              {"<i4", nil, true, ""},
	"mi.values":            {"<i8", nil, true, "mi.keys"},
	"mi_mask":              {"|u1", nil, false, ""},
	"mi_element_mask":      {"|u1", nil, true, "mi.keys"},
	"md":                   {"<i8", []int{4}, false, ""},
	"md_mask":              {"|u1", nil, false, ""},
	"llp":                  {"|u1", []int{5}, true, ""},
	"llp_mask":             {"|u1", nil, false, ""},
	"llp_element_mask":     {"|u1", nil, true, "llp"},
	"llp_inner_lengths":    {"<i8", nil, true, ""},
	"llh":                  {"<i8", nil, true, "llp"},
	"llh_mask":             {"|u1", nil, false, ""},
	"llh_element_mask":     {"|u1", nil, true, "llp"},
	"llh_inner_lengths":    {"<i8", nil, true, "llp_inner_lengths"},
	"lli":                  {"<i4", nil, true, ""},
	"lli_mask":             {"|u1", nil, false, ""},
	"lli_element_mask":     {"|u1", nil, true, "lli"},
	"lli_inner_lengths":    {"<i8", nil, true, ""},
	"lnf":                  {"<i4", []int{4}, false, ""},
	"lnf_mask":             {"|u1", nil, false, ""},
	"lnf_element_mask":     {"|u1", []int{4}, false, ""},
	"lnf_lengths":          {"<i8", nil, false, ""},
	"lnj":                  {"<i4", nil, true, ""},
	"lnj_mask":             {"|u1", nil, false, ""},
	"lnj_element_mask":     {"|u1", nil, true, "lnj"},
	"sp":                   {"|u1", []int{8}, false, ""},
	"sp_mask":              {"|u1", nil, false, ""},
	"sp_lengths":           {"<i4", nil, false, ""},
	"sh":                   {"<i8", nil, false, ""},
	"sh_mask":              {"|u1", nil, false, ""},
}

// descrSize is the bytes of one element of an exported descr.
func descrSize(t *testing.T, d string) int {
	switch d {
	case "|u1":
		return 1
	case "<i4":
		return 4
	case "<i8", "<f8":
		return 8
	}
	t.Fatalf("descr %s not handled by the test", d)
	return 0
}

// exportedSamples reads every tensor of derivedTensors from an export of
// count samples, checking each file's descr and shape ([count, shape...]
// for a fixed tensor; [N, shape...] values and [count+1] offsets from 0 to
// N, never decreasing, for a jagged one, equal to those of the tensor whose
// offsets it shares), and returns each sample's bytes.
func exportedSamples(t *testing.T, a map[string]array, count int) []exportedSample {
	t.Helper()
	for name := range a {
		if _, ok := derivedTensors[name]; !ok && name != "sample_ids" && name != "pad_mask" && !strings.HasSuffix(name, "_offsets") {
			t.Errorf("exported tensor %q is not in derived.yaml's list of tensors", name)
		}
	}
	out := make([]exportedSample, count)
	for k := range out {
		out[k] = exportedSample{}
	}
	offsets := map[string][]int64{}
	for name, d := range derivedTensors {
		v := tensor(t, a, name, d.descr)
		per := descrSize(t, d.descr)
		for _, s := range d.shape {
			per *= s
		}
		if !d.jagged {
			if want := append([]int{count}, d.shape...); !slices.Equal(v.shape, want) {
				t.Errorf("%s: shape %v, want %v", name, v.shape, want)
				continue
			}
			for k := range count {
				out[k][name] = v.data[k*per : (k+1)*per]
			}
			continue
		}
		off := tensor(t, a, name+"_offsets", "<i8")
		o := off.i64()
		n := len(v.data) / per
		if want := append([]int{n}, d.shape...); !slices.Equal(v.shape, want) || len(v.data) != n*per {
			t.Errorf("%s: shape %v, %d bytes; want %v (%d bytes per value)", name, v.shape, len(v.data), want, per)
			continue
		}
		if !slices.Equal(off.shape, []int{count + 1}) || o[0] != 0 || o[count] != int64(n) {
			t.Errorf("%s_offsets: shape %v, %v; want [%d] from 0 to %d", name, off.shape, o, count+1, n)
			continue
		}
		for k := range count {
			if o[k+1] < o[k] {
				t.Fatalf("%s_offsets decrease at %d: %v", name, k, o[k:k+2])
			}
			out[k][name] = v.data[o[k]*int64(per) : o[k+1]*int64(per)]
		}
		offsets[name] = o
	}
	for name, d := range derivedTensors {
		if d.offsetsOf != "" && offsets[name] != nil && offsets[d.offsetsOf] != nil && !slices.Equal(offsets[name], offsets[d.offsetsOf]) {
			t.Errorf("%s_offsets %v differ from %s_offsets %v", name, offsets[name], d.offsetsOf, offsets[d.offsetsOf])
		}
	}
	return out
}

// Expected bytes, little-endian.
func b32(v int64) []byte    { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }
func b64(v int64) []byte    { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }
func bf64(v float64) []byte { return binary.LittleEndian.AppendUint64(nil, math.Float64bits(v)) }

// padded is s's bytes cut or zero-padded to n.
func padded(s string, n int) []byte {
	b := make([]byte, n)
	copy(b, s)
	return b
}

// hashed is FNV-1a 64 of s modulo buckets, as I64.
func hashed(s string, buckets uint64) []byte {
	h := fnv.New64a()
	h.Write([]byte(s))
	return b64(int64(h.Sum64() % buckets))
}

// expectedSample is what derived.yaml makes of one DuckDB row, by
// feature/SPEC.md.
func expectedSample(t *testing.T, row []any) exportedSample {
	t.Helper()
	e := exportedSample{}
	add := func(name string, b ...[]byte) {
		if _, ok := e[name]; !ok {
			e[name] = []byte{}
		}
		for _, x := range b {
			e[name] = append(e[name], x...)
		}
	}
	mask := func(name string, v any) bool {
		if v == nil {
			add(name, []byte{0})
			return false
		}
		add(name, []byte{1})
		return true
	}
	elem := func(valid bool) []byte {
		if valid {
			return []byte{1}
		}
		return []byte{0}
	}
	str := func(v any) string { return v.(string) }
	add("id", b64(duckdbtest.Int64(t, row[dID])))

	// ls: a list of strings.
	for _, n := range []string{"ls_pad", "ls_pad_element_mask", "ls_hash", "ls_hash_element_mask"} {
		add(n)
	}
	mask("ls_hash_mask", row[dLS])
	if mask("ls_pad_mask", row[dLS]) {
		for _, x := range duckdbtest.List(t, row[dLS]) {
			if x == nil {
				add("ls_pad", make([]byte, 8))
				add("ls_hash", b64(0))
			} else {
				add("ls_pad", padded(str(x), 8))
				add("ls_hash", hashed(str(x), 1000003))
			}
			add("ls_pad_element_mask", elem(x != nil))
			add("ls_hash_element_mask", elem(x != nil))
		}
	}

	// ev: a list of structs {a VARCHAR, b INTEGER}.
	for _, n := range []string{"ev_pad", "ev_pad_element_mask", "ev_hash", "ev_hash_element_mask", "ev_b"} {
		add(n)
	}
	mask("ev_hash_mask", row[dEV])
	mask("ev_b_mask", row[dEV])
	if mask("ev_pad_mask", row[dEV]) {
		for _, x := range duckdbtest.List(t, row[dEV]) {
			s := x.(map[string]any)
			if s["a"] == nil {
				add("ev_pad", make([]byte, 6))
				add("ev_hash", b64(-5))
			} else {
				add("ev_pad", padded(str(s["a"]), 6))
				add("ev_hash", hashed(str(s["a"]), 97))
			}
			add("ev_pad_element_mask", elem(s["a"] != nil))
			add("ev_hash_element_mask", elem(s["a"] != nil))
			add("ev_b", b32(duckdbtest.Int64(t, s["b"])))
		}
	}

	// ms: MAP(VARCHAR, DOUBLE).
	for _, n := range []string{"msp.keys", "msp.values", "msp_element_mask", "msh.keys", "msh.values", "msh_element_mask"} {
		add(n)
	}
	mask("msh_mask", row[dMS])
	if mask("msp_mask", row[dMS]) {
		for _, x := range duckdbtest.List(t, row[dMS]) {
			kv := x.(map[string]any)
			k := str(kv["key"])
			add("msp.keys", padded(k, 8))
			add("msh.keys", hashed(k, 1009))
			if kv["value"] == nil {
				add("msp.values", bf64(-1))
				add("msh.values", bf64(0))
			} else {
				add("msp.values", bf64(duckdbtest.Float64(t, kv["value"])))
				add("msh.values", bf64(duckdbtest.Float64(t, kv["value"])))
			}
			add("msp_element_mask", elem(kv["value"] != nil))
			add("msh_element_mask", elem(kv["value"] != nil))
		}
	}

	// mi: MAP(INTEGER, INTEGER), jagged and dense over keys 0, 2, 4, 6.
	for _, n := range []string{"mi.keys", "mi.values", "mi_element_mask"} {
		add(n)
	}
	dense := [][]byte{b64(-3), b64(-3), b64(-3), b64(-3)}
	mask("md_mask", row[dMI])
	if mask("mi_mask", row[dMI]) {
		for _, x := range duckdbtest.List(t, row[dMI]) {
			kv := x.(map[string]any)
			k := duckdbtest.Int64(t, kv["key"])
			v := int64(-1)
			if kv["value"] != nil {
				v = duckdbtest.Int64(t, kv["value"])
			}
			add("mi.keys", b32(k))
			add("mi.values", b64(v))
			add("mi_element_mask", elem(kv["value"] != nil))
			if i := slices.Index([]int64{0, 2, 4, 6}, k); i >= 0 {
				if kv["value"] == nil {
					v = -4
				}
				dense[i] = b64(v)
			}
		}
	}
	add("md", dense...)

	// lls and lli: lists of lists.
	for _, n := range []string{"llp", "llp_element_mask", "llp_inner_lengths", "llh", "llh_element_mask", "llh_inner_lengths", "lli", "lli_element_mask", "lli_inner_lengths"} {
		add(n)
	}
	mask("llh_mask", row[dLLS])
	if mask("llp_mask", row[dLLS]) {
		for _, in := range duckdbtest.List(t, row[dLLS]) {
			var l []any
			if in != nil {
				l = duckdbtest.List(t, in)
			}
			add("llp_inner_lengths", b64(int64(len(l))))
			add("llh_inner_lengths", b64(int64(len(l))))
			for _, x := range l {
				if x == nil {
					add("llp", make([]byte, 5))
					add("llh", b64(7))
				} else {
					add("llp", padded(str(x), 5))
					add("llh", hashed(str(x), 1000))
				}
				add("llp_element_mask", elem(x != nil))
				add("llh_element_mask", elem(x != nil))
			}
		}
	}
	if mask("lli_mask", row[dLLI]) {
		for _, in := range duckdbtest.List(t, row[dLLI]) {
			var l []any
			if in != nil {
				l = duckdbtest.List(t, in)
			}
			add("lli_inner_lengths", b64(int64(len(l))))
			for _, x := range l {
				v := int64(-1)
				if x != nil {
					v = duckdbtest.Int64(t, x)
				}
				add("lli", b32(v))
				add("lli_element_mask", elem(x != nil))
			}
		}
	}

	// ln: a list of integers, fixed [4] and jagged.
	add("lnj")
	add("lnj_element_mask")
	mask("lnj_mask", row[dLN])
	if !mask("lnf_mask", row[dLN]) {
		add("lnf", b32(-2), b32(-2), b32(-2), b32(-2))
		add("lnf_element_mask", []byte{0, 0, 0, 0})
		add("lnf_lengths", b64(0))
	} else {
		l := duckdbtest.List(t, row[dLN])
		for j := range 4 {
			switch {
			case j >= len(l):
				add("lnf", b32(-9))
				add("lnf_element_mask", []byte{0})
			case l[j] == nil:
				add("lnf", b32(-1))
				add("lnf_element_mask", []byte{0})
			default:
				add("lnf", b32(duckdbtest.Int64(t, l[j])))
				add("lnf_element_mask", []byte{1})
			}
		}
		add("lnf_lengths", b64(int64(len(l))))
		for _, x := range l {
			v := int64(0)
			if x != nil {
				v = duckdbtest.Int64(t, x)
			}
			add("lnj", b32(v))
			add("lnj_element_mask", elem(x != nil))
		}
	}

	// s: a string column.
	mask("sh_mask", row[dS])
	if mask("sp_mask", row[dS]) {
		add("sp", padded(str(row[dS]), 8))
		add("sp_lengths", b32(int64(len(str(row[dS])))))
		add("sh", hashed(str(row[dS]), 97))
	} else {
		add("sp", make([]byte, 8))
		add("sp_lengths", b32(0))
		add("sh", b64(-1))
	}
	return e
}

// TestDerivedTensorsAgainstDuckDB converts the source with every derived
// tensor of every layout and bytes mode, checks every sample of every
// exported batch and each batch's pad flags, and runs verify --deep on the
// set (clean: its checks of derived tensors raise nothing on a right set).
// The pad flags: the plan's last global batch
// holds 20 rows and 180 pad samples, of which rank 0 (slots 0-99) takes 80
// and rank 1 100.
func TestDerivedTensorsAgainstDuckDB(t *testing.T) {
	duckdbtest.Require(t)
	dir := t.TempDir()
	r := &caseRun{t: t, dir: dir, src: filepath.Join(dir, "src"), plan: filepath.Join(dir, "plan.json"),
		specDir: filepath.Join("testdata", "jagged")}
	if err := os.Mkdir(r.src, 0o755); err != nil {
		t.Fatal(err)
	}
	duckdbtest.Query(t, strings.NewReplacer("{a}", duckdbtest.Quote(filepath.Join(r.src, "a.parquet")),
		"{b}", duckdbtest.Quote(filepath.Join(r.src, "b.parquet"))).Replace(derivedSQL))
	ref := duckdbRows(t, r.files(), "id", "ls", "ev", "ms", "mi", "lls", "lli", "ln", "s")
	if len(ref) != derivedRows {
		t.Fatalf("DuckDB read %d rows, want %d", len(ref), derivedRows)
	}
	prep(t, "plan", "--source", r.src, "--seed", "5", "--global-batch", "200", "--world-size", "2",
		"--shuffle", "global", "--remainder", "pad", "-o", r.plan).OK(t)
	// A small memory limit, so that the values arena is a file and the
	// shards are written batch by batch from it.
	out, res := r.convert("derived.yaml", "--memory-limit", "1MiB")
	res.OK(t)
	seen := map[int64]bool{}
	for rank := range 2 {
		for step := range 4 {
			a := r.export(out, 0, rank, step)
			ids := tensor(t, a, "sample_ids", "<i8").i64()
			if len(ids) != 100 {
				t.Fatalf("rank %d step %d: %d samples, want 100", rank, step, len(ids))
			}
			pads := 0
			for k, p := range tensor(t, a, "pad_mask", "|b1").u8() {
				if p != 0 {
					pads++
					if k < 100-wantPads(rank, step) {
						t.Errorf("rank %d step %d: slot %d flagged as pad before the batch's last %d", rank, step, k, wantPads(rank, step))
					}
				}
			}
			if pads != wantPads(rank, step) {
				t.Errorf("rank %d step %d: %d pad samples flagged, want %d", rank, step, pads, wantPads(rank, step))
			}
			for k, got := range exportedSamples(t, a, len(ids)) {
				id := ids[k]
				seen[id] = true
				want := expectedSample(t, ref[id])
				for name := range derivedTensors {
					if string(got[name]) != string(want[name]) {
						t.Errorf("rank %d step %d sample %d: %s = %v, want %v", rank, step, id, name, got[name], want[name])
					}
				}
			}
		}
	}
	if len(seen) != derivedRows {
		t.Errorf("the batches held %d distinct rows, want every one of the %d", len(seen), derivedRows)
	}
	// verify --deep, its checks of derived tensors on their own included,
	// finds nothing wrong with the set.
	prep(t, "verify", "--deep", out, "-q").OK(t)
}

// wantPads is the number of pad samples of a batch of TestDerivedTensorsAgainstDuckDB.
func wantPads(rank, step int) int {
	if step < 3 {
		return 0
	}
	return []int{80, 100}[rank]
}
