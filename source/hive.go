package source

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/prepml/prep/plan"
)

// HivePartitions reads the hive partition values of files (absolute paths)
// under dir: every directory level between dir and a file of the form
// key=value (what Spark, Hive, Athena and pyarrow write:
// date=2026-11-01/region=eu/part-0.parquet). It is HiveLayout of the
// files' paths relative to dir.
func HivePartitions(dir string, files []string) (keys []string, values [][]string, err error) {
	rels := make([]string, len(files))
	for i, f := range files {
		rel, err := filepath.Rel(dir, f)
		if err != nil {
			return nil, nil, err
		}
		rels[i] = filepath.ToSlash(rel)
	}
	return HiveLayout(rels)
}

// HiveLayout reads the hive partition values of files named by their
// '/'-separated paths relative to the partitioned directory (a local
// directory, or an s3:// prefix ending in '/'): each directory level of the
// form key=value is a partition. It returns the keys in level order and,
// per file, its values, unescaped (plan.UnescapePartitionValue: %3A is ':'). When no file has
// such a level it returns no keys (not partitioned). A file with a level
// not of that form, or whose keys differ from the first file's, is an
// error naming it (its relative path) and wrapping ErrSourcesFile.
func HiveLayout(rels []string) (keys []string, values [][]string, err error) {
	levels := make([][]string, len(rels))
	any := false
	for i, rel := range rels {
		dir := path.Dir(rel)
		if dir == "." {
			continue
		}
		levels[i] = strings.Split(dir, "/")
		for _, l := range levels[i] {
			if strings.Contains(l, "=") {
				any = true
			}
		}
	}
	if !any {
		return nil, nil, nil
	}
	values = make([][]string, len(rels))
	for i, lv := range levels {
		var ks []string
		for _, l := range lv {
			k, v, ok := strings.Cut(l, "=")
			if !ok || k == "" {
				return nil, nil, fmt.Errorf("%s is outside the partition layout: level %q is not key=value: %w", rels[i], l, ErrSourcesFile)
			}
			ks = append(ks, k)
			values[i] = append(values[i], plan.UnescapePartitionValue(v))
		}
		for j, k := range ks {
			if slices.Contains(ks[:j], k) {
				return nil, nil, fmt.Errorf("%s has partition key %s twice: %w", rels[i], k, ErrSourcesFile)
			}
		}
		if i == 0 {
			keys = ks
			continue
		}
		if strings.Join(ks, "/") != strings.Join(keys, "/") {
			return nil, nil, fmt.Errorf("%s has partition keys %s, but %s has %s: every file needs the same key=value levels: %w",
				rels[i], keyList(ks), rels[0], keyList(keys), ErrSourcesFile)
		}
	}
	return keys, values, nil
}

func keyList(ks []string) string {
	if len(ks) == 0 {
		return "none"
	}
	return strings.Join(ks, "/")
}
