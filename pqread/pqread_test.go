package pqread

import (
	"reflect"
	"testing"
)

// TestColumnInfoEqualComparesEveryField changes one field of a column at
// a time, through reflection so that a field added later is covered too,
// and requires Equal to tell the two apart; a copy with its own Path slice
// of the same names is equal.
func TestColumnInfoEqualComparesEveryField(t *testing.T) {
	base := ColumnInfo{Index: 3, Path: []string{"a", "list", "element"}, Name: "a", Physical: "INT32", Kind: KindInt32,
		Logical: "INT(16,true)", Precision: 1, Scale: 1, BitWidth: 16, TimeUnit: "MILLIS", Width: 1,
		Nullable: true, List: true, MaxDef: 3, MaxRep: 1, Depth: 1, Group: "g", MapRole: "key", Unsupported: "u"}
	same := base
	same.Path = append([]string(nil), base.Path...)
	if !base.Equal(same) || !same.Equal(base) {
		t.Fatalf("a copy with its own Path is not Equal: %+v", same)
	}
	typ := reflect.TypeFor[ColumnInfo]()
	for i := range typ.NumField() {
		c := base
		c.Path = append([]string(nil), base.Path...)
		f := reflect.ValueOf(&c).Elem().Field(i)
		switch f.Kind() {
		case reflect.Int:
			f.SetInt(f.Int() + 1)
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.Slice:
			f.Index(0).SetString("b")
		default:
			t.Fatalf("field %s: kind %s not covered by this test", typ.Field(i).Name, f.Kind())
		}
		if base.Equal(c) || c.Equal(base) {
			t.Errorf("field %s changed, still Equal", typ.Field(i).Name)
		}
	}
}
