package cases

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prepml/prep/internal/duckdbtest"
)

// Jagged bytes (bytes: {mode: jagged}) end to end: a VARCHAR column (nulls,
// empty strings, multi-byte UTF-8, values up to 21,000 bytes) and a BLOB
// column (every byte value, NUL included) written by DuckDB, planned,
// converted, verified --deep and exported; each exported sample's bytes
// must equal DuckDB's value byte for byte.

const bytesSQL = `SET threads = 1;
CREATE TABLE t AS SELECT i::BIGINT AS id,
  CASE WHEN i % 13 = 4 THEN NULL WHEN i % 7 = 2 THEN ''
       ELSE repeat('é' || chr((65 + i % 26)::INTEGER) || i::VARCHAR, (i * 37) % 3000) END AS s,
  CASE WHEN i % 9 = 0 THEN ''::BLOB
       ELSE unhex(string_agg(lpad(to_hex(((i * 31 + j * 17) % 256)::INTEGER), 2, '0'), '' ORDER BY j)) END AS b
FROM range(1200) r(i), range(0, 40) s(j)
WHERE j < i % 40 + 1
GROUP BY i
ORDER BY i;
COPY (SELECT * FROM t WHERE id < 700 ORDER BY id) TO {a} (FORMAT parquet, ROW_GROUP_SIZE 300);
COPY (SELECT * FROM t WHERE id >= 700 ORDER BY id) TO {b} (FORMAT parquet, ROW_GROUP_SIZE 300)`

func TestJaggedBytesAgainstDuckDB(t *testing.T) {
	duckdbtest.Require(t)
	dir := t.TempDir()
	r := &caseRun{t: t, dir: dir, src: filepath.Join(dir, "src"), plan: filepath.Join(dir, "plan.json"),
		specDir: filepath.Join("testdata", "jagged")}
	if err := os.Mkdir(r.src, 0o755); err != nil {
		t.Fatal(err)
	}
	duckdbtest.Query(t, strings.NewReplacer("{a}", duckdbtest.Quote(filepath.Join(r.src, "a.parquet")),
		"{b}", duckdbtest.Quote(filepath.Join(r.src, "b.parquet"))).Replace(bytesSQL))
	ref := duckdbRows(t, r.files(), "id", "s", "b")
	prep(t, "plan", "--source", r.src, "--seed", "3", "--global-batch", "128", "--world-size", "2",
		"--shuffle", "global", "--remainder", "pad", "-o", r.plan).OK(t)
	out, res := r.convert("bytes.yaml")
	res.OK(t)
	prep(t, "verify", "--deep", out).OK(t)
	nulls, empties, long := 0, 0, 0
	for rank := range 2 {
		for _, step := range []int{0, 4, 9} {
			a := r.export(out, 0, rank, step)
			ids := tensor(t, a, "sample_ids", "<i8").i64()
			s := jagged(t, a, "s", "|u1", len(ids))
			b := jagged(t, a, "b", "|u1", len(ids))
			mask := tensor(t, a, "s_mask", "|u1").u8()
			for k, id := range ids {
				row := ref[id]
				var want []uint64
				wantMask := uint8(1)
				if row[1] == nil {
					wantMask = 0
					nulls++
				} else {
					str := row[1].(string)
					for _, c := range []byte(str) {
						want = append(want, uint64(c))
					}
					if len(str) == 0 {
						empties++
					}
					if len(str) > 10000 {
						long++
					}
				}
				checkSample(t, "s", id, s.sample(k), want)
				if mask[k] != wantMask {
					t.Errorf("s_mask of sample %d = %d, want %d", id, mask[k], wantMask)
				}
				blob, err := base64.StdEncoding.DecodeString(row[2].(string))
				if err != nil {
					t.Fatal(err)
				}
				want = want[:0]
				for _, c := range blob {
					want = append(want, uint64(c))
				}
				checkSample(t, "b", id, b.sample(k), want)
			}
		}
	}
	if nulls == 0 || empties == 0 || long == 0 {
		t.Errorf("the batches checked hold %d null, %d empty and %d long strings; want some of each", nulls, empties, long)
	}
}
