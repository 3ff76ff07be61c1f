package cases

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// caseTests names the test that runs each field case of testdata/cases.
var caseTests = map[string]string{
	"B01": "TestNullsFromDefinitionLevelsNotZeros",
	"B03": "TestListNullElementKeepsItsSlot",
	"B04": "TestListLayoutsOfEveryWriter", // and TestListLayoutsOfOlderWriters
	"B06": "TestRaggedListsNeedPadPolicy",
	"B07": "TestDictionaryToPlainFallbackInOneChunk", // and TestDictionaryFallbackEveryType
	"B09": "TestDeltaBinaryPackedOverflowAndWideMiniblocks",
	"B10": "TestDeltaByteArrayMatchesPlain",
	"B11": "TestByteStreamSplitWithNulls",
	"B13": "TestNegativeDecimalsEveryPhysicalType",
	"B14": "TestFloat16InputAnnotatedOrDeclared",
	"B16": "TestNaNAndInfinityPassBitExact",
	"B17": "TestEmptyFilesBetweenDataFiles",
	"B19": "TestCorruptFilesFailCleanly",
	"B20": "TestListRowsAcrossPageBoundaries",
	"B21": "TestHugeStringValue",
	"B23": "TestColumnsMatchedByNameNotPosition",
	"B25": "TestColumnNamesUnicodeAndDots",
	"B26": "TestManySmallFilesUnderLowDescriptorLimit",
	"B27": "TestRanksAndWorkersCoverEverySample",
	"B29": "TestOrderStableAcrossRunsAndWorkers",
	"B31": "TestConcurrentBuildsIntoOneDirectory",
	"B33": "TestTruncatedShardAndBoundedRead",
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
	}
	for id := range caseTests {
		if !seen[id] {
			t.Errorf("test listed for case %s, which has no folder", id)
		}
	}
}
