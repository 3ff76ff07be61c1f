package feature

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/pqread"
)

// TestKinds: one spec tensor of every kind, compiled against one file,
// gets its kind's type, its outputs in table order (the main tensor, then
// its derived ones, named by DerivedName), its row cost, and whether it is
// read in dictionary form or applied keyed.
func TestKinds(t *testing.T) {
	schema := schemaOf("a.parquet",
		pqread.ColumnInfo{Name: "a", Physical: "INT32", Nullable: true},
		pqread.ColumnInfo{Name: "b", Physical: "INT32", Nullable: true},
		pqread.ColumnInfo{Name: "l", Physical: "FLOAT", List: true, Depth: 1, ElemNullable: true},
		pqread.ColumnInfo{Name: "ll", Physical: "INT64", List: true, Depth: 2},
		pqread.ColumnInfo{Name: "t", Physical: "BYTE_ARRAY", Logical: "STRING"},
		pqread.ColumnInfo{Name: "png", Physical: "BYTE_ARRAY"},
		pqread.ColumnInfo{Name: "m.key_value.key", Physical: "INT32", List: true, Depth: 1, Group: "m", MapRole: "key"},
		pqread.ColumnInfo{Name: "m.key_value.value", Physical: "FLOAT", List: true, Depth: 1, Group: "m", MapRole: "value", ElemNullable: true},
	)
	schema.part = &filePartition{source: "ev", keys: []plan.PartitionKey{{Key: "shard", Type: "int"}}, values: []string{"3"}}
	spec, err := ParseSpec([]byte(`tensors:
  - {name: s, columns: [a, b], dtype: F32, nulls: {fill: 0, mask: true}}
  - {name: l, column: l, dtype: F32, shape: [4], list: {pad: 0, element_fill: 0, element_mask: true, lengths: true}}
  - {name: h, column: t, dtype: I64, bytes: {mode: hash, buckets: 10}}
  - {name: p, column: t, dtype: U8, bytes: {mode: pad, max_len: 8, lengths: true}}
  - {name: j, column: l, dtype: F32, list: {jagged: true, element_mask: true}}
  - {name: d, column: ll, dtype: I64, list: {jagged: true}}
  - {name: bj, column: t, dtype: U8, bytes: {mode: jagged}}
  - {name: md, column: m, dtype: F32, map: {keys: ["1", "2", "3"], fill: 0}, list: {element_fill: 0}}
  - {name: mj, column: m, dtype: F32, map: {key_dtype: I32}, nulls: {mask: true}}
  - {name: img, column: png, dtype: U8, image: {size: [4, 6], channels: 3, original_size: true, invalid: fill}}
  - {name: pt, partition: shard, dtype: I32}
`), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	plans, err := compileSpec(spec, []fileSchema{schema})
	if err != nil {
		t.Fatal(err)
	}
	outs := outputs(plans)
	type want struct {
		kind    string
		outputs string // name dtype shape, "jagged" for a jagged one
		cost    int64
		dict    bool
		keyed   bool
	}
	wants := []want{
		{"*feature.stackKind", "s F32 [2]; s_mask U8 [2]", 2*4 + 2, false, false},
		{"*feature.listKind", "l F32 [4]; l_element_mask U8 [4]; l_lengths I32 []", 2*4*4 + 2, false, false},
		{"*feature.hashKind", "h I64 []", 2*32 + 2, true, false},
		{"*feature.padKind", "p U8 [8]; p_lengths I32 []", 2*8 + 2, false, false},
		{"*feature.jaggedKind", "j F32 [] jagged; j_element_mask U8 [] jagged", 2*4 + 2, false, false},
		{"*feature.jaggedKind", "d I64 [] jagged; d_inner_lengths I64 [] jagged", 2*8 + 2, false, false},
		{"*feature.bytesJaggedKind", "bj U8 [] jagged", 2*1 + 2, false, false},
		{"*feature.mapDenseKind", "md F32 [3]", 2*4 + 2, false, true},
		{"*feature.jaggedKind", "mj.keys I32 [] jagged", 2*4 + 2, false, false},
		{"*feature.jaggedKind", "mj.values F32 [] jagged; mj_mask U8 []", 2*4 + 2, false, false},
		{"*feature.imageKind", "img U8 [4 6 3]; img_mask U8 []; img_original_size I32 [2]", 2*1 + 2, false, false},
		{"*feature.partitionKind", "pt I32 []", 2*4 + 2, false, false},
	}
	if len(plans) != len(wants) {
		t.Fatalf("%d plans, want %d", len(plans), len(wants))
	}
	for i, tp := range plans {
		w := wants[i]
		end := len(outs)
		if i+1 < len(plans) {
			end = plans[i+1].out
		}
		var got []string
		for _, ti := range outs[tp.out:end] {
			s := fmt.Sprintf("%s %s %v", ti.Name, ti.DType, ti.Shape)
			if ti.Jagged {
				s += " jagged"
			}
			got = append(got, s)
		}
		if k := fmt.Sprintf("%T", tp.kind); k != w.kind {
			t.Errorf("plan %d (%s): kind %s, want %s", i, tp.spec.Name, k, w.kind)
		}
		if g := strings.Join(got, "; "); g != w.outputs {
			t.Errorf("plan %d (%s): outputs %q, want %q", i, tp.spec.Name, g, w.outputs)
		}
		if c := tp.kind.rowCost(); c != w.cost {
			t.Errorf("plan %d (%s): rowCost %d, want %d", i, tp.spec.Name, c, w.cost)
		}
		if d := tp.kind.dictForm(); d != w.dict {
			t.Errorf("plan %d (%s): dictForm %v, want %v", i, tp.spec.Name, d, w.dict)
		}
		if k := tp.kind.keyed(); k != w.keyed {
			t.Errorf("plan %d (%s): keyed %v, want %v", i, tp.spec.Name, k, w.keyed)
		}
	}
}
