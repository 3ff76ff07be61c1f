package plan

import (
	"fmt"
	"path"
	"strings"
)

// PartitionKey is one hive partition key of a mixture source: the key of
// its files' key=value directory levels, and its type ("int", "date",
// "timestamp" or "string"; selection/SELECTION.md), declared in the sources file or
// inferred from every value when the plan was made.
type PartitionKey struct {
	Key  string `json:"key"`
	Type string `json:"type"`
}

// PartitionValues returns the partition values (UnescapePartitionValue of
// what its path holds) of the file at rel (relative to Source.Root): one per key of
// ms.Partitions, read from the file's last len(ms.Partitions) directory
// levels, which must be key=value in the order of the keys. A file whose
// path does not end in those levels is an error naming it.
func (ms *MixSource) PartitionValues(rel string) ([]string, error) {
	dirs := strings.Split(path.Dir(rel), "/")
	k := len(ms.Partitions)
	if path.Dir(rel) == "." || len(dirs) < k {
		return nil, fmt.Errorf("source %s: file %s does not sit under the partition levels %s", ms.Name, rel, partitionLayout(ms.Partitions))
	}
	out := make([]string, k)
	for i, l := range dirs[len(dirs)-k:] {
		key, v, ok := strings.Cut(l, "=")
		if !ok || key != ms.Partitions[i].Key {
			return nil, fmt.Errorf("source %s: file %s does not sit under the partition levels %s", ms.Name, rel, partitionLayout(ms.Partitions))
		}
		out[i] = UnescapePartitionValue(v)
	}
	return out, nil
}

// UnescapePartitionValue returns the value of a key=value directory level
// as Hive's FileUtils.unescapePathName reads it (and Spark, pyarrow's
// segment_encoding "uri" and DuckDB's hive_partitioning, which read what
// those writers escape): each '%' followed by two hex digits is the byte
// they spell (ts=2026-11-01 10%3A30%3A00 is 2026-11-01 10:30:00,
// region=us%2Fwest is us/west); any other '%' is kept as written.
func UnescapePartitionValue(v string) string {
	i := strings.IndexByte(v, '%')
	if i < 0 {
		return v
	}
	b := make([]byte, 0, len(v))
	b = append(b, v[:i]...)
	for ; i < len(v); i++ {
		if v[i] == '%' && i+2 < len(v) && isHex(v[i+1]) && isHex(v[i+2]) {
			b = append(b, unhex(v[i+1])<<4|unhex(v[i+2]))
			i += 2
			continue
		}
		b = append(b, v[i])
	}
	return string(b)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// partitionLayout renders keys as the directory levels they name.
func partitionLayout(keys []PartitionKey) string {
	var b strings.Builder
	for _, p := range keys {
		fmt.Fprintf(&b, "%s=.../", p.Key)
	}
	return b.String()
}

// checkPartitions checks a source's partition keys: each named once, not
// empty, without '=' or '/', of type int, date, timestamp or string, and every file
// of the source under their levels (PartitionValues).
func checkPartitions(ms *MixSource) error {
	seen := map[string]bool{}
	for _, p := range ms.Partitions {
		switch {
		case p.Key == "" || strings.ContainsAny(p.Key, "=/"):
			return fmt.Errorf("source %s: partition key %q is not a key of a key=value level", ms.Name, p.Key)
		case seen[p.Key]:
			return fmt.Errorf("source %s: partition key %s is given twice", ms.Name, p.Key)
		case p.Type != "int" && p.Type != "date" && p.Type != "timestamp" && p.Type != "string":
			return fmt.Errorf("source %s: partition key %s has type %q: want int, date, timestamp or string", ms.Name, p.Key, p.Type)
		}
		seen[p.Key] = true
	}
	if len(ms.Partitions) == 0 {
		return nil
	}
	for _, f := range ms.Files {
		if _, err := ms.PartitionValues(f); err != nil {
			return err
		}
	}
	return nil
}

// partitionCanonical is a source's partition lines of the mixture's
// canonical text (PLAN.md §11.5): "partition\t<key>\t<type>\n" per key,
// in level order; none for a source without partitions.
func partitionCanonical(keys []PartitionKey) string {
	var b strings.Builder
	for _, p := range keys {
		fmt.Fprintf(&b, "partition\t%s\t%s\n", p.Key, p.Type)
	}
	return b.String()
}
