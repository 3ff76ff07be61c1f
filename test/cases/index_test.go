package cases

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// caseTests names the test that runs each field case of testdata/cases. A
// case's tests have one name in every package that tests it:
// TestCase<id><folder name in camel case>, plus an aspect where a package
// has two (TestCaseB04ListLayoutsOlderWriters).
var caseTests = map[string]string{
	"B01": "TestCaseB01ZeroVsNull",
	"B03": "TestCaseB03ListNullElement",
	"B04": "TestCaseB04ListLayouts", // and TestCaseB04ListLayoutsOlderWriters
	"B06": "TestCaseB06RaggedLists",
	"B07": "TestCaseB07DictFallback", // and TestCaseB07DictFallbackEveryType
	"B09": "TestCaseB09DeltaIntExtremes",
	"B10": "TestCaseB10DeltaByteArray",
	"B11": "TestCaseB11ByteStreamSplitNulls",
	"B13": "TestCaseB13NegativeDecimals",
	"B14": "TestCaseB14Float16Input",
	"B16": "TestCaseB16NaNInf",
	"B17": "TestCaseB17EmptyFiles",
	"B19": "TestCaseB19CorruptFiles",
	"B20": "TestCaseB20ListsAcrossPages",
	"B21": "TestCaseB21HugeString",
	"B23": "TestCaseB23ColumnOrder",
	"B25": "TestCaseB25ColumnNames",
	"B26": "TestCaseB26ManySmallFiles",
	"B27": "TestCaseB27RanksCoverage",
	"B29": "TestCaseB29OrderStability",
	"B31": "TestCaseB31ConcurrentBuilds",
	"B33": "TestCaseB33TruncatedShard",
}

// Every case folder has a test here, and every test named above exists.
func TestEveryFieldCaseHasATest(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join(casesDir, "B*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("case folders: %v %v", dirs, err)
	}
	var src strings.Builder
	files, _ := filepath.Glob("*_test.go")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	seen := map[string]bool{}
	for _, d := range dirs {
		id, _, _ := strings.Cut(filepath.Base(d), "-")
		seen[id] = true
		name, ok := caseTests[id]
		if !ok {
			t.Errorf("case %s (%s) has no test", id, d)
			continue
		}
		if !strings.Contains(src.String(), "func "+name+"(t *testing.T)") {
			t.Errorf("case %s: test %s not found", id, name)
		}
		if want := caseTestName(filepath.Base(d)); name != want {
			t.Errorf("case %s: test %s, want the case's name %s", id, name, want)
		}
	}
	for id := range caseTests {
		if !seen[id] {
			t.Errorf("test listed for case %s, which has no folder", id)
		}
	}
}

// caseTestName returns the test name of the case in folder dir
// ("B16-nan-inf" -> "TestCaseB16NaNInf").
func caseTestName(dir string) string {
	id, slug, _ := strings.Cut(dir, "-")
	var b strings.Builder
	b.WriteString("TestCase" + id)
	for _, w := range strings.Split(slug, "-") {
		if w == "nan" {
			b.WriteString("NaN")
			continue
		}
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}
