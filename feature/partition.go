package feature

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/pqread"
	"github.com/prepml/prep/shardfmt"
)

// This file is the partition tensors of a feature spec (SPEC.md, "Hive
// partition tensors"): a tensor with `partition: KEY` takes, for every
// row, the value of the hive partition key KEY of the row's file, a
// constant per file read from the file's path as the plan records it
// (plan.MixSource.PartitionValues, typed by plan.MixSource.Partitions). No
// column is read for it: its records are written when the row group's
// other tensors are assembled (applyPartitions).

// hiveNull is the partition value Hive and Spark write for a NULL key.
const hiveNull = "__HIVE_DEFAULT_PARTITION__"

// filePartition is one file's partition keys and values (as written).
type filePartition struct {
	source string
	keys   []plan.PartitionKey
	values []string
}

// partConst is a partition tensor's value for the rows of one file: its
// bytes in the tensor's dtype (little-endian), or null (the fill).
type partConst struct {
	val  []byte
	null bool
}

// filePartitions returns each file's partition keys and values (nil for a
// file of a source without partitions) from the plan's mixture.
func filePartitions(p *plan.Plan) (map[string]*filePartition, error) {
	if p.Mixture == nil {
		return nil, nil
	}
	out := map[string]*filePartition{}
	for i := range p.Mixture.Sources {
		ms := &p.Mixture.Sources[i]
		if len(ms.Partitions) == 0 {
			continue
		}
		for _, f := range ms.Files {
			vals, err := ms.PartitionValues(f)
			if err != nil {
				return nil, &Error{File: f, RowGroup: -1, Row: -1, Element: -1, Err: schemaErrorf("%v", err)}
			}
			out[f] = &filePartition{source: ms.Name, keys: ms.Partitions, values: vals}
		}
	}
	return out, nil
}

// validatePartition checks a partition tensor's spec: no column, no list,
// map, image, cast or NaN policy, a scalar shape, dtype I64 or I32, or I64
// with bytes {mode: hash, buckets} (for a string key; the key's type is
// known only against the plan, compilePartition).
func (t *TensorSpec) validatePartition() error {
	switch {
	case t.Column != "" || len(t.Columns) > 0 || t.ColumnsRegex != "":
		return specErrorf("set exactly one of column, columns, columns_regex and partition")
	case t.List != nil || t.Map != nil || t.Image != nil || t.Cast != nil || t.NaN != nil || t.MaxValueBytes != 0:
		return specErrorf("partition %s: a partition tensor takes dtype, bytes (hash mode, for a string key) and nulls only", t.Partition)
	case shapeProduct(t.Shape) != 1:
		return specErrorf("partition %s: one value per sample; shape %v", t.Partition, t.Shape)
	}
	if t.DType != "I64" && t.DType != "I32" {
		return specErrorf("partition %s: dtype %s: a partition value is written as I64 or I32 (int, date), or I64 with bytes: {mode: hash} (string)", t.Partition, t.DType)
	}
	if b := t.Bytes; b != nil {
		if b.Mode != "hash" || t.DType != "I64" || b.Lengths || b.MaxLen != 0 || b.Truncate || b.LengthsDType != "" {
			return specErrorf("partition %s: a string key is hashed: bytes: {mode: hash, buckets: N} with dtype I64 (modes pad and jagged do not apply)", t.Partition)
		}
		if b.Buckets == 0 || b.Buckets > math.MaxInt64 {
			return specErrorf("bytes.buckets must be in [1, 2^63-1]")
		}
	}
	return nil
}

// partitionKind is a hive partition key's value, constant per file: no
// column is read; applyFile writes each file's value.
type partitionKind struct {
	*tensorPlan
	part []partConst // [file] its value
}

// apply is never called: a partition tensor reads no column.
func (tp *partitionKind) apply(_, _ *pqread.Column, _, _ int, _ []RowRun, _ *Records, _ chunkLoc, _ *valueWriter) error {
	return fmt.Errorf("%w: partition tensor %s has no column to apply", ErrInternal, tp.spec.Name)
}

// compilePartition compiles a partition tensor against every file: the
// key must be a partition key of each file's source, and its type must
// fit the spec (int: I64 or I32; date: I32 or I64, days since 1970-01-01;
// string: I64 with bytes mode hash, FNV1a64 modulo buckets as for a bytes
// column). Each file's value is computed here; a value that does not parse
// as its type or fit the dtype, and a NULL (__HIVE_DEFAULT_PARTITION__)
// without nulls.fill, are errors naming the file, the key and the value.
func compilePartition(t *TensorSpec, files []fileSchema) (*tensorPlan, error) {
	dt, _ := shardfmt.ParseDType(t.DType)
	tp := &tensorPlan{spec: t, dt: dt, es: dt.Size(),
		cols: make([][]pqread.ColumnInfo, len(files)), classes: make([][]srcClass, len(files))}
	pk := &partitionKind{tensorPlan: tp, part: make([]partConst, len(files))}
	tp.kind = pk
	for _, d := range t.Shape {
		tp.shape = append(tp.shape, uint64(d))
	}
	bad := func(f fileSchema, format string, args ...any) error {
		return &Error{File: f.rel, Tensor: t.Name, RowGroup: -1, Row: -1, Element: -1, Err: schemaErrorf(format, args...)}
	}
	if t.Nulls != nil && t.Nulls.Fill != nil {
		v, ok := t.Nulls.Fill.intValue()
		if !ok || dt == shardfmt.I32 && (v < math.MinInt32 || v > math.MaxInt32) {
			return nil, &Error{Tensor: t.Name, RowGroup: -1, Row: -1, Element: -1, Err: specErrorf("nulls.fill %s does not fit %s", t.Nulls.Fill, dt)}
		}
		tp.fill = partInt(dt, v)
	}
	for fi, f := range files {
		fp := f.part
		k := -1
		if fp != nil {
			for i, key := range fp.keys {
				if key.Key == t.Partition {
					k = i
				}
			}
		}
		if k < 0 {
			keys := "none: the plan records partition keys only for a source of a sources file (prep plan --sources) " +
				"that is one directory of key=value levels, not for --source"
			if fp != nil {
				var ks []string
				for _, key := range fp.keys {
					ks = append(ks, key.Key)
				}
				keys = strings.Join(ks, ", ")
			}
			return nil, bad(f, "partition %s is not a partition key of this file's source (its keys: %s)", t.Partition, keys)
		}
		typ, v := fp.keys[k].Type, fp.values[k]
		switch {
		case typ == "timestamp":
			return nil, bad(f, "partition %s is a timestamp key of source %s: it cannot be written as a tensor (declare it string under partitions: and hash it)", t.Partition, fp.source)
		case typ == "string" && t.Bytes == nil:
			return nil, bad(f, "partition %s is a string key of source %s: give bytes: {mode: hash, buckets: N} with dtype I64 (the one mode for a string key)", t.Partition, fp.source)
		case typ != "string" && t.Bytes != nil:
			return nil, bad(f, "partition %s is a%s %s key of source %s: it is written as I64 or I32, without a bytes policy", t.Partition, map[bool]string{true: "n"}[typ == "int"], typ, fp.source)
		}
		if v == hiveNull {
			if tp.fill == nil {
				return nil, bad(f, "partition %s=%s is NULL (Hive's default partition): set nulls.fill to write a value for it", t.Partition, v)
			}
			pk.part[fi] = partConst{null: true}
			continue
		}
		var n int64
		switch typ {
		case "int":
			x, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, bad(f, "partition %s=%s: %q is not a decimal integer (int64), as the plan types it int", t.Partition, v, v)
			}
			n = x
		case "date":
			d, ok := plan.ParsePartitionDate(v)
			if !ok {
				return nil, bad(f, "partition %s=%s: %q is not a date written Y-M-D, as the plan types it date", t.Partition, v, v)
			}
			n = d
		default:
			n = int64(FNV1a64([]byte(v)) % t.Bytes.Buckets)
		}
		if dt == shardfmt.I32 && (n < math.MinInt32 || n > math.MaxInt32) {
			return nil, bad(f, "partition %s=%s: %d does not fit I32", t.Partition, v, n)
		}
		pk.part[fi] = partConst{val: partInt(dt, n)}
	}
	return tp, nil
}

// intValue returns n as an int64 when it is an integer.
func (n *Number) intValue() (int64, bool) { return n.i, n.isInt }

// partInt returns v as dtype dt (I64 or I32), little-endian.
func partInt(dt shardfmt.DType, v int64) []byte {
	if dt == shardfmt.I32 {
		return binary.LittleEndian.AppendUint32(nil, uint32(int32(v)))
	}
	return binary.LittleEndian.AppendUint64(nil, uint64(v))
}

// applyPartitions writes the partition tensors' values (and masks) of file
// fi into the slots of runs in target.
func (d *decoder) applyPartitions(fi int, runs []RowRun, target *Records) {
	for _, tp := range d.plans {
		tp.kind.applyFile(fi, runs, target)
	}
}

// applyFile writes file fi's value of the partition key (or nulls.fill,
// with 0 in the mask, where the file has none) into the slots of runs.
func (tp *partitionKind) applyFile(fi int, runs []RowRun, target *Records) {
	c := tp.part[fi]
	v := c.val
	if c.null {
		v = tp.fill
	}
	for _, r := range runs {
		for slot := r.Dst; slot < r.Dst+int64(r.Hi-r.Lo); slot++ {
			copy(target.At(tp.out, slot), v)
			tp.putMask(target, slot, !c.null)
		}
	}
}

// partitionOnly is the error of a spec whose every tensor is a partition
// tensor: rows are assembled as their columns are decoded, so at least one
// tensor must read a column.
func partitionOnly(spec *Spec) error {
	for _, t := range spec.Tensors {
		if t.Partition == "" {
			return nil
		}
	}
	return fmt.Errorf("%w: every tensor is a partition tensor: add at least one tensor read from a column (such as an id)", ErrSpec)
}
