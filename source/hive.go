package source

import (
	"fmt"
	"path/filepath"
	"strings"
)

// HivePartitions reads the hive partition values of files (absolute paths)
// under dir: every directory level between dir and a file of the form
// key=value (what Spark, Hive, Athena and pyarrow write:
// date=2026-11-01/region=eu/part-0.parquet). It returns the keys in level
// order and, per file, its values (as written, not URL-decoded). When no
// file has such a level it returns no keys (not partitioned). A file with
// a level not of that form, or whose keys differ from the first file's, is
// an error naming it and wrapping ErrSourcesFile.
func HivePartitions(dir string, files []string) (keys []string, values [][]string, err error) {
	levels := make([][]string, len(files))
	any := false
	for i, f := range files {
		rel, err := filepath.Rel(dir, filepath.Dir(f))
		if err != nil {
			return nil, nil, err
		}
		if rel == "." {
			continue
		}
		levels[i] = strings.Split(filepath.ToSlash(rel), "/")
		for _, l := range levels[i] {
			if strings.Contains(l, "=") {
				any = true
			}
		}
	}
	if !any {
		return nil, nil, nil
	}
	values = make([][]string, len(files))
	for i, lv := range levels {
		var ks []string
		for _, l := range lv {
			k, v, ok := strings.Cut(l, "=")
			if !ok || k == "" {
				return nil, nil, fmt.Errorf("%s is outside the partition layout: level %q is not key=value: %w", f(dir, files[i]), l, ErrSourcesFile)
			}
			ks = append(ks, k)
			values[i] = append(values[i], v)
		}
		if i == 0 {
			keys = ks
			continue
		}
		if strings.Join(ks, "/") != strings.Join(keys, "/") {
			return nil, nil, fmt.Errorf("%s has partition keys %s, but %s has %s: every file needs the same key=value levels: %w",
				f(dir, files[i]), keyList(ks), f(dir, files[0]), keyList(keys), ErrSourcesFile)
		}
	}
	return keys, values, nil
}

func f(dir, file string) string {
	if rel, err := filepath.Rel(dir, file); err == nil {
		return filepath.ToSlash(rel)
	}
	return file
}

func keyList(ks []string) string {
	if len(ks) == 0 {
		return "none"
	}
	return strings.Join(ks, "/")
}
