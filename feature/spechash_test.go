package feature

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/prepml/prep/feature/featuretest"
)

// specHashExample sets every key version 1 of the canonical form knows, with strings that JSON
// encoders escape differently (HTML characters, U+2028).
const specHashExample = `
tensors:
  - {name: "a<b>&c", column: "x\u2028y", dtype: I64, bytes: {mode: hash, buckets: 9223372036854775807}, max_value_bytes: 64}
  - {name: f, columns: [p, q], dtype: F16, shape: [2], nulls: {fill: NaN, mask: true}, nan: {policy: error}, cast: {round: nearest, widen: true, overflow: error}}
  - {name: g, column: e, dtype: U8, shape: [3], list: {pad: 0, truncate: true, lengths: true, lengths_dtype: I64, element_fill: 1, element_mask: true}}
  - {name: h, column: s, dtype: U8, bytes: {mode: pad, max_len: 5, truncate: true, lengths: true, lengths_dtype: I32}}
  - {name: k, columns_regex: '^f\d$', dtype: F16, cast: {from_unannotated: F16}}
`

// TestSpecHashGolden pins the canonical form and both hash versions of two
// specs. The version 2 values are SPEC.md's test vectors (its Python
// one-liner reproduces them); the version 1 values are what prep wrote
// before version 2 existed, so shard sets made then stay recognised.
func TestSpecHashGolden(t *testing.T) {
	for _, c := range []struct {
		name, yaml, canonical, v2, v1 string
	}{
		{"run_test fixture", featuretest.SpecYAML,
			`{"tensors":[{"column":"id","dtype":"I64","name":"id"},{"column":"x","dtype":"F16","name":"x"},{"column":"emb","dtype":"F32","list":{"lengths":true,"pad":"-1","truncate":true},"name":"emb","shape":[4]},{"bytes":{"buckets":1000,"mode":"hash"},"column":"label","dtype":"I64","name":"label"},{"column":"opt","dtype":"I32","name":"opt","nulls":{"fill":"-7","mask":true}}]}`,
			"v2:sha256:0ccc233d7bb852c0cb40034b81fc96be82e2c4a2b973b4d8518bd8f3f1027262",
			"sha256:94c7c15d0d46ef617aee5522f4e27d1263f845f521f7de4c8eb752ab7fd901a6"},
		{"every key", specHashExample,
			"{\"tensors\":[{\"bytes\":{\"buckets\":9223372036854775807,\"mode\":\"hash\"},\"column\":\"x\u2028y\",\"dtype\":\"I64\",\"max_value_bytes\":64,\"name\":\"a<b>&c\"},{\"cast\":{\"overflow\":\"error\",\"round\":\"nearest\",\"widen\":true},\"columns\":[\"p\",\"q\"],\"dtype\":\"F16\",\"name\":\"f\",\"nan\":{\"policy\":\"error\"},\"nulls\":{\"fill\":\"NaN\",\"mask\":true},\"shape\":[2]},{\"column\":\"e\",\"dtype\":\"U8\",\"list\":{\"element_fill\":\"1\",\"element_mask\":true,\"lengths\":true,\"lengths_dtype\":\"I64\",\"pad\":\"0\",\"truncate\":true},\"name\":\"g\",\"shape\":[3]},{\"bytes\":{\"lengths\":true,\"lengths_dtype\":\"I32\",\"max_len\":5,\"mode\":\"pad\",\"truncate\":true},\"column\":\"s\",\"dtype\":\"U8\",\"name\":\"h\"},{\"cast\":{\"from_unannotated\":\"F16\"},\"columns_regex\":\"^f\\\\d$\",\"dtype\":\"F16\",\"name\":\"k\"}]}",
			"v2:sha256:e863728bac2e175bd68e775b2ad12c45edd6eb9f9ededac80f14824e516cc85f",
			"sha256:a1eed9cf8c2773cccf77d3e7d983874bf0945d8b83b8b0b47ca9b77df6c901fa"},
	} {
		s, err := ParseSpec([]byte(c.yaml), "f.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if got := string(s.CanonicalJSON()); got != c.canonical {
			t.Errorf("%s: canonical form\n%s\nwant\n%s", c.name, got, c.canonical)
		}
		if got := s.Hash(); got != c.v2 {
			t.Errorf("%s: Hash() = %s, want %s", c.name, got, c.v2)
		}
		if got := s.hashV1(); got != c.v1 {
			t.Errorf("%s: version 1 hash %s, want %s", c.name, got, c.v1)
		}
		for _, h := range []string{c.v2, c.v1} {
			if !s.MatchesHash(h) {
				t.Errorf("%s: MatchesHash(%s) = false", c.name, h)
			}
		}
		for _, h := range []string{strings.Replace(c.v2, "v2:", "v3:", 1), "sha256:" + c.v2[len("v2:sha256:"):], c.v2[:len(c.v2)-1] + "0", ""} {
			if s.MatchesHash(h) {
				t.Errorf("%s: MatchesHash(%q) = true", c.name, h)
			}
		}
	}
}

// TestSpecHashKeyOrderAndDefaults: the hash is a function of what the spec
// says, not of how it is written: YAML key order, flow or block style, and
// keys given at their default value do not change it; any value does.
func TestSpecHashKeyOrderAndDefaults(t *testing.T) {
	a, err := ParseSpec([]byte("tensors:\n  - name: l\n    column: c\n    dtype: I64\n    bytes: {mode: hash, buckets: 7}\n"), "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseSpec([]byte("tensors: [{bytes: {buckets: 7, mode: hash, truncate: false, max_len: 0}, dtype: I64, column: c, name: l, columns: [], shape: [], max_value_bytes: 0}]"), "b")
	if err != nil {
		t.Fatal(err)
	}
	if a.Hash() != b.Hash() || string(a.CanonicalJSON()) != string(b.CanonicalJSON()) {
		t.Errorf("same spec, other text: %s vs %s", a.CanonicalJSON(), b.CanonicalJSON())
	}
	b.Tensors[0].Bytes.Buckets = 8
	if a.Hash() == b.Hash() {
		t.Error("hash ignores bytes.buckets")
	}
}

// TestSpecCanonicalStrings pins SPEC.md's string rule.
func TestSpecCanonicalStrings(t *testing.T) {
	got := string(appendString(nil, "q\"b\\\b\t\n\f\r\x01\x1f\x7f<é\u2028"))
	want := `"q\"b\\\b\t\n\f\r\u0001\u001f` + "\x7f<é\u2028\""
	if got != want {
		t.Errorf("appendString = %q, want %q", got, want)
	}
}

// TestSpecRejectsInvalidUTF8: the canonical form and the manifest are UTF-8,
// so a name that is not is refused before it can be hashed.
func TestSpecRejectsInvalidUTF8(t *testing.T) {
	s := &Spec{Tensors: []TensorSpec{{Name: "t", Column: "a\xffb", DType: "I64"}}}
	if err := s.Validate(); err == nil || err.Error() != `tensor "t": "a\xffb" is not valid UTF-8` {
		t.Errorf("Validate = %v", err)
	}
}

// TestSpecCanonicalFormIsPythonsJSON checks SPEC.md §5's claim that an
// independent implementation is a one-liner: Python's json.dumps with sorted
// keys, no white space and ensure_ascii off writes the canonical form of
// the same document, so its SHA-256 is the version 2 hash. Skipped where
// python3 is missing.
func TestSpecCanonicalFormIsPythonsJSON(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	const script = `import hashlib, json, sys
doc = json.loads(sys.stdin.buffer.read())
out = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
print("v2:sha256:" + hashlib.sha256(out).hexdigest())`
	for _, y := range []string{featuretest.SpecYAML, specHashExample, jaggedSpecExample, partSpec, "tensors:\n  - {name: plain, column: \"tab\\tq\\\"\\\\\\u0001\\u001f\", dtype: I64}\n"} {
		s, err := ParseSpec([]byte(y), "f.yaml")
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(py, "-c", script)
		cmd.Stdin = bytes.NewReader(s.CanonicalJSON())
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("python3: %v", err)
		}
		if got := strings.TrimSpace(string(out)); got != s.Hash() {
			t.Errorf("python's hash of %s\n= %s, Hash() = %s", s.CanonicalJSON(), got, s.Hash())
		}
	}
}

// jaggedSpecExample sets list.jagged (SPEC.md §6's jagged vector).
const jaggedSpecExample = `
tensors:
  - {name: v, column: v, dtype: I32, list: {jagged: true, element_fill: -1, element_mask: true}, nulls: {mask: true}}
  - {name: w, column: w, dtype: F16, list: {jagged: true}}
`

// TestSpecHashJagged pins the canonical form and hash of a spec with
// list.jagged, and that it matches no version 1 hash: version 1 has no
// word for the key, so its version 1 form would be that of the fixed
// list it is not.
func TestSpecHashJagged(t *testing.T) {
	s, err := ParseSpec([]byte(jaggedSpecExample), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const canonical = `{"tensors":[{"column":"v","dtype":"I32","list":{"element_fill":"-1","element_mask":true,"jagged":true},"name":"v","nulls":{"mask":true}},{"column":"w","dtype":"F16","list":{"jagged":true},"name":"w"}]}`
	if got := string(s.CanonicalJSON()); got != canonical {
		t.Errorf("canonical form\n%s\nwant\n%s", got, canonical)
	}
	const v2 = "v2:sha256:b24e5f0b75aa1534345a55eb445b72e02d1677f4fb1ea0db5e4b8f3fbd2f839a"
	if got := s.Hash(); got != v2 {
		t.Errorf("Hash() = %s, want %s", got, v2)
	}
	if !s.MatchesHash(v2) || s.MatchesHash(s.hashV1()) {
		t.Errorf("MatchesHash(v2) = %v, MatchesHash(its version 1 form) = %v", s.MatchesHash(v2), s.MatchesHash(s.hashV1()))
	}
}
