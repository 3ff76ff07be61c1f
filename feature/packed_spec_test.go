package feature

import (
	"errors"
	"strings"
	"testing"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
)

// TestPackedTensorsExtras: a packed spec's other tensors become, per
// their packed policy, [L] tensors of their dtype (per token) or jagged
// ones (per document), after the four token tensors and in spec order;
// the policy is in the spec's canonical form (a different hash from the
// spec without it).
func TestPackedTensorsExtras(t *testing.T) {
	pk := &plan.Packing{PackOptions: plan.PackOptions{Column: "tokens", Length: 16}}
	spec, err := ParseSpec([]byte(`tensors:
  - {name: tokens, column: tokens, dtype: I64}
  - {name: lang, column: lang, dtype: I64, bytes: {mode: hash, buckets: 100}, packed: {per: document}}
  - {name: src, column: src, dtype: U8, nulls: {fill: 9}, packed: {per: token, pad: 255}}
`), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := PackedTensors(spec, pk)
	if err != nil {
		t.Fatal(err)
	}
	want := []shardfmt.TensorInfo{
		{Name: "tokens", DType: shardfmt.I64, Shape: []uint64{16}},
		{Name: "tokens_segment_ids", DType: shardfmt.I32, Shape: []uint64{16}},
		{Name: "tokens_positions", DType: shardfmt.I32, Shape: []uint64{16}},
		{Name: "tokens_cu_seqlens", DType: shardfmt.I32, Jagged: true},
		{Name: "lang", DType: shardfmt.I64, Jagged: true},
		{Name: "src", DType: shardfmt.U8, Shape: []uint64{16}},
	}
	if !shardfmt.SameTensors(got, want) {
		t.Fatalf("tensors %s, want %s", shardfmt.TensorList(got), shardfmt.TensorList(want))
	}
	canon := string(spec.CanonicalJSON())
	if !strings.Contains(canon, `"packed":{"pad":"255","per":"token"}`) || !strings.Contains(canon, `"packed":{"per":"document"}`) {
		t.Fatalf("canonical form %s lacks the packed policies", canon)
	}
	plain := *spec
	plain.Tensors = append([]TensorSpec(nil), spec.Tensors...)
	plain.Tensors[2].Packed = &PackedPolicy{Per: PackedPerToken}
	if plain.Hash() == spec.Hash() {
		t.Fatal("packed.pad does not change the spec hash")
	}
}

// TestPackedTensorsExtrasRefused: every per-document tensor that is not
// one scalar of one column, a bad policy, or a pad that does not fit the
// dtype is a spec error naming the tensor.
func TestPackedTensorsExtrasRefused(t *testing.T) {
	pk := &plan.Packing{PackOptions: plan.PackOptions{Column: "tokens", Length: 16}}
	tok := TensorSpec{Name: "tokens", Column: "tokens", DType: "I32"}
	per := func(p string) *PackedPolicy { return &PackedPolicy{Per: p} }
	for _, c := range []struct {
		x    TensorSpec
		want string
	}{
		{TensorSpec{Name: "id", Column: "id", DType: "I64"}, "needs a packed policy"},
		{TensorSpec{Name: "id", Column: "id", DType: "I64", Packed: per("row")}, `packed.per "row"`},
		{TensorSpec{Name: "id", Column: "id", DType: "I64", Packed: &PackedPolicy{Per: PackedPerDocument, Pad: IntNumber(0)}}, "per: token only"},
		{TensorSpec{Name: "id", Column: "id", DType: "I64", Shape: []int64{2}, Packed: per(PackedPerToken)}, "one scalar per document"},
		{TensorSpec{Name: "id", Column: "id", DType: "I64", List: &ListPolicy{Jagged: true}, Packed: per(PackedPerToken)}, "one scalar per document"},
		{TensorSpec{Name: "id", Columns: []string{"a", "b"}, DType: "I64", Packed: per(PackedPerToken)}, "reads one column"},
		{TensorSpec{Name: "id", Column: "id", DType: "I64", Nulls: &NullPolicy{Mask: true}, Packed: per(PackedPerToken)}, "nulls.mask"},
		{TensorSpec{Name: "t2", Column: "tokens", DType: "I32", Packed: per(PackedPerToken)}, "reads the packed column"},
		{TensorSpec{Name: "id", Column: "id", DType: "U8", Packed: &PackedPolicy{Per: PackedPerToken, Pad: IntNumber(-1)}}, "packed.pad -1"},
		{TensorSpec{Name: "tokens_positions", Column: "id", DType: "I32", Packed: per(PackedPerToken)}, "used twice"},
	} {
		_, err := PackedTensors(&Spec{Tensors: []TensorSpec{tok, c.x}}, pk)
		if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want ErrSpec with %q", c.x, err, c.want)
		}
	}
	if _, err := PackedTensors(&Spec{Tensors: []TensorSpec{tok, tok}}, pk); !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "both read the packed column") {
		t.Errorf("two token tensors: %v", err)
	}
}
