package cases

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
	"github.com/prepml/prep/internal/pqfixture"
)

// dictRow is one row of the dictionary-fallback files: every physical type
// prep reads, required and optional.
type dictRow struct {
	I32 int32    `parquet:"i32,dict"`
	I64 *int64   `parquet:"i64,optional,dict"`
	F32 float32  `parquet:"f32,dict"`
	F64 *float64 `parquet:"f64,optional,dict"`
	S   string   `parquet:"s,dict"`
	B   bool     `parquet:"b"`
}

// dictValue is the rule of the files: four values repeated for the first
// half (dictionary pages), then a new value every row (the dictionary
// outgrows its limit and the writer falls back to PLAIN); every seventh row
// of the optional columns is null.
func dictValue(i int) (v int64, null bool) {
	if i < 5000 {
		v = int64(i % 4)
	} else {
		v = 100000 + int64(i)
	}
	return v, i%7 == 3
}

// B07 kind: a column chunk switching from dictionary to PLAIN pages, for
// every physical type, required and optional, in V1 and V2 data pages.
func TestCaseB07DictFallbackEveryType(t *testing.T) {
	c := loadCase(t, "B07")
	const n = 10000
	for _, version := range []int{1, 2} {
		t.Run(fmt.Sprintf("data page V%d", version), func(t *testing.T) {
			rows := make([]dictRow, n)
			for i := range rows {
				v, null := dictValue(i)
				rows[i] = dictRow{I32: int32(v), F32: float32(v) + 0.5, S: strconv.FormatInt(v, 10), B: v%3 == 0}
				if !null {
					i64, f64 := -v, float64(v)+0.25
					rows[i].I64, rows[i].F64 = &i64, &f64
				}
			}
			data := pqfixture.Of(rows...).PageBytes(4096).WriteBatch(500).
				Option(parquet.DictionaryMaxBytes(2048), parquet.DataPageVersion(version)).Bytes(t)
			// Each dictionary column chunk holds both encodings.
			f := openParquet(t, data)
			for _, cc := range f.Metadata().RowGroups[0].Columns {
				if cc.MetaData.PathInSchema[0] == "b" {
					continue
				}
				if !slices.Contains(cc.MetaData.Encoding, format.Plain) || !slices.Contains(cc.MetaData.Encoding, format.RLEDictionary) {
					t.Fatalf("column %v: encodings %v, want dictionary then PLAIN", cc.MetaData.PathInSchema, cc.MetaData.Encoding)
				}
			}

			r := newRun(t, c)
			if err := os.WriteFile(filepath.Join(r.src, "dict.parquet"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			r.planAll(n)
			a := r.converted("every_type.yaml")
			i32 := tensor(t, a, "i32", "<i4").i32()
			i64 := tensor(t, a, "i64", "<i8").i64()
			i64m := tensor(t, a, "i64_mask", "|u1").u8()
			f32 := tensor(t, a, "f32", "<f4").u32()
			f64 := tensor(t, a, "f64", "<f8").u64()
			f64m := tensor(t, a, "f64_mask", "|u1").u8()
			s := tensor(t, a, "s", "|u1").u8()
			sl := tensor(t, a, "s_lengths", "<i4").i32()
			b := tensor(t, a, "b", "|u1").u8()
			bad := 0
			for i := 0; i < n && bad < 5; i++ {
				v, null := dictValue(i)
				str := strconv.FormatInt(v, 10)
				ok := int64(i32[i]) == v && math.Float32frombits(f32[i]) == float32(v)+0.5 &&
					int(sl[i]) == len(str) && string(s[8*i:8*i+len(str)]) == str && (b[i] == 1) == (v%3 == 0)
				if null {
					ok = ok && i64m[i] == 0 && f64m[i] == 0 && i64[i] == 0 && math.Float64frombits(f64[i]) == 0
				} else {
					ok = ok && i64m[i] == 1 && f64m[i] == 1 && i64[i] == -v && math.Float64frombits(f64[i]) == float64(v)+0.25
				}
				if !ok {
					bad++
					t.Errorf("row %d: i32 %d i64 %d/%d f32 %v f64 %v/%d s %q b %d; want %d (null %v)", i, i32[i], i64[i], i64m[i],
						math.Float32frombits(f32[i]), math.Float64frombits(f64[i]), f64m[i], s[8*i:8*i+8], b[i], v, null)
				}
			}
		})
	}
}
