package selection

import (
	"fmt"
	"strconv"
)

// HiveNull is the partition value Hive and Spark write for a NULL key.
const HiveNull = "__HIVE_DEFAULT_PARTITION__"

// PartitionColumns types hive partition keys from their values (values[f]
// is file f's value per key): INTEGER when every value is a decimal int64,
// else TEXT; HiveNull is NULL in either. It returns the columns and each
// file's values.
func PartitionColumns(keys []string, values [][]string) ([]Column, [][]Value) {
	cols := make([]Column, len(keys))
	for k, key := range keys {
		cols[k] = Column{Name: key, Type: Int}
		for _, vs := range values {
			if vs[k] == HiveNull {
				continue
			}
			if _, err := strconv.ParseInt(vs[k], 10, 64); err != nil {
				cols[k].Type = String
				break
			}
		}
	}
	return cols, PartitionValues(cols, values)
}

// PartitionValues converts each file's partition values (as written) to
// the types of cols (PartitionColumns' typing over every file, so that
// pruning some files never changes a key's type).
func PartitionValues(cols []Column, values [][]string) [][]Value {
	out := make([][]Value, len(values))
	for f, vs := range values {
		out[f] = make([]Value, len(cols))
		for k, v := range vs {
			switch {
			case v == HiveNull:
				out[f][k] = Value{Type: Null}
			case cols[k].Type == Int:
				i, _ := strconv.ParseInt(v, 10, 64)
				out[f][k] = Value{Type: Int, I: i}
			default:
				out[f][k] = Value{Type: String, S: v}
			}
		}
	}
	return out
}

// PrunePartitions says, per file, whether its partition values (vals[f],
// one per part) can let text be TRUE: a file whose values make the filter
// FALSE or NULL whatever its other columns hold is pruned before its footer
// is read. Conditions on other columns are unknown here (they never prune
// by themselves). Errors are the filter's parse errors.
func PrunePartitions(text string, part []Column, vals [][]Value) ([]bool, error) {
	root, err := Parse(text)
	if err != nil {
		return nil, err
	}
	idx := map[string]int{}
	for i, c := range part {
		idx[c.Name] = i
	}
	keep := make([]bool, len(vals))
	for f := range vals {
		keep[f] = partial(root, idx, part, vals[f])&(1<<T) != 0
	}
	return keep, nil
}

// partial returns the set of values n can take (bit v for value v of F, T,
// U) with partition columns known and every other column unknown (any
// value): a leaf naming only partition columns is evaluated, any other
// leaf can be anything, and AND, OR and NOT combine every pair.
func partial(n *Node, idx map[string]int, part []Column, vals []Value) uint8 {
	switch n.Op {
	case "and", "or":
		a, b := partial(n.Args[0], idx, part, vals), partial(n.Args[1], idx, part, vals)
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
		a := partial(n.Args[0], idx, part, vals)
		var out uint8
		for x := F; x <= U; x++ {
			if a&(1<<x) != 0 {
				out |= 1 << not3(x)
			}
		}
		return out
	}
	// A leaf: decided when every column it names is a partition column;
	// then evaluated on a one-row vector of those values.
	cols := []Vector{}
	var bind func(m *Node) bool
	bind = func(m *Node) bool {
		if m.Op == "col" {
			i, ok := idx[m.Col]
			if !ok {
				return false
			}
			m.typ, m.col = part[i].Type, len(cols)
			cols = append(cols, constVector(vals[i], 1))
			return true
		}
		if m.Op == "lit" {
			m.typ, m.litBytes = m.Lit.Type, []byte(m.Lit.S)
		}
		for _, a := range m.Args {
			if !bind(a) {
				return false
			}
		}
		return true
	}
	c := cloneNode(n)
	if !bind(c) {
		return 1<<F | 1<<T | 1<<U
	}
	return 1 << evalRow(c, cols, 0)
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
	case Int, Null:
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
