package feature

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseSpecExample(t *testing.T) {
	s, err := ParseSpec([]byte(`
tensors:
  - name: image
    columns_regex: '^\d+x\d+$'
    dtype: U8
    shape: [28, 28]
  - name: emb
    column: embedding
    dtype: F16
    shape: [50]
    list: {pad: 0, truncate: false, lengths: false}
    nulls: {fill: 0, mask: true}
  - name: label
    column: label
    dtype: I64
  - name: x
    column: x
    dtype: F32
    nulls: {fill: NaN}
    nan: {policy: error}
`), "features.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Tensors) != 4 || s.Tensors[0].Shape[1] != 28 || s.Tensors[1].List.Pad.String() != "0" || s.Tensors[3].Nulls.Fill.String() != "NaN" {
		t.Errorf("parsed %+v", s)
	}
	// The hash is over the parsed spec, not the text: reformatting keeps it.
	s2, err := ParseSpec([]byte("tensors: [{name: image, columns_regex: '^\\d+x\\d+$', dtype: U8, shape: [28, 28]}, {name: emb, column: embedding, dtype: F16, shape: [50], nulls: {mask: true, fill: 0}, list: {pad: 0}}, {name: label, column: label, dtype: I64}, {name: x, column: x, dtype: F32, nulls: {fill: nan}, nan: {policy: error}}]"), "b.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s.Hash() != s2.Hash() {
		t.Errorf("hash differs:\n%s\n%s", s.CanonicalJSON(), s2.CanonicalJSON())
	}
	s2.Tensors[2].DType = "I32"
	if s.Hash() == s2.Hash() {
		t.Errorf("hash ignores dtype")
	}
}

func TestParseSpecRejects(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		// An unknown key is named by its path, with the nearest key, the
		// policy it belongs under, or the valid keys; never a Go type.
		{"tensors:\n  - name: a\n    column: a\n    dtype: I64\n    colour: red\n", "line 5: unknown key tensors[0].colour (did you mean column?)"},
		{"tensor:\n  - {name: a, column: a, dtype: I64}\n", "line 1: unknown key tensor (did you mean tensors?)"},
		{"tensors:\n  - {name: a, column: a, dtype: I64}\n  - {name: b, column: b, dtype: I64, list: {pad: 0, lenghts: true}}\n", "line 3: unknown key tensors[1].list.lenghts (did you mean lengths?)"},
		{"tensors:\n  - {name: a, column: a, dtype: I64, jagged: true}\n", "line 2: unknown key tensors[0].jagged (it belongs under list: list.jagged)"},
		{"tensors:\n  - {name: a, column: a, dtype: I64, truncate: true}\n", "line 2: unknown key tensors[0].truncate (it belongs under bytes or list: bytes.truncate, list.truncate)"},
		{"tensors:\n  - {name: a, column: a, dtype: I64, zzzzzzz: 1}\n", "line 2: unknown key tensors[0].zzzzzzz (valid keys: bytes, cast, column, columns, columns_regex, dtype, image, list, map, max_value_bytes, name, nan, nulls, packed, partition, shape)"},
		// Regression: null and ~ keys passed the unknown-key check silently.
		{"tensors:\n  - name: a\n    column: a\n    dtype: I64\n    null: {fill: 0}\n", `line 5: key "null" is null, not a spec key`},
		{"tensors:\n  - name: a\n    column: a\n    dtype: I64\n    ~: 1\n", `line 5: key "~" is null, not a spec key`},
		{"~: 1\ntensors:\n  - name: a\n    column: a\n    dtype: I64\n", `line 1: key "~" is null`},
		{"tensors:\n  - name: a\n    column: a\n    dtype: I65\n", "unknown dtype"},
		{"tensors:\n  - name: a\n    dtype: I64\n", "exactly one of column"},
		{"tensors:\n  - {name: a, column: a, columns: [b], dtype: I64}\n", "exactly one of column"},
		{"tensors:\n  - {name: a, column: a, dtype: I64}\n  - {name: a, column: b, dtype: I64}\n", `"a" used twice`},
		{"tensors:\n  - {name: a, column: a, dtype: I64, nulls: {mask: true}}\n  - {name: a_mask, column: b, dtype: I64}\n", `"a_mask" used twice`},
		{"tensors:\n  - {name: a, column: a, dtype: I64, shape: [0]}\n", "every dimension"},
		{"tensors:\n  - {name: a, column: a, dtype: I64, nulls: {fill: lots}}\n", `"lots" is not a number`},
		{"tensors:\n  - {name: a, column: a, dtype: I32, bytes: {mode: hash, buckets: 10}}\n", "writes I64"},
		{"tensors:\n  - {name: a, column: a, dtype: U8, bytes: {mode: pad}}\n", "max_len > 0"},
		{"tensors:\n  - {name: a, column: a, dtype: F32, nan: {policy: drop}}\n", "pass or error"},
		{"tensors:\n  - {name: a, columns_regex: '(', dtype: F32}\n", "columns_regex"},
		{"", "empty document"},
		{"tensors: []\n", "no tensors"},
	} {
		_, err := ParseSpec([]byte(c.yaml), "f.yaml")
		if err == nil || !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "f.yaml: ") || strings.Contains(err.Error(), "convert.") {
			t.Errorf("%q: err = %v, want %q", c.yaml, err, c.want)
		}
	}
}

func TestParseTensorFlags(t *testing.T) {
	ts, err := ParseTensorFlags([]string{"label=label:I64", "pix=a,b,c,d:U8:2x2", "emb=emb:F16:50", "odd=x:y:F32"})
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%+v", ts)
	want := "[{Name:label Column:label Columns:[] ColumnsRegex: DType:I64 Shape:[] Nulls:<nil> NaN:<nil> List:<nil> Bytes:<nil> Map:<nil> Image:<nil> MaxValueBytes:0 Cast:<nil> Partition: Packed:<nil> fromFlag:true} " +
		"{Name:pix Column: Columns:[a b c d] ColumnsRegex: DType:U8 Shape:[2 2] Nulls:<nil> NaN:<nil> List:<nil> Bytes:<nil> Map:<nil> Image:<nil> MaxValueBytes:0 Cast:<nil> Partition: Packed:<nil> fromFlag:true} " +
		"{Name:emb Column:emb Columns:[] ColumnsRegex: DType:F16 Shape:[50] Nulls:<nil> NaN:<nil> List:<nil> Bytes:<nil> Map:<nil> Image:<nil> MaxValueBytes:0 Cast:<nil> Partition: Packed:<nil> fromFlag:true} " +
		"{Name:odd Column:x:y Columns:[] ColumnsRegex: DType:F32 Shape:[] Nulls:<nil> NaN:<nil> List:<nil> Bytes:<nil> Map:<nil> Image:<nil> MaxValueBytes:0 Cast:<nil> Partition: Packed:<nil> fromFlag:true}]"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	ts, err = ParseTensorFlags([]string{"v=v:I32:jagged", "c=a:b:I64:jagged"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].Column != "v" || ts[0].DType != "I32" || ts[0].Shape != nil || ts[0].List == nil || *ts[0].List != (ListPolicy{Jagged: true}) ||
		ts[1].Column != "a:b" || ts[1].DType != "I64" || ts[1].List == nil || !ts[1].List.Jagged {
		t.Errorf("jagged flags: %+v", ts)
	}
	spec := Spec{Tensors: ts[:1]}
	if err := spec.Validate(); err != nil {
		t.Errorf("v=v:I32:jagged: %v", err)
	}
	if got, want := spec.Hash(), mustSpec(t, "tensors: [{name: v, column: v, dtype: I32, list: {jagged: true}}]").Hash(); got != want {
		t.Errorf("v=v:I32:jagged hashes to %s, the spec file form to %s", got, want)
	}
	spec = Spec{Tensors: ts}
	spec.Tensors = append(spec.Tensors, TensorSpec{Name: "v_offsets", Column: "o", DType: "I64"})
	if err := spec.Validate(); err == nil || !strings.Contains(err.Error(), `tensor name "v_offsets" used twice: by tensor "v" (as the offsets of jagged "v"`) {
		t.Errorf("v_offsets beside v=v:I32:jagged: %v", err)
	}
	for _, c := range []struct{ flag, want string }{
		{"v=v:I32:jagged:4", `--tensor "v=v:I32:jagged:4": bad shape "jagged": want positive sizes joined by x, e.g. 50 or 28x28, or jagged`},
		{"v=v:jagged", `tensor "v": dtype: unknown dtype "jagged"`},
		{"nodtype", `--tensor "nodtype": want NAME=COL[,COL...]:DTYPE[:SHAPE] or NAME=COL:DTYPE:jagged`},
	} {
		ts, err := ParseTensorFlags([]string{c.flag})
		if err == nil {
			err = (&Spec{Tensors: ts}).Validate()
		}
		if err == nil || !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %s", c.flag, err, c.want)
		}
	}
	for _, bad := range []string{"nodtype", "a=b", "=x:I64"} {
		if _, err := ParseTensorFlags([]string{bad}); !errors.Is(err, ErrSpec) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestNumberCanonical(t *testing.T) {
	for in, want := range map[string]string{"0": "0", "-1": "-1", "1.5": "1.5", "2.0": "2.0", "nan": "NaN", ".inf": "+Inf", "-Inf": "-Inf", "1e3": "1000.0", "0x10": "16"} {
		n, err := ParseNumber(in)
		if err != nil || n.String() != want {
			t.Errorf("ParseNumber(%q) = %v, %v; want %s", in, n, err, want)
		}
	}
}

// TestSpecJSONRoundTrip: the manifest records the spec's canonical form;
// decoding it must give the same spec hash and canonical form (verify
// --deep relies on it).
func TestSpecJSONRoundTrip(t *testing.T) {
	s, err := ParseSpec([]byte(`
tensors:
  - {name: a, column: a, dtype: F32, nulls: {fill: NaN, mask: true}, nan: {policy: error}}
  - {name: b, columns: [x, y], dtype: I16, shape: [2], nulls: {fill: -1}, cast: {round: nearest, widen: true}}
  - {name: c, column: c, dtype: F16, shape: [3], list: {pad: 2.0, truncate: true, lengths: true, lengths_dtype: I64, element_fill: -Inf, element_mask: true}}
  - {name: d, column: d, dtype: U8, max_value_bytes: 100, bytes: {mode: pad, max_len: 8, truncate: true, lengths: true}}
  - {name: e, column: e, dtype: I64, bytes: {mode: hash, buckets: 4096}, nulls: {fill: 0}}
  - {name: h, column: h, dtype: F32, cast: {from_unannotated: F16}}
`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b := s.CanonicalJSON() // what the manifest records
	var back Spec
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if err := back.Validate(); err != nil {
		t.Fatal(err)
	}
	if back.Hash() != s.Hash() || string(back.CanonicalJSON()) != string(b) {
		t.Errorf("round trip changed the spec:\n%s\n%s", b, back.CanonicalJSON())
	}
}

// TestParseSpecSecondDocumentRefused pins a silent fault: a spec file with a
// second YAML document ("---" then more tensors) converted the first
// document's tensors only and ignored the rest without a word.
func TestParseSpecSecondDocumentRefused(t *testing.T) {
	for _, doc := range []string{
		"tensors:\n  - {name: a, column: a, dtype: I64}\n---\ntensors:\n  - {name: b, column: b, dtype: I64}\n",
		"tensors:\n  - {name: a, column: a, dtype: I64}\n---\n- 1\n",
	} {
		_, err := ParseSpec([]byte(doc), "f.yaml")
		if err == nil || !errors.Is(err, ErrSpec) || !strings.HasPrefix(err.Error(), "f.yaml: ") || !strings.Contains(err.Error(), "line 3: a second YAML document") {
			t.Errorf("%q: err = %v, want a refusal naming line 3", doc, err)
		}
	}
	// A document end marker or a bare trailing "---" adds nothing.
	for _, tail := range []string{"...\n", "---\n", "---\n# only a comment\n"} {
		if _, err := ParseSpec([]byte("tensors:\n  - {name: a, column: a, dtype: I64}\n"+tail), "f.yaml"); err != nil {
			t.Errorf("tail %q: %v", tail, err)
		}
	}
}

// TestTensorNameWithControlCharacterRefused pins names that broke every
// text output: a tensor named "a\nb" (from a --tensor flag or a quoted YAML
// name) was converted, then split verify's finding lines and inspect's
// tables, and prep export wrote a file named "a\nb.npy".
func TestTensorNameWithControlCharacterRefused(t *testing.T) {
	for _, name := range []string{"a\nb", "a\tb", "x\x1b[2J", "del\x7f"} {
		s := &Spec{Tensors: []TensorSpec{{Name: name, Column: "c", DType: "I64"}}}
		err := s.Validate()
		if err == nil || !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "control character") {
			t.Errorf("name %q: err = %v, want a refusal naming the control character", name, err)
		}
	}
	// Spaces, dots, slashes and any printable UTF-8 stay allowed.
	for _, name := range []string{"a b", "emb.v2", "feat/x", "Тест", "région"} {
		s := &Spec{Tensors: []TensorSpec{{Name: name, Column: "c", DType: "I64"}}}
		if err := s.Validate(); err != nil {
			t.Errorf("name %q: %v", name, err)
		}
	}
}

// TestParseSpecJagged: list.jagged's exclusions, each refused with its
// exact message naming the tensor, and a valid jagged tensor's outputs.
func TestParseSpecJagged(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"tensors: [{name: a, column: a, dtype: I32, shape: [4], list: {jagged: true}}]",
			`f.yaml: tensor "a": list.jagged takes no shape: each value is a scalar and the offsets give each sample's length`},
		{"tensors: [{name: a, column: a, dtype: I32, list: {jagged: true, pad: 0}}]",
			`f.yaml: tensor "a": list.pad, truncate, lengths and lengths_dtype do not apply to a jagged tensor: its offsets give each sample's length`},
		{"tensors: [{name: a, column: a, dtype: I32, list: {jagged: true, truncate: true}}]",
			`f.yaml: tensor "a": list.pad, truncate, lengths and lengths_dtype do not apply to a jagged tensor: its offsets give each sample's length`},
		{"tensors: [{name: a, column: a, dtype: I32, list: {jagged: true, lengths: true}}]",
			`f.yaml: tensor "a": list.pad, truncate, lengths and lengths_dtype do not apply to a jagged tensor: its offsets give each sample's length`},
		{"tensors: [{name: a, column: a, dtype: I32, list: {jagged: true}, nulls: {fill: 0}}]",
			`f.yaml: tensor "a": nulls.fill does not apply to a jagged tensor: a null row becomes an empty list (give nulls: {} or nulls: {mask: true})`},
		{"tensors: [{name: a, columns: [a, b], dtype: I32, list: {jagged: true}}]",
			`f.yaml: tensor "a": list policy needs a single column`},
		{"tensors: [{name: a, column: a, dtype: I32, list: {jagged: yes please}}]",
			"f.yaml: invalid feature spec: yaml: unmarshal errors:\n  line 1: cannot unmarshal !!str `yes please` into bool"},
	} {
		_, err := ParseSpec([]byte(c.yaml), "f.yaml")
		if err == nil || !errors.Is(err, ErrSpec) || err.Error() != c.want {
			t.Errorf("%s: err\n  %v\nwant\n  %s", c.yaml, err, c.want)
		}
	}
	s, err := ParseSpec([]byte("tensors: [{name: a, column: a, dtype: I32, list: {jagged: true, element_mask: true, element_fill: 3}, nulls: {mask: true}}]"), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(s.Tensors[0].outputNames()); got != "[a a_mask a_element_mask]" {
		t.Errorf("outputs %s", got)
	}
}

// TestParseSpecReservedNames: names that readers take later are refused
// at validation, naming the spec file and both tensors: a jagged
// tensor's <name>_offsets (prep export's <name>_offsets.npy), a jagged
// list's <name>_inner_lengths (a list of lists gives it), and the item
// keys of gpuload's ShardDataset and the files of prep export beside the
// tensors. A fixed tensor's <name>_offsets is an ordinary name.
func TestParseSpecReservedNames(t *testing.T) {
	const why = " (mask and lengths tensors take the names <name>_mask, <name>_element_mask, <name>_lengths, a jagged list <name>_inner_lengths; a map's <name>.keys and <name>.values; a jagged tensor's offsets <name>_offsets)"
	const reserved = " is reserved (gpuload's ShardDataset items hold sample_ids, pad and step beside the tensors; prep export writes sample_ids.npy, pad_mask.npy and sample_sources.npy); rename the tensor"
	for _, c := range []struct{ yaml, want string }{
		{"tensors: [{name: v, column: v, dtype: I32, list: {jagged: true}}, {name: v_offsets, column: o, dtype: I64}]",
			`f.yaml: tensor name "v_offsets" used twice: by tensor "v" (as the offsets of jagged "v", exported as v_offsets.npy) and by tensor "v_offsets"` + why},
		{"tensors: [{name: v_offsets, column: o, dtype: I64}, {name: v, column: v, dtype: I32, list: {jagged: true}}]",
			`f.yaml: tensor name "v_offsets" used twice: by tensor "v_offsets" and by tensor "v" (as the offsets of jagged "v", exported as v_offsets.npy)` + why},
		{"tensors: [{name: v, column: v, dtype: I32, list: {jagged: true, element_mask: true}}, {name: v_element_mask_offsets, column: o, dtype: I64}]",
			`f.yaml: tensor name "v_element_mask_offsets" used twice: by tensor "v" (as the offsets of jagged "v_element_mask", exported as v_element_mask_offsets.npy) and by tensor "v_element_mask_offsets"` + why},
		{"tensors: [{name: ll, column: ll, dtype: I32, list: {jagged: true}}, {name: ll_inner_lengths, column: o, dtype: I64}]",
			`f.yaml: tensor name "ll_inner_lengths" used twice: by tensor "ll" (as "ll_inner_lengths") and by tensor "ll_inner_lengths"` + why},
		{"tensors: [{name: ll, column: ll, dtype: I32, list: {jagged: true}}, {name: ll_inner_lengths_offsets, column: o, dtype: I64}]",
			`f.yaml: tensor name "ll_inner_lengths_offsets" used twice: by tensor "ll" (as the offsets of jagged "ll_inner_lengths", exported as ll_inner_lengths_offsets.npy) and by tensor "ll_inner_lengths_offsets"` + why},
		{"tensors: [{name: sample_ids, column: o, dtype: I64}]", `f.yaml: tensor "sample_ids": the name "sample_ids"` + reserved},
		{"tensors: [{name: pad, column: o, dtype: I64}]", `f.yaml: tensor "pad": the name "pad"` + reserved},
		{"tensors: [{name: step, column: o, dtype: I64}]", `f.yaml: tensor "step": the name "step"` + reserved},
		{"tensors: [{name: pad_mask, column: o, dtype: I64}]", `f.yaml: tensor "pad_mask": the name "pad_mask"` + reserved},
		{"tensors: [{name: sample_sources, column: o, dtype: I64}]", `f.yaml: tensor "sample_sources": the name "sample_sources"` + reserved},
		{"tensors: [{name: pad, column: o, dtype: I64, nulls: {mask: true}}]", `f.yaml: tensor "pad": the name "pad"` + reserved},
	} {
		_, err := ParseSpec([]byte(c.yaml), "f.yaml")
		if err == nil || !errors.Is(err, ErrSpec) || err.Error() != c.want {
			t.Errorf("%s: err\n  %v\nwant\n  %s", c.yaml, err, c.want)
		}
	}
	if _, err := ParseSpec([]byte("tensors: [{name: v, column: v, dtype: I32}, {name: v_offsets, column: o, dtype: I64}, {name: steps, column: s, dtype: I64}]"), "f.yaml"); err != nil {
		t.Errorf("fixed v beside v_offsets: %v", err)
	}
}

// TestParseSpecFileNameClashes pins the fault where tensors named a/b and
// a_b converted and every later prep export failed on the clashing file
// name: outputs whose export file names (shardfmt.FileStem) are one are
// refused at validation, naming both tensors and the file, whatever their
// order and whatever output (a mask, a jagged tensor's offsets, a reserved
// name) clashes.
func TestParseSpecFileNameClashes(t *testing.T) {
	const why = "; rename one of them"
	for _, c := range []struct{ yaml, want string }{
		{"tensors: [{name: a/b, column: a, dtype: I64}, {name: a_b, column: b, dtype: I64}]",
			`f.yaml: tensor names "a/b" (tensor "a/b") and "a_b" (tensor "a_b") are one file name, a_b.npy, once prep export writes '/', '\' and NUL bytes as '_'` + why},
		{"tensors: [{name: a_b, column: b, dtype: I64}, {name: 'a\\b', column: a, dtype: I64}]",
			`f.yaml: tensor names "a_b" (tensor "a_b") and "a\\b" (tensor "a\\b") are one file name, a_b.npy, once prep export writes '/', '\' and NUL bytes as '_'` + why},
		{"tensors: [{name: v, column: v, dtype: I32, list: {jagged: true}}, {name: v/offsets, column: o, dtype: I64}]",
			`f.yaml: tensor names "v_offsets" (tensor "v" (as the offsets of jagged "v", exported as v_offsets.npy)) and "v/offsets" (tensor "v/offsets") are one file name, v_offsets.npy, once prep export writes '/', '\' and NUL bytes as '_'` + why},
		{"tensors: [{name: v/offsets, column: o, dtype: I64}, {name: v, column: v, dtype: I32, list: {jagged: true}}]",
			`f.yaml: tensor names "v/offsets" (tensor "v/offsets") and "v_offsets" (tensor "v" (as the offsets of jagged "v", exported as v_offsets.npy)) are one file name, v_offsets.npy, once prep export writes '/', '\' and NUL bytes as '_'` + why},
		{"tensors: [{name: x/mask, column: o, dtype: I64}, {name: x, column: x, dtype: I32, nulls: {fill: 0, mask: true}}]",
			`f.yaml: tensor names "x/mask" (tensor "x/mask") and "x_mask" (tensor "x" (as "x_mask")) are one file name, x_mask.npy, once prep export writes '/', '\' and NUL bytes as '_'` + why},
		{"tensors: [{name: sample/ids, column: o, dtype: I64}]",
			`f.yaml: tensor names "sample_ids" (the reserved name "sample_ids") and "sample/ids" (tensor "sample/ids") are one file name, sample_ids.npy, once prep export writes '/', '\' and NUL bytes as '_'` + why},
	} {
		_, err := ParseSpec([]byte(c.yaml), "f.yaml")
		if err == nil || !errors.Is(err, ErrSpec) || err.Error() != c.want {
			t.Errorf("%s: err\n  %v\nwant\n  %s", c.yaml, err, c.want)
		}
	}
	if _, err := ParseSpec([]byte("tensors: [{name: a/b, column: a, dtype: I64}, {name: a.b, column: b, dtype: I64}, {name: a-b, column: c, dtype: I64}]"), "f.yaml"); err != nil {
		t.Errorf("a/b beside a.b and a-b: %v", err)
	}
}

// TestParseSpecMap: the map policy's rules, each refused with its exact
// message, and the outputs of a jagged and a dense map.
func TestParseSpecMap(t *testing.T) {
	const p = `f.yaml: tensor "m": `
	for _, c := range []struct{ yaml, want string }{
		{"tensors: [{name: m, columns: [a, b], dtype: F64, map: {}}]", p + "map policy needs a single column"},
		{"tensors: [{name: m, column: m, dtype: F64, map: {}, list: {jagged: true}}]", p + "a map takes list.element_fill and list.element_mask only (for null values); list.pad, truncate, lengths, lengths_dtype and jagged do not apply"},
		{"tensors: [{name: m, column: m, dtype: F64, map: {}, list: {pad: 0}}]", p + "a map takes list.element_fill and list.element_mask only (for null values); list.pad, truncate, lengths, lengths_dtype and jagged do not apply"},
		{"tensors: [{name: m, column: m, dtype: F64, map: {keys: [1], fill: 0}, list: {element_mask: true}}]", p + "list.element_mask does not apply with map.keys (a null value of a listed key takes list.element_fill)"},
		{"tensors: [{name: m, column: m, dtype: I64, map: {}, bytes: {mode: hash, buckets: 3}}]", p + "map and bytes policies are exclusive (map.key_bytes reads string keys)"},
		{"tensors: [{name: m, column: m, dtype: F64, map: {}, nulls: {fill: 0}}]", p + "nulls.fill does not apply to a map: a null row becomes an empty map (give nulls: {} or nulls: {mask: true})"},
		{"tensors: [{name: m, column: m, dtype: F64, map: {fill: 0}}]", p + "map.fill applies with map.keys only"},
		{"tensors: [{name: m, column: m, dtype: F64, shape: [2], map: {}}]", p + "a map without map.keys gives jagged tensors, which take no shape"},
		{"tensors: [{name: m, column: m, dtype: F64, map: {key_dtype: I65}}]", p + `map.key_dtype: unknown dtype "I65" (want one of BOOL, U8, I8, U16, I16, U32, I32, U64, I64, F16, BF16, F32, F64, F8_E4M3, F8_E5M2)`},
		{"tensors: [{name: m, column: m, dtype: F64, map: {key_dtype: I32, key_bytes: {mode: hash, buckets: 3}}}]", p + "map.key_dtype and map.key_bytes are exclusive (key_bytes gives I64 or U8)"},
		{"tensors: [{name: m, column: m, dtype: F64, map: {key_bytes: {mode: hash}}}]", p + "map.key_bytes: bytes.buckets must be in [1, 2^63-1]"},
		{"tensors: [{name: m, column: m, dtype: F64, map: {keys: [], fill: 0}}]", p + "map.keys is empty"},
		{"tensors: [{name: m, column: m, dtype: F64, map: {keys: [1, 2]}}]", p + "map.keys needs map.fill, the value of a key a row lacks"},
		{"tensors: [{name: m, column: m, dtype: F64, map: {keys: [1, 2], fill: 0, key_dtype: I32}}]", p + "map.key_dtype and map.key_bytes do not apply with map.keys (keys are matched by their bytes, integers by value)"},
		{"tensors: [{name: m, column: m, dtype: F64, shape: [3], map: {keys: [1, 2], fill: 0}}]", p + "shape [3] does not hold the 2 keys of map.keys"},
		{"tensors: [{name: m, column: m, dtype: F64, map: {keys: [a, a], fill: 0}}]", p + `map.keys holds "a" twice`},
		{"tensors: [{name: m, column: m, dtype: F64, map: {}}, {name: m.values, column: v, dtype: I64}]", `f.yaml: tensor name "m.values" used twice: by tensor "m" (as "m.values") and by tensor "m.values" (mask and lengths tensors take the names <name>_mask, <name>_element_mask, <name>_lengths, a jagged list <name>_inner_lengths; a map's <name>.keys and <name>.values; a jagged tensor's offsets <name>_offsets)`},
		{"tensors: [{name: m, column: m, dtype: F64, map: {}}, {name: m.keys_offsets, column: v, dtype: I64}]", `f.yaml: tensor name "m.keys_offsets" used twice: by tensor "m" (as the offsets of jagged "m.keys", exported as m.keys_offsets.npy) and by tensor "m.keys_offsets" (mask and lengths tensors take the names <name>_mask, <name>_element_mask, <name>_lengths, a jagged list <name>_inner_lengths; a map's <name>.keys and <name>.values; a jagged tensor's offsets <name>_offsets)`},
	} {
		_, err := ParseSpec([]byte(c.yaml), "f.yaml")
		if err == nil || !errors.Is(err, ErrSpec) || err.Error() != c.want {
			t.Errorf("%s: err\n  %v\nwant\n  %s", c.yaml, err, c.want)
		}
	}
	s, err := ParseSpec([]byte("tensors: [{name: e, column: m, dtype: F64, map: {}, list: {element_fill: 0, element_mask: true}, nulls: {mask: true}}]"), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(s.Tensors[0].outputNames()); got != "[e.keys e.values e_mask e_element_mask]" {
		t.Errorf("outputs %s", got)
	}
	s, err = ParseSpec([]byte("tensors: [{name: m, column: m, dtype: F64, map: {key_bytes: {mode: hash, buckets: 7}}, nulls: {mask: true}}, {name: d, column: m, dtype: F64, map: {keys: [1, x], fill: -1}}]"), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(s.Tensors[0].outputNames(), s.Tensors[1].outputNames()); got != "[m.keys m.values m_mask] [d]" {
		t.Errorf("outputs %s", got)
	}
	const canonical = `{"tensors":[{"column":"m","dtype":"F64","map":{"key_bytes":{"buckets":7,"mode":"hash"}},"name":"m","nulls":{"mask":true}},{"column":"m","dtype":"F64","map":{"fill":"-1","keys":["1","x"]},"name":"d"}]}`
	if got := string(s.CanonicalJSON()); got != canonical {
		t.Errorf("canonical form\n%s\nwant\n%s", got, canonical)
	}
	if s.MatchesHash(s.hashV1()) {
		t.Errorf("a spec with a map matches its version 1 form's hash")
	}
}

// mustSpec parses yamlText as spec file "s.yaml".
func mustSpec(t *testing.T, yamlText string) *Spec {
	t.Helper()
	s, err := ParseSpec([]byte(yamlText), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return s
}
