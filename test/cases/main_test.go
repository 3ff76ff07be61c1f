// Package cases runs the field cases of testdata/cases (indexed in its
// README.md) through the prep binary the way a user would: prep plan, prep
// convert with a feature spec from testdata/<case>/, then prep export, verify,
// load or inspect, and compares the result with the exact values or the error
// contract in the case's case.json.
//
// The binary is built once per test run into a temporary directory. Every
// test works in its own t.TempDir(); nothing is read from outside the
// repository.
package cases

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prepml/prep/internal/npy"
	"github.com/prepml/prep/internal/testutil"
)

var prepBin string

func TestMain(m *testing.M) {
	testutil.MainWithPrep(m, "prep-cases-bin-", &prepBin, nil)
}

// casesDir is the repository's copy of the field cases.
const casesDir = "../../testdata/cases"

// result is one finished prep command.
type result = testutil.Result

// prep runs the binary with args and returns how it ended. It fails the test
// only when the binary cannot be started.
func prep(t testing.TB, args ...string) result {
	t.Helper()
	return testutil.Run(t, exec.Command(prepBin, args...), args)
}

// noOutput fails the test when dir holds anything at all: no shard,
// manifest, plan, staging, lock or temporary file may survive a failed run.
// A directory that does not exist is fine.
func noOutput(t testing.TB, dir string) {
	t.Helper()
	var left []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			left = append(left, rel)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("failed run left %d entries in %s: %q", len(left), dir, left)
	}
}

// fieldCase is one parsed case.json (numbers kept as json.Number, so 64-bit
// integers stay exact) and its folder.
type fieldCase struct {
	id, dir string
	doc     map[string]any
}

// loadCase reads the case.json of the case whose folder starts with id.
func loadCase(t testing.TB, id string) *fieldCase {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(casesDir, id+"-*"))
	if err != nil || len(m) != 1 {
		t.Fatalf("case %s: folders %q (%v)", id, m, err)
	}
	b, err := os.ReadFile(filepath.Join(m[0], "case.json"))
	if err != nil {
		t.Fatal(err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	c := &fieldCase{id: id, dir: m[0]}
	if err := d.Decode(&c.doc); err != nil {
		t.Fatalf("case %s: %v", id, err)
	}
	return c
}

// get walks the document by object keys (string) and array indexes (int).
func (c *fieldCase) get(t testing.TB, path ...any) any {
	t.Helper()
	var v any = c.doc
	for i, k := range path {
		switch k := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("case %s: %v is not an object", c.id, path[:i])
			}
			if v, ok = m[k]; !ok {
				t.Fatalf("case %s: no %v", c.id, path[:i+1])
			}
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("case %s: %v is not an array of more than %d", c.id, path[:i], k)
			}
			v = a[k]
		}
	}
	return v
}

func (c *fieldCase) list(t testing.TB, path ...any) []any {
	t.Helper()
	a, ok := c.get(t, path...).([]any)
	if !ok {
		t.Fatalf("case %s: %v is not an array", c.id, path)
	}
	return a
}

func (c *fieldCase) str(t testing.TB, path ...any) string {
	t.Helper()
	s, ok := c.get(t, path...).(string)
	if !ok {
		t.Fatalf("case %s: %v is not a string", c.id, path)
	}
	return s
}

func (c *fieldCase) strs(t testing.TB, path ...any) []string {
	t.Helper()
	var out []string
	for _, v := range c.list(t, path...) {
		out = append(out, v.(string))
	}
	return out
}

func (c *fieldCase) int(t testing.TB, path ...any) int64 {
	t.Helper()
	return jsonInt(t, c.get(t, path...))
}

func (c *fieldCase) ints(t testing.TB, path ...any) []int64 {
	t.Helper()
	var out []int64
	for _, v := range c.list(t, path...) {
		out = append(out, jsonInt(t, v))
	}
	return out
}

func jsonInt(t testing.TB, v any) int64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%v is not a number", v)
	}
	i, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil {
		t.Fatalf("%v is not an integer: %v", v, err)
	}
	return i
}

// caseRun is one user session over a case: a private source folder holding
// copies of the case's files, a plan, and output folders.
type caseRun struct {
	t        *testing.T
	dir, src string
	plan     string
	specDir  string // testdata/<case folder>/ in this package
}

// newRun copies the named files of case c into a fresh source folder.
func newRun(t *testing.T, c *fieldCase, files ...string) *caseRun {
	t.Helper()
	dir := t.TempDir()
	r := &caseRun{t: t, dir: dir, src: filepath.Join(dir, "src"), plan: filepath.Join(dir, "plan.json"),
		specDir: filepath.Join("testdata", filepath.Base(c.dir))}
	if err := os.Mkdir(r.src, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		copyFile(t, filepath.Join(c.dir, f), filepath.Join(r.src, f))
	}
	return r
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// planAll plans every sample of the source as one batch of one rank, in
// source order: export of step 0 then gives every row in file order.
func (r *caseRun) planAll(samples int) {
	r.t.Helper()
	prep(r.t, "plan", "--source", r.src, "--global-batch", strconv.Itoa(samples), "--shuffle", "none",
		"--remainder", "partial", "-o", r.plan).OK(r.t)
}

// spec returns the path of a spec file of this case.
func (r *caseRun) spec(name string) string {
	r.t.Helper()
	p := filepath.Join(r.specDir, name)
	if _, err := os.Stat(p); err != nil {
		r.t.Fatal(err)
	}
	return p
}

// convert runs prep convert with the named spec into a fresh output folder
// and returns the folder and the result.
func (r *caseRun) convert(spec string, extra ...string) (string, result) {
	r.t.Helper()
	out, err := os.MkdirTemp(r.dir, "out-")
	if err != nil {
		r.t.Fatal(err)
	}
	out = filepath.Join(out, "shards")
	args := append([]string{"convert", "--plan", r.plan, "--spec", r.spec(spec), "-o", out, "--progress", "never"}, extra...)
	return out, prep(r.t, args...)
}

// converted runs convert with the named spec, requires it to succeed and
// exports step 0 of epoch 0, rank 0 (after planAll: every row in file
// order).
func (r *caseRun) converted(spec string, extra ...string) map[string]array {
	r.t.Helper()
	out, res := r.convert(spec, extra...)
	res.OK(r.t)
	return r.export(out, 0, 0, 0)
}

// convertFails runs convert with the named spec and checks the error
// contract: a clean failure whose stderr names every string of mustName, and
// nothing left in the output folder.
func (r *caseRun) convertFails(spec string, mustName ...string) {
	r.t.Helper()
	out, res := r.convert(spec)
	res.Failed(r.t, mustName...)
	noOutput(r.t, out)
}

// array is one exported .npy file.
type array struct {
	descr string
	shape []int
	data  []byte
}

// export runs prep export for one batch and reads every .npy file back.
func (r *caseRun) export(out string, epoch, rank, step int) map[string]array {
	r.t.Helper()
	dst, err := os.MkdirTemp(r.dir, "export-")
	if err != nil {
		r.t.Fatal(err)
	}
	prep(r.t, "export", out, "--epoch", strconv.Itoa(epoch), "--rank", strconv.Itoa(rank),
		"--step", strconv.Itoa(step), "-o", dst).OK(r.t)
	return readNPYDir(r.t, dst)
}

func readNPYDir(t testing.TB, dir string) map[string]array {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.npy"))
	if err != nil {
		t.Fatal(err)
	}
	arrays := map[string]array{}
	for _, p := range m {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		h, err := npy.ReadHeader(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if h.FortranOrder {
			t.Fatalf("%s: Fortran order", p)
		}
		arrays[strings.TrimSuffix(filepath.Base(p), ".npy")] = array{descr: h.Descr, shape: h.Shape, data: b[h.DataOffset:]}
	}
	return arrays
}

// tensor returns the exported array name with the wanted descr.
func tensor(t testing.TB, a map[string]array, name, descr string) array {
	t.Helper()
	v, ok := a[name]
	if !ok {
		keys := make([]string, 0, len(a))
		for k := range a {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		t.Fatalf("no exported tensor %q (have %q)", name, keys)
	}
	if v.descr != descr {
		t.Fatalf("tensor %q has descr %q, want %q", name, v.descr, descr)
	}
	return v
}

func (a array) u8() []uint8 { return a.data }

func (a array) i32() []int32  { return littleEndian[int32](a.data) }
func (a array) i64() []int64  { return littleEndian[int64](a.data) }
func (a array) u16() []uint16 { return littleEndian[uint16](a.data) }
func (a array) u32() []uint32 { return littleEndian[uint32](a.data) }
func (a array) u64() []uint64 { return littleEndian[uint64](a.data) }

// littleEndian decodes data as a little-endian array of T; trailing bytes
// too few for one more T are ignored.
func littleEndian[T int32 | int64 | uint16 | uint32 | uint64](data []byte) []T {
	size := binary.Size(T(0))
	out := make([]T, len(data)/size)
	if _, err := binary.Decode(data[:len(out)*size], binary.LittleEndian, out); err != nil {
		panic(err) // cannot happen: the length is exact
	}
	return out
}

func (a array) bools() []bool {
	out := make([]bool, len(a.data))
	for i, b := range a.data {
		out[i] = b != 0
	}
	return out
}

// flatten turns nested JSON arrays into one row-major list.
func flatten(v any) []any {
	a, ok := v.([]any)
	if !ok {
		return []any{v}
	}
	var out []any
	for _, e := range a {
		out = append(out, flatten(e)...)
	}
	return out
}

// wantFloat is one expected float from case.json: nil (a null: not
// compared), a JSON number (the nearest value of the dtype), or "NaN" (any
// NaN), "+Inf", "-Inf", "-0.0".
func floatOK(t testing.TB, want any, bits uint64, is32 bool) bool {
	t.Helper()
	got := math.Float64frombits(bits)
	if is32 {
		got = float64(math.Float32frombits(uint32(bits)))
	}
	switch w := want.(type) {
	case nil:
		return true
	case string:
		switch w {
		case "NaN":
			return math.IsNaN(got)
		case "+Inf":
			return math.IsInf(got, 1)
		case "-Inf":
			return math.IsInf(got, -1)
		case "-0.0":
			return got == 0 && math.Signbit(got)
		}
		t.Fatalf("unknown float %q in case.json", w)
	case json.Number:
		f, err := strconv.ParseFloat(w.String(), 64)
		if err != nil {
			t.Fatal(err)
		}
		if is32 {
			return math.Float32bits(float32(f)) == uint32(bits)
		}
		return math.Float64bits(f) == bits
	}
	t.Fatalf("unexpected %T %v in case.json", want, want)
	return false
}

// checkFloats compares float values (F32 when is32, else F64) with the
// expected list, and with the hex bit patterns when bitsHex is not nil (a
// nil entry there is a null, not compared).
func checkFloats(t testing.TB, what string, got []uint64, is32 bool, want []any, bitsHex []any) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i, w := range want {
		if !floatOK(t, w, got[i], is32) {
			t.Errorf("%s[%d] = %s, want %v", what, i, hexBits(got[i], is32), w)
		}
		if bitsHex != nil && bitsHex[i] != nil {
			if h := hexBits(got[i], is32); !strings.EqualFold(h, bitsHex[i].(string)) {
				t.Errorf("%s[%d] bits %s, want %s", what, i, h, bitsHex[i])
			}
		}
	}
}

func hexBits(b uint64, is32 bool) string {
	if is32 {
		return fmt.Sprintf("%08x", uint32(b))
	}
	return fmt.Sprintf("%016x", b)
}

func widen32(v []uint32) []uint64 {
	out := make([]uint64, len(v))
	for i, x := range v {
		out[i] = uint64(x)
	}
	return out
}

// checkInts compares integers with the expected JSON list.
func checkInts(t testing.TB, what string, got []int64, want []int64) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// checkEachIDOnce sorts ids in place and fails the test unless they are
// 0, 1, ..., len(ids)-1, each once; it returns their sum.
func checkEachIDOnce(t testing.TB, ids []int64) (sum int64) {
	t.Helper()
	slices.Sort(ids)
	for i, id := range ids {
		sum += id
		if id != int64(i) {
			t.Fatalf("sorted ids[%d] = %d: not ids 0..%d once each", i, id, len(ids)-1)
		}
	}
	return sum
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func i64LE(v []int64) []byte {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return b
}

func writeFile(t testing.TB, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readJSON decodes the JSON file at path into v, failing the test when it
// cannot be read or decoded.
func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// fileDigests returns the sha256 of every regular file under dir by relative
// path.
func fileDigests(t testing.TB, dir string) map[string]string {
	t.Helper()
	return testutil.TreeDigests(t, dir)
}
