package selection

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	workers "github.com/prepml/prep/internal/pool"
	"github.com/prepml/prep/source"
)

// HiveNull is the partition value Hive and Spark write for a NULL key.
const HiveNull = "__HIVE_DEFAULT_PARTITION__"

// PartitionColumns types hive partition keys from their values (values[f]
// is file f's value per key, files[f] its name for messages). A key
// declared in declared (key -> Int, Date or String) has that type, and each
// of its values must parse as it; any other key is inferred as DuckDB's
// hive_types_autocast does for these types: INTEGER when every value is an
// int64 in canonical decimal form (no leading zeros or '+': "007" stays
// text), else DATE when every value is a YYYY-MM-DD date (ParseDate), else
// TEXT. HiveNull is NULL in any type. It
// returns the columns and each file's values; a declared key that is not a
// level of the layout, or a value that does not parse as its declared
// type, is an error naming the key, the value and the file (wrapping
// ErrFilter).
func PartitionColumns(keys, files []string, values [][]string, declared map[string]Type) ([]Column, [][]Value, error) {
	known := map[string]bool{}
	for _, k := range keys {
		known[k] = true
	}
	for k := range declared {
		if !known[k] {
			return nil, nil, fmt.Errorf("declared partition key %s is not a level of the layout (its keys: %s): %w", k, strings.Join(keys, "/"), ErrFilter)
		}
	}
	cols := make([]Column, len(keys))
	for k, key := range keys {
		if t, ok := declared[key]; ok {
			cols[k] = Column{Name: key, Type: t}
			continue
		}
		cols[k] = Column{Name: key, Type: inferPartition(values, k)}
	}
	out := make([][]Value, len(values))
	for f, vs := range values {
		out[f] = make([]Value, len(cols))
		for k, v := range vs {
			val, ok := partitionValue(cols[k].Type, v)
			if !ok {
				want := map[Type]string{Int: "a decimal integer (int64)", Date: "a date written YYYY-MM-DD"}[cols[k].Type]
				return nil, nil, fmt.Errorf("%s: partition %s=%s: %q is not %s, as key %s is declared %s: %w", files[f], cols[k].Name, v, v, want, cols[k].Name, PartitionTypeName(cols[k].Type), ErrFilter)
			}
			out[f][k] = val
		}
	}
	return cols, out, nil
}

// PartitionTypeName is a partition type as a sources file declares it and
// a plan records it: "int", "date" or "string" (PartitionType's inverse).
func PartitionTypeName(t Type) string {
	switch t {
	case Int:
		return "int"
	case Date:
		return "date"
	}
	return "string"
}

// PartitionType returns the partition type a sources file declares by
// name: "int" (INTEGER), "date" (DATE) or "string" (TEXT); ok is false for
// any other name.
func PartitionType(name string) (t Type, ok bool) {
	switch name {
	case "int":
		return Int, true
	case "date":
		return Date, true
	case "string":
		return String, true
	}
	return Null, false
}

// inferPartition is the inferred type of key k over every file's values.
func inferPartition(values [][]string, k int) Type {
	for _, t := range []Type{Int, Date} {
		all := true
		for _, vs := range values {
			v, ok := partitionValue(t, vs[k])
			if !ok || t == Int && v.Type == Int && strconv.FormatInt(v.I, 10) != vs[k] {
				all = false
				break
			}
		}
		if all {
			return t
		}
	}
	return String
}

// partitionValue is a partition value as written, as a value of type t.
func partitionValue(t Type, v string) (Value, bool) {
	if v == HiveNull {
		return Value{Type: Null}, true
	}
	switch t {
	case Int:
		i, err := strconv.ParseInt(v, 10, 64)
		return Value{Type: Int, I: i}, err == nil
	case Date:
		d, ok := ParseDate(v)
		return Value{Type: Date, I: d}, ok
	}
	return Value{Type: String, S: v}, true
}

// PrunePartitions says, per file, whether its partition values (vals[f],
// one per part) can let text be TRUE: a file whose values make the filter
// FALSE or NULL whatever its other columns hold is pruned before its footer
// is read. Conditions on other columns are unknown here (they never prune
// by themselves). Errors are the filter's parse errors and the type errors
// of its conditions on partition columns alone (*Error values).
func PrunePartitions(text string, part []Column, vals [][]Value) ([]bool, error) {
	root, err := Parse(text)
	if err != nil {
		return nil, err
	}
	idx := map[string]int{}
	for i, c := range part {
		idx[c.Name] = i
	}
	// Each leaf naming only partition columns is type-checked once (a
	// copy of it, as a filter of its own), then evaluated per file.
	leaves := map[*Node]*Filter{}
	var prep func(n *Node) error
	prep = func(n *Node) error {
		switch n.Op {
		case "and", "or", "not":
			for _, a := range n.Args {
				if err := prep(a); err != nil {
					return err
				}
			}
			return nil
		}
		if !partitionOnly(n, idx) {
			return nil
		}
		f, err := typeCheck(text, cloneNode(n), part)
		if err != nil {
			return err
		}
		leaves[n] = f
		return nil
	}
	if err := prep(root); err != nil {
		return nil, err
	}
	keep := make([]bool, len(vals))
	for f := range vals {
		keep[f] = partial(root, leaves, idx, vals[f])&(1<<T) != 0
	}
	return keep, nil
}

// partitionOnly reports whether every column n names is a partition column.
func partitionOnly(n *Node, idx map[string]int) bool {
	if n.Op == "col" {
		_, ok := idx[n.Col]
		return ok
	}
	for _, a := range n.Args {
		if !partitionOnly(a, idx) {
			return false
		}
	}
	return true
}

// partial returns the set of values n can take (bit v for value v of F, T,
// U) with partition columns known and every other column unknown (any
// value): a leaf naming only partition columns (checked in leaves) is
// evaluated, any other leaf can be anything, and AND, OR and NOT combine
// every pair.
func partial(n *Node, leaves map[*Node]*Filter, idx map[string]int, vals []Value) uint8 {
	switch n.Op {
	case "and", "or":
		a, b := partial(n.Args[0], leaves, idx, vals), partial(n.Args[1], leaves, idx, vals)
		var out uint8
		for x := F; x <= U; x++ {
			for y := F; y <= U; y++ {
				if a&(1<<x) == 0 || b&(1<<y) == 0 {
					continue
				}
				if n.Op == "and" {
					out |= 1 << and3(x, y)
				} else {
					out |= 1 << not3(and3(not3(x), not3(y)))
				}
			}
		}
		return out
	case "not":
		a := partial(n.Args[0], leaves, idx, vals)
		var out uint8
		for x := F; x <= U; x++ {
			if a&(1<<x) != 0 {
				out |= 1 << not3(x)
			}
		}
		return out
	}
	f, ok := leaves[n]
	if !ok {
		return 1<<F | 1<<T | 1<<U
	}
	cols := make([]Vector, len(f.Columns))
	for i, c := range f.Columns {
		cols[i] = constVector(vals[idx[c.Name]], 1)
	}
	return 1 << evalRow(f.Root, cols, 0)
}

func cloneNode(n *Node) *Node {
	c := *n
	c.Args = make([]*Node, len(n.Args))
	for i, a := range n.Args {
		c.Args[i] = cloneNode(a)
	}
	return &c
}

// constVector is a vector of rows rows all holding v.
func constVector(v Value, rows int) Vector {
	out := Vector{}
	if v.Type == Null {
		out.Valid = make([]bool, rows)
	}
	switch v.Type {
	case Int, Null, Date:
		out.Ints = make([]int64, rows)
		for i := range out.Ints {
			out.Ints[i] = v.I
		}
	}
	if v.Type == String || v.Type == Null {
		out.Offsets = make([]int64, rows+1)
		for i := 0; i < rows; i++ {
			out.Data = append(out.Data, v.S...)
			out.Offsets[i+1] = int64(len(out.Data))
		}
	}
	return out
}

// partitionConflict is the error of a data column named like a partition
// key.
func partitionConflict(text, file, key string) error {
	return &Error{Filter: text, Pos: 0, Token: "", Msg: fmt.Sprintf("partition key conflict: %s has a column %s and a partition level %s=...; rename one", file, key, key)}
}

// ErrPartitionConflict is wrapped by the error of a file of a hive
// partitioned source with a top-level column named like one of its
// partition keys (CheckPartitionKeys).
var ErrPartitionConflict = errors.New("partition key conflict")

// checkParallel is how many footers CheckPartitionKeys reads at once.
const checkParallel = 8

// CheckPartitionKeys reads the footer of each named file of st (up to 8
// at once) and refuses a file with a top-level column (the first element
// of a leaf column's schema path, so a struct id counts as id) named like
// one of keys, the source's partition keys: a filter or a feature naming
// the key could mean the directory level's value or the file's column.
// The error names the first such file in the order given, the column and
// the key, and wraps ErrPartitionConflict (CheckPartitionColumns); a
// footer that cannot be read or validated returns its *source.Error
// (naming the file) as it is. A discovery that read the footers already
// has the columns (source.TopColumns): CheckPartitionColumns checks them
// without a read.
func CheckPartitionKeys(ctx context.Context, st source.Store, files, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	return workers.ForEach(ctx, len(files), checkParallel, func(i int) error {
		d, err := source.Describe(ctx, st, files[i])
		if err != nil {
			return err
		}
		var cols []string
		for _, c := range d.Columns {
			if len(c.Path) > 0 {
				cols = append(cols, c.Path[0])
			}
		}
		return CheckPartitionColumns(files[i:i+1], [][]string{cols}, keys)
	})
}

// CheckPartitionColumns refuses the first of files (in the order given)
// whose top-level column names (cols[i] for files[i], as
// source.TopColumns gives them) include one of keys, the source's
// partition keys. The error names the file, the column and the key, and
// wraps ErrPartitionConflict; nil when no file has such a column.
func CheckPartitionColumns(files []string, cols [][]string, keys []string) error {
	isKey := map[string]bool{}
	for _, k := range keys {
		isKey[k] = true
	}
	for i, f := range files {
		for _, c := range cols[i] {
			if isKey[c] {
				return fmt.Errorf("%w: %s has a top-level column %s and a partition level %s=...; rename one", ErrPartitionConflict, f, c, c)
			}
		}
	}
	return nil
}
