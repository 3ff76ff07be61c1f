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

// ErrPartitionType is wrapped by the errors of PartitionColumns: a
// declared key that is not a level of the layout, a value that does not
// parse as its key's declared type, and a key whose values look like dates
// in a form prep does not read.
var ErrPartitionType = errors.New("bad partition type")

// partitionTypeError marks err as ErrPartitionType without changing its
// message.
type partitionTypeError struct{ err error }

func (e partitionTypeError) Error() string        { return e.err.Error() }
func (e partitionTypeError) Unwrap() error        { return e.err }
func (e partitionTypeError) Is(target error) bool { return target == ErrPartitionType }

// PartitionColumns types hive partition keys from their values (values[f]
// is file f's value per key, files[f] its name for messages). A key
// declared in declared (key -> Int, Date, Timestamp or String) has that
// type, and each of its values must parse as it. Any other key is inferred
// as DuckDB's hive_types_autocast does: each value is INTEGER (an int64 in
// canonical decimal form: no leading zero or '+', so "007" is text), DATE
// (ParseDate: "2026-11-1" and "2026-11-01" are one day), TIMESTAMP
// (ParseTimestamp: a date with a time of day) or TEXT, and the key has the
// one type all its values have, else TEXT (DuckDB reads "2026-11-01" next to
// "2026-11-01 10:00" as VARCHAR too). A value written with an escape
// (written[f][k], the level as the path spells it, differs from the
// unescaped values[f][k]: ts=2026-11-01 10%3A30%3A00) is TEXT, as DuckDB
// types the value as written before it unescapes it; written nil means
// every value is written as it reads. HiveNull is NULL in any type; a key of
// only NULLs is INTEGER. A key with no TEXT value but a value that looks
// like a date (DateLike) in a form prep does not read (" 2026-11-01",
// "2026-11-01T10:00:00Z", "2026-02-30") is refused: DuckDB may type it
// DATE or TIMESTAMP where prep would compare text; declaring the key
// string compares it as text. It returns the columns and each file's
// values; errors (wrapping ErrPartitionType) name the key, the value and
// the file, or the declared key that is not a level of the layout.
func PartitionColumns(keys, files []string, values, written [][]string, declared map[string]Type) ([]Column, [][]Value, error) {
	known := map[string]bool{}
	for _, k := range keys {
		known[k] = true
	}
	for k := range declared {
		if !known[k] {
			return nil, nil, partitionTypeError{fmt.Errorf("declared partition key %s is not a level of the layout (its keys: %s)", k, strings.Join(keys, "/"))}
		}
	}
	cols := make([]Column, len(keys))
	for k, key := range keys {
		if t, ok := declared[key]; ok {
			cols[k] = Column{Name: key, Type: t}
			continue
		}
		t, odd := inferPartition(values, written, k)
		if odd >= 0 {
			v := values[odd][k]
			if !DateLike(v) {
				return nil, nil, partitionTypeError{fmt.Errorf("%s: partition %s=%s: %q looks like an integer but is not written in canonical decimal form (digits, an optional '-', no spaces, no leading zero): DuckDB may type key %s BIGINT where prep would compare text; declare its type (partitions: {%s: string} compares text)", files[odd], key, v, v, key, key)}
			}
			return nil, nil, partitionTypeError{fmt.Errorf("%s: partition %s=%s: %q looks like a date or timestamp but is not one prep reads (Y-M-D, or Y-M-D HH:MM[:SS[.ffffff]] with ' ' or 'T', no time zone; a real calendar date): DuckDB may type key %s DATE or TIMESTAMP where prep would compare text; declare its type (partitions: {%s: string} compares text)", files[odd], key, v, v, key, key)}
		}
		cols[k] = Column{Name: key, Type: t}
	}
	out := make([][]Value, len(values))
	for f, vs := range values {
		out[f] = make([]Value, len(cols))
		for k, v := range vs {
			val, ok := partitionValue(cols[k].Type, v)
			if !ok {
				want := map[Type]string{Int: "a decimal integer (int64)", Date: "a date written Y-M-D", Timestamp: "a timestamp written Y-M-D HH:MM[:SS[.ffffff]] (or a date)"}[cols[k].Type]
				return nil, nil, partitionTypeError{fmt.Errorf("%s: partition %s=%s: %q is not %s, as key %s is declared %s", files[f], cols[k].Name, v, v, want, cols[k].Name, PartitionTypeName(cols[k].Type))}
			}
			out[f][k] = val
		}
	}
	return cols, out, nil
}

// PartitionTypeName is a partition type as a sources file declares it and
// a plan records it: "int", "date", "timestamp" or "string"
// (PartitionType's inverse).
func PartitionTypeName(t Type) string {
	switch t {
	case Int:
		return "int"
	case Date:
		return "date"
	case Timestamp:
		return "timestamp"
	}
	return "string"
}

// PartitionType returns the partition type a sources file declares by
// name: "int" (INTEGER), "date" (DATE), "timestamp" (TIMESTAMP) or
// "string" (TEXT); ok is false for any other name.
func PartitionType(name string) (t Type, ok bool) {
	switch name {
	case "int":
		return Int, true
	case "date":
		return Date, true
	case "timestamp":
		return Timestamp, true
	case "string":
		return String, true
	}
	return Null, false
}

// valueType is the type DuckDB's hive_types_autocast gives one partition
// value as prep reads it: Null, Int, Date, Timestamp or String; odd is true
// for a value that looks like a date in a form prep does not read.
func valueType(v string) (t Type, odd bool) {
	if v == HiveNull {
		return Null, false
	}
	if i, err := strconv.ParseInt(v, 10, 64); err == nil && strconv.FormatInt(i, 10) == v {
		return Int, false
	}
	if _, ok := ParseDate(v); ok {
		return Date, false
	}
	if _, ok := ParseTimestamp(v); ok {
		return Timestamp, false
	}
	return String, DateLike(v) || intLike(v)
}

// intLike reports whether DuckDB's hive_types_autocast may read v, not in
// canonical decimal form, as an integer: DuckDB 1.5 types "-07", "-0",
// " 1", "1 ", "0x1F" and "0b1" BIGINT, but "007", " 07", "+7" and "1_0"
// VARCHAR (observed with typeof over hive paths); prep refuses a key with
// such a value rather than compare text where DuckDB compares integers.
func intLike(v string) bool {
	t := strings.Trim(v, " ")
	if t == "" || t[0] == '+' || len(t) > 1 && t[0] == '0' && t[1] >= '0' && t[1] <= '9' {
		return false // leading zeros and '+': VARCHAR in DuckDB too
	}
	if len(t) > 2 && t[0] == '0' && strings.ContainsRune("xXbB", rune(t[1])) {
		return true
	}
	_, err := strconv.ParseInt(t, 10, 64) // beyond int64: VARCHAR in DuckDB too
	return err == nil
}

// inferPartition is the inferred type of key k over every file's values,
// and the first file whose value is odd (valueType) when no value is TEXT
// (-1 when none); a value written with an escape (written, as in
// PartitionColumns) is TEXT.
func inferPartition(values, written [][]string, k int) (Type, int) {
	t, odd, text := Null, -1, false
	for f, vs := range values {
		vt, o := valueType(vs[k])
		if written != nil && written[f][k] != vs[k] {
			vt, o = String, false
		}
		switch {
		case o:
			if odd < 0 {
				odd = f
			}
		case vt == String:
			text = true
		case vt == Null:
		case t == Null:
			t = vt
		case t != vt:
			text = true // mixed types: DuckDB reads VARCHAR
		}
	}
	switch {
	case text:
		return String, -1
	case odd >= 0:
		return String, odd
	case t == Null:
		return Int, -1
	}
	return t, -1
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
	case Timestamp:
		us, ok := ParseTimestamp(v)
		return Value{Type: Timestamp, I: us}, ok
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
	case Int, Null, Date, Timestamp:
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
