package verify

import (
	"encoding/json"
	"testing"

	"github.com/prepml/prep/shardfmt"
)

// TestDerivedDeclarations: the tensors a spec derives are declared as it
// derives them. The table of a shard written when a padded string list's
// element mask took the values' per-value shape ([max_len] where one byte
// per element was written) gets a shard_identity finding naming it; the
// right table none; a derived tensor the shard lacks is named too.
func TestDerivedDeclarations(t *testing.T) {
	var spec any
	if err := json.Unmarshal([]byte(`{"tensors":[
		{"bytes":{"max_len":4,"mode":"pad"},"column":"s","dtype":"U8","list":{"element_mask":true,"jagged":true},"name":"s","nulls":{"mask":true}},
		{"column":"v","dtype":"I32","list":{"element_mask":true,"lengths":true,"lengths_dtype":"I64","pad":"0"},"name":"v","nulls":{"fill":"0","mask":true},"shape":[3]},
		{"columns":["a","b"],"dtype":"F32","name":"ab","nulls":{"fill":"0","mask":true}},
		{"column":"m","dtype":"F64","list":{"element_mask":true},"map":{"key_dtype":"I32"},"name":"m","nulls":{"mask":true}}]}`), &spec); err != nil {
		t.Fatal(err)
	}
	u8 := func(name string, shape []uint64, jagged bool) shardfmt.TensorInfo {
		return shardfmt.TensorInfo{Name: name, DType: shardfmt.U8, Shape: shape, Jagged: jagged}
	}
	good := []shardfmt.TensorInfo{
		u8("s", []uint64{4}, true), u8("s_mask", nil, false), u8("s_element_mask", nil, true),
		{Name: "v", DType: shardfmt.I32, Shape: []uint64{3}}, u8("v_mask", nil, false), u8("v_element_mask", []uint64{3}, false),
		{Name: "v_lengths", DType: shardfmt.I64},
		{Name: "ab", DType: shardfmt.F32, Shape: []uint64{2}}, u8("ab_mask", []uint64{2}, false),
		{Name: "m.keys", DType: shardfmt.I32, Jagged: true}, {Name: "m.values", DType: shardfmt.F64, Jagged: true},
		u8("m_mask", nil, false), u8("m_element_mask", nil, true),
	}
	rules, err := derivedRules(spec, good)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 8 {
		t.Errorf("%d derived tensors, want 8: %+v", len(rules), rules)
	}
	if fs := declFindings(rules, good); len(fs) != 0 {
		t.Errorf("right table: findings %v", fs)
	}

	bad := append([]shardfmt.TensorInfo(nil), good...)
	bad[2] = u8("s_element_mask", []uint64{4}, true)                     // the padded string's per-value shape
	bad[6] = shardfmt.TensorInfo{Name: "v_lengths", DType: shardfmt.I32} // not lengths_dtype
	bad = append(bad[:12], bad[13:]...)                                  // no m_element_mask
	rules, err = derivedRules(spec, bad)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range declFindings(rules, bad) {
		if f.Kind != KindShardIdentity {
			t.Errorf("finding of kind %s: %s", f.Kind, f)
		}
		got = append(got, f.Tensor+": "+f.Expected+" / "+f.Actual)
	}
	want := []string{"s_element_mask: jagged U8 [] / jagged U8 [4]", "v_lengths: fixed I64 [] / fixed I32 []", "m_element_mask: jagged U8 [] / absent"}
	if len(got) != len(want) {
		t.Fatalf("findings %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("finding %d: %q, want %q", i, got[i], want[i])
		}
	}
}

// TestDerivedImageMask: an image tensor's <name>_mask is a scalar per
// sample (feature/SPEC.md §2.8), made by nulls.mask or by invalid: fill
// alone; it is not stacked columns' per-value mask of the image's [H, W, C]
// shape. A freshly converted image set with nulls: {mask: true} was reported
// as shard_identity "expected fixed U8 [4 6 3], actual fixed U8 []".
func TestDerivedImageMask(t *testing.T) {
	var spec any
	if err := json.Unmarshal([]byte(`{"tensors":[
		{"column":"img","dtype":"U8","image":{"channels":3,"size":[4,6]},"name":"im","nulls":{"mask":true}},
		{"column":"img","dtype":"U8","image":{"channels":1,"invalid":"fill","size":[2,2]},"name":"g"},
		{"column":"img","dtype":"U8","image":{"channels":1,"size":[2,2]},"name":"plain"}]}`), &spec); err != nil {
		t.Fatal(err)
	}
	ts := []shardfmt.TensorInfo{
		{Name: "im", DType: shardfmt.U8, Shape: []uint64{4, 6, 3}}, {Name: "im_mask", DType: shardfmt.U8},
		{Name: "g", DType: shardfmt.U8, Shape: []uint64{2, 2, 1}}, {Name: "g_mask", DType: shardfmt.U8},
		{Name: "plain", DType: shardfmt.U8, Shape: []uint64{2, 2, 1}},
	}
	rules, err := derivedRules(spec, ts)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rules {
		names = append(names, r.name)
	}
	if len(names) != 2 || names[0] != "im_mask" || names[1] != "g_mask" {
		t.Errorf("derived tensors %q, want [im_mask g_mask]", names)
	}
	if fs := declFindings(rules, ts); len(fs) != 0 {
		t.Errorf("findings %v, want none", fs)
	}
}

// TestDerivedPartitionMask: a partition tensor's <name>_mask (nulls.mask
// for Hive's NULL partition, feature/SPEC.md §2.10) is a scalar whatever
// the tensor's shape of one value, as convert writes it; a set with
// {partition: k, shape: [1], nulls: {fill: -9, mask: true}} was reported as
// shard_identity "expected fixed U8 [1], actual fixed U8 []".
func TestDerivedPartitionMask(t *testing.T) {
	var spec any
	if err := json.Unmarshal([]byte(`{"tensors":[
		{"column":"v","dtype":"I32","name":"v","nulls":{"fill":"-1","mask":true},"shape":[1,1]},
		{"dtype":"I64","name":"k","nulls":{"fill":"-9","mask":true},"partition":"k","shape":[1]}]}`), &spec); err != nil {
		t.Fatal(err)
	}
	ts := []shardfmt.TensorInfo{
		{Name: "v", DType: shardfmt.I32, Shape: []uint64{1, 1}}, {Name: "v_mask", DType: shardfmt.U8, Shape: []uint64{1, 1}},
		{Name: "k", DType: shardfmt.I64, Shape: []uint64{1}}, {Name: "k_mask", DType: shardfmt.U8},
	}
	rules, err := derivedRules(spec, ts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 2 {
		t.Errorf("%d derived tensors, want 2: %+v", len(rules), rules)
	}
	if fs := declFindings(rules, ts); len(fs) != 0 {
		t.Errorf("findings %v, want none", fs)
	}
}
