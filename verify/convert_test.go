package verify_test

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/prepml/prep/internal/deepfixture"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/verify"
)

// TestExportMatchesParquet exports batches of a converted set and compares
// every value with the source read by parquet-go's own row reader.
func TestExportMatchesParquet(t *testing.T) {
	out, src, p := deepfixture.Convert(t)
	rows, err := parquet.ReadFile[deepfixture.Row](filepath.Join(src, "part-0.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != deepfixture.Rows {
		t.Fatalf("read %d rows", len(rows))
	}
	for _, rk := range [][3]int{{0, 0, 0}, {1, 1, p.Steps() - 1}, {0, 1, 2}} {
		dir := t.TempDir()
		res, err := verify.Export(verify.ExportOptions{Dir: out, Epoch: rk[0], Rank: rk[1], Step: rk[2], OutDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		ids, _, _ := p.RankBatch(rk[0], rk[1], rk[2], nil)
		if res.Count != len(ids) || res.Count != 4 {
			t.Fatalf("count %d, want %d", res.Count, len(ids))
		}
		_, sid := readNpy(t, filepath.Join(dir, verify.SampleIDsFile))
		hx, x := readNpy(t, filepath.Join(dir, "x.npy"))
		hf, feat := readNpy(t, filepath.Join(dir, "feat.npy"))
		hi, idv := readNpy(t, filepath.Join(dir, "id.npy"))
		if hx.Descr != "<f8" || hf.Descr != "<f4" || hi.Descr != "<i8" || !reflect.DeepEqual(hf.Shape, []int{4, 2}) {
			t.Fatalf("headers %+v %+v %+v", hx, hf, hi)
		}
		for i, want := range ids {
			if got := binary.LittleEndian.Uint64(sid[8*i:]); got != want {
				t.Fatalf("sample_ids[%d] = %d, want %d", i, got, want)
			}
			r := rows[want]
			if got := int64(binary.LittleEndian.Uint64(idv[8*i:])); got != r.ID {
				t.Errorf("id[%d] = %d, want %d", i, got, r.ID)
			}
			if got := math.Float64frombits(binary.LittleEndian.Uint64(x[8*i:])); got != r.X {
				t.Errorf("x[%d] = %v, want %v", i, got, r.X)
			}
			f0 := math.Float32frombits(binary.LittleEndian.Uint32(feat[8*i:]))
			f1 := math.Float32frombits(binary.LittleEndian.Uint32(feat[8*i+4:]))
			if f0 != r.F || f1 != float32(r.X) {
				t.Errorf("feat[%d] = [%v %v], want [%v %v]", i, f0, f1, r.F, float32(r.X))
			}
		}
	}
}

func footer(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := int(binary.LittleEndian.Uint32(b[len(b)-8:]))
	return b[len(b)-8-n:]
}

func mustManifest(t *testing.T, dir string) *shardfmt.Manifest {
	t.Helper()
	m, err := shardfmt.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func itoa(k int) string { return strconv.Itoa(k) }

// TestExportJaggedMatchesParquet exports every step of a set convert made
// with a jagged tensor from a Parquet LIST column and compares the values
// and offsets files with the lists parquet-go's own row reader finds.
func TestExportJaggedMatchesParquet(t *testing.T) {
	out, src, p := deepfixture.ConvertJagged(t)
	rows, err := parquet.ReadFile[deepfixture.JaggedRow](filepath.Join(src, "part-0.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	for e := range 2 {
		for k := range p.Steps() {
			dir := t.TempDir()
			if _, err := verify.Export(verify.ExportOptions{Dir: out, Epoch: e, Rank: 1, Step: k, OutDir: dir}); err != nil {
				t.Fatal(err)
			}
			ids, _, _ := p.RankBatch(e, 1, k, nil)
			hv, values := readNpy(t, filepath.Join(dir, "l.npy"))
			ho, offsets := readNpy(t, filepath.Join(dir, "l_offsets.npy"))
			var want []int64
			wantOff := []int{0}
			for _, id := range ids {
				for _, v := range rows[id].L {
					want = append(want, int64(v))
				}
				wantOff = append(wantOff, len(want))
			}
			var got []int64
			for j := 0; j+8 <= len(values); j += 8 {
				got = append(got, int64(binary.LittleEndian.Uint64(values[j:])))
			}
			var gotOff []int
			for j := 0; j+8 <= len(offsets); j += 8 {
				gotOff = append(gotOff, int(binary.LittleEndian.Uint64(offsets[j:])))
			}
			if hv.Descr != "<i8" || !reflect.DeepEqual(hv.Shape, []int{len(want)}) || !reflect.DeepEqual(got, want) ||
				ho.Descr != "<i8" || !reflect.DeepEqual(ho.Shape, []int{len(ids) + 1}) || !reflect.DeepEqual(gotOff, wantOff) {
				t.Fatalf("e%d k%d: l.npy %+v %v, want %v; l_offsets.npy %+v %v, want %v", e, k, hv, got, want, ho, gotOff, wantOff)
			}
		}
	}
}
