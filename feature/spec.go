package feature

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/prepml/prep/shardfmt"
)

// Spec is a feature spec: which source columns feed which output tensor and
// how values are transformed on the way. It is read from YAML by LoadSpec or
// ParseSpec (unknown keys are rejected with their line number) and extended
// by ParseTensorFlags. feature/SPEC.md specifies every key. A spec is
// identified by Hash, computed over its canonical form (SPEC.md §5), never
// over the YAML text.
//
// Example:
//
//	tensors:
//	  - name: image
//	    columns_regex: '^\d+x\d+$'   # matching leaf columns, in the file's schema order
//	    dtype: U8
//	    shape: [28, 28]
//	  - name: emb
//	    column: embedding            # a LIST column
//	    dtype: F16
//	    shape: [50]
//	    list: {pad: 0, truncate: false, lengths: true}
//	    nulls: {fill: 0, mask: true}
//	  - name: label
//	    column: label
//	    dtype: I64
type Spec struct {
	Tensors []TensorSpec `yaml:"tensors" json:"tensors"`
}

// TensorSpec describes one output tensor. Exactly one of Column, Columns,
// ColumnsRegex and Partition (a hive partition key, partition.go) names it:
//
//   - column: one column. A scalar column gives one value per sample; a LIST
//     column gives a fixed number of values per sample (see ListPolicy); a
//     string or binary column needs a BytesPolicy.
//   - columns: several scalar columns stacked in the order given; value j of
//     a sample (row-major over Shape) comes from columns[j].
//   - columns_regex: every leaf column whose name matches (Go RE2 syntax,
//     unanchored unless the pattern anchors itself), in the schema order of
//     the file, stacked like columns. Every file must yield the same list.
//
// Column names use pqread's path syntax: a top-level column is its name,
// byte-exact (it may contain dots, spaces or any UTF-8); a nested field is
// the dot-joined path of field names, and a name that could mean both a
// top-level column and a nested path is rejected as ambiguous.
//
// Shape is the per-sample shape (empty = scalar). Its product must equal the
// number of values per sample: the number of stacked columns, or the fixed
// list length. When omitted it defaults to [] for one scalar column, [k] for k
// stacked columns, and [max_len] for bytes in pad mode; a list needs it.
//
// MaxValueBytes (max_value_bytes, 0 = none) bounds the length of one
// BYTE_ARRAY value the tensor reads. It is enforced inside pqread, before
// the value is copied out of its page (pqread.Limits.MaxValueBytes, an error
// wrapping pqread.ErrLimit naming file, column, row group, page, row and
// length) whenever every tensor reading a BYTE_ARRAY column sets one (the
// reader then uses the largest); a tensor with a smaller limit than the
// largest, or beside an unlimited one, is held to its own after decoding
// (ErrValue naming the row and length).
type TensorSpec struct {
	Name          string       `yaml:"name" json:"name"`
	Column        string       `yaml:"column,omitempty" json:"column,omitempty"`
	Columns       []string     `yaml:"columns,omitempty" json:"columns,omitempty"`
	ColumnsRegex  string       `yaml:"columns_regex,omitempty" json:"columns_regex,omitempty"`
	DType         string       `yaml:"dtype" json:"dtype"`
	Shape         []int64      `yaml:"shape,omitempty" json:"shape,omitempty"`
	Nulls         *NullPolicy  `yaml:"nulls,omitempty" json:"nulls,omitempty"`
	NaN           *NaNPolicy   `yaml:"nan,omitempty" json:"nan,omitempty"`
	List          *ListPolicy  `yaml:"list,omitempty" json:"list,omitempty"`
	Bytes         *BytesPolicy `yaml:"bytes,omitempty" json:"bytes,omitempty"`
	Map           *MapPolicy   `yaml:"map,omitempty" json:"map,omitempty"`
	Image         *ImagePolicy `yaml:"image,omitempty" json:"image,omitempty"`
	MaxValueBytes int64        `yaml:"max_value_bytes,omitempty" json:"max_value_bytes,omitempty"`
	Cast          *CastPolicy  `yaml:"cast,omitempty" json:"cast,omitempty"`
	Partition     string       `yaml:"partition,omitempty" json:"partition,omitempty"`

	// Packed: a packed plan's per-document column (packed_spec.go).
	Packed *PackedPolicy `yaml:"packed,omitempty" json:"packed,omitempty"`

	// fromFlag marks a tensor given as a --tensor flag (ParseTensorFlags),
	// so that a hint names the flag form or a spec file, not spec keys the
	// flag cannot set. Not part of the spec or its hash.
	fromFlag bool
}

// NullPolicy says what a null becomes. Without it (or without Fill) any null
// is an error naming file, column, row group and row, with the number of
// nulls in that column chunk.
//
// Fill is converted to the tensor's dtype with the same rules as source
// values (so "NaN" is valid only for float dtypes and -1 only for signed
// integers). A null list row becomes a row of Fill with length 0; a null in
// bytes pad mode becomes an empty value (Fill must be 0); in hash mode Fill is
// the I64 written. Mask adds a tensor "<name>_mask" of dtype U8 (1 = valid,
// 0 = null) with the tensor's shape for stacked columns and a scalar shape
// for a list or bytes column.
type NullPolicy struct {
	Fill *Number `yaml:"fill,omitempty" json:"fill,omitempty"`
	Mask bool    `yaml:"mask,omitempty" json:"mask,omitempty"`
}

// NaNPolicy chooses what happens to NaN in float sources: "pass" (default)
// writes NaN, infinities and every other value bit-exact (or rounded for a
// narrower float dtype, keeping NaN a NaN); "error" fails on the first NaN,
// naming its location. Infinities always pass.
type NaNPolicy struct {
	Policy string `yaml:"policy" json:"policy"`
}

// ListPolicy turns a LIST column into a fixed number L = product(Shape) of
// values per sample. Without it every row must have exactly L elements.
//
//   - Pad: rows shorter than L are padded with this value (converted like
//     Fill); without it a shorter row is an error.
//   - Truncate: rows longer than L keep their first L elements; without it a
//     longer row is an error.
//   - Lengths: adds "<name>_lengths" (LengthsDType, I32 by default, or I64),
//     a scalar per sample holding the source length before padding or
//     truncation (0 for a null row).
//   - ElementFill: value written for a null list element; without it a null
//     element is an error naming row and element.
//   - ElementMask: adds "<name>_element_mask", U8 with the tensor's shape:
//     1 where a non-null source element was written, 0 for null elements and
//     padding.
//   - Jagged: the tensor is jagged (shard format 2.0): each sample holds
//     its row's elements, as many as the row has, per-value shape [] and
//     no Shape; the shard's offsets give each sample's length. Pad,
//     Truncate and Lengths are refused with it. A null row becomes an
//     empty list when the tensor has a NullPolicy (nulls.fill is refused:
//     nothing is filled); a null element takes ElementFill, or 0 when
//     only ElementMask is given, whose "<name>_element_mask" is then a
//     jagged U8 tensor sharing the tensor's offsets.
type ListPolicy struct {
	Pad          *Number `yaml:"pad,omitempty" json:"pad,omitempty"`
	Truncate     bool    `yaml:"truncate,omitempty" json:"truncate,omitempty"`
	Lengths      bool    `yaml:"lengths,omitempty" json:"lengths,omitempty"`
	LengthsDType string  `yaml:"lengths_dtype,omitempty" json:"lengths_dtype,omitempty"`
	ElementFill  *Number `yaml:"element_fill,omitempty" json:"element_fill,omitempty"`
	ElementMask  bool    `yaml:"element_mask,omitempty" json:"element_mask,omitempty"`
	Jagged       bool    `yaml:"jagged,omitempty" json:"jagged,omitempty"`
}

// BytesPolicy turns a string or binary column (BYTE_ARRAY, or a
// FIXED_LEN_BYTE_ARRAY that is neither DECIMAL nor FLOAT16) into numbers.
//
//   - mode "hash": one I64 per sample: FNV-1a 64-bit of the raw value bytes
//     (offset basis 14695981039346656037, prime 1099511628211, one byte at a
//     time, xor then multiply) taken modulo Buckets (1 <= Buckets <= 2^63-1).
//   - mode "pad": U8 with shape [MaxLen]: the value bytes, zero-padded. A
//     value longer than MaxLen is an error unless Truncate, which keeps the
//     first MaxLen bytes. Lengths adds "<name>_lengths" (I32, or
//     LengthsDType) with the source length in bytes.
type BytesPolicy struct {
	Mode         string `yaml:"mode" json:"mode"`
	Buckets      uint64 `yaml:"buckets,omitempty" json:"buckets,omitempty"`
	MaxLen       int64  `yaml:"max_len,omitempty" json:"max_len,omitempty"`
	Truncate     bool   `yaml:"truncate,omitempty" json:"truncate,omitempty"`
	Lengths      bool   `yaml:"lengths,omitempty" json:"lengths,omitempty"`
	LengthsDType string `yaml:"lengths_dtype,omitempty" json:"lengths_dtype,omitempty"`
}

// MapPolicy turns a MAP column (Column names the map; its key and value
// leaves are read) into tensors (SPEC.md §2.6). Without Keys it gives two
// jagged tensors sharing offsets: "<name>.keys", the keys as KeyDType
// (required for numeric keys; string or binary keys need KeyBytes instead,
// whose hash mode gives I64 and pad mode U8 values of shape [max_len]),
// and "<name>.values", the values as the tensor's DType. With Keys it
// gives one dense tensor "<name>" of shape [len(Keys)]: element i is the
// value of key Keys[i] in the row (an integer key's decimal text, or a
// string key's bytes), or Fill where the row lacks it; a listed key twice
// in one row is an error. A null map row is an empty map under a
// NullPolicy (Mask adds the fixed U8 "<name>_mask"); a null value takes
// list.element_fill (list.element_mask adds the jagged
// "<name>_element_mask", jagged form only), else is an error.
type MapPolicy struct {
	KeyDType string       `yaml:"key_dtype,omitempty" json:"key_dtype,omitempty"`
	KeyBytes *BytesPolicy `yaml:"key_bytes,omitempty" json:"key_bytes,omitempty"`
	Keys     []string     `yaml:"keys,omitempty" json:"keys,omitempty"`
	Fill     *Number      `yaml:"fill,omitempty" json:"fill,omitempty"`
}

// CastPolicy declares conversions that are refused by default.
//
//   - FromUnannotated "F16": read a 2-byte FIXED_LEN_BYTE_ARRAY without the
//     FLOAT16 annotation as IEEE half floats (little-endian).
//   - Round: float -> integer dtypes reject non-integral values by default;
//     "trunc" rounds toward zero, "nearest" rounds to nearest, ties to even.
//   - Widen: accept a column whose physical or logical type differs between
//     source files, as long as each file's type converts to the dtype.
//   - Overflow: what a value too large for F16, BF16, F8_E4M3 or F8_E5M2
//     becomes (see cast.go): "inf" (default) stores ±Inf (±448 for
//     F8_E4M3, which has no infinity) and counts it in Summary.Overflows;
//     "error" fails the run naming file, column, row group and row.
type CastPolicy struct {
	FromUnannotated string `yaml:"from_unannotated,omitempty" json:"from_unannotated,omitempty"`
	Round           string `yaml:"round,omitempty" json:"round,omitempty"`
	Widen           bool   `yaml:"widen,omitempty" json:"widen,omitempty"`
	Overflow        string `yaml:"overflow,omitempty" json:"overflow,omitempty"`
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "sequence"
	}
	return "node"
}

// LoadSpec reads and validates a YAML feature spec file. Errors wrap ErrSpec
// and name the file (and the line, for YAML errors).
func LoadSpec(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading feature spec: %w", err)
	}
	return ParseSpec(data, path)
}

// ParseSpec parses and validates a YAML feature spec. name is used in error
// messages. Unknown keys are errors.
func ParseSpec(data []byte, name string) (*Spec, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err == nil {
		if err := nullKey(&doc); err != nil {
			return nil, fmt.Errorf("%s: %w: %v", name, ErrSpec, err)
		}
		if err := unknownKey(&doc); err != nil {
			return nil, fmt.Errorf("%s: %w: %v", name, ErrSpec, err)
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var s Spec
	if err := dec.Decode(&s); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: %w: empty document", name, ErrSpec)
		}
		return nil, fmt.Errorf("%s: %w: %v", name, ErrSpec, err)
	}
	// A second document ("---" then more keys) would otherwise be ignored.
	var next yaml.Node
	if err := dec.Decode(&next); err == nil && !emptyDocument(&next) {
		return nil, fmt.Errorf("%s: %w: line %d: a second YAML document; a spec is one document (join the tensors lists)", name, ErrSpec, next.Line)
	} else if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w: %v", name, ErrSpec, err)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &s, nil
}

// nullKey finds a mapping key that is YAML null (null, ~, or empty), which
// the decoder's unknown-field check lets through silently.
func nullKey(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Tag == "!!null" {
				return fmt.Errorf("line %d: key %q is null, not a spec key (quote it if it names a column)", k.Line, k.Value)
			}
		}
	}
	for _, c := range n.Content {
		if err := nullKey(c); err != nil {
			return err
		}
	}
	return nil
}

// emptyDocument reports whether n, a decoded YAML document, holds nothing
// (a bare "---" or a null).
func emptyDocument(n *yaml.Node) bool {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	return n.Kind == 0 || n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

var shapeFlagRE = regexp.MustCompile(`^[0-9]+(x[0-9]+)*$`)

// ParseTensorFlags parses --tensor flags of the form
// NAME=COL[,COL...]:DTYPE[:SHAPE], SHAPE like "50" or "4x4", or
// NAME=COL:DTYPE:jagged, a LIST column read as a jagged tensor
// (List.Jagged; a null row or element is then an error, as in a spec
// without nulls or list.element_fill). One column becomes
// TensorSpec.Column, several become Columns. The result is not validated
// on its own; append it to a Spec and call Validate.
func ParseTensorFlags(flags []string) ([]TensorSpec, error) {
	var out []TensorSpec
	for _, f := range flags {
		name, rest, ok := strings.Cut(f, "=")
		if !ok || name == "" || rest == "" {
			return nil, specErrorf("--tensor %q: want NAME=COL[,COL...]:DTYPE[:SHAPE] or NAME=COL:DTYPE:jagged", f)
		}
		parts := strings.Split(rest, ":")
		if len(parts) < 2 {
			return nil, specErrorf("--tensor %q: missing :DTYPE", f)
		}
		t := TensorSpec{Name: name, fromFlag: true}
		n := len(parts)
		if n >= 3 && parts[n-1] == "jagged" {
			t.List = &ListPolicy{Jagged: true}
			n--
		} else if n >= 3 && shapeFlagRE.MatchString(parts[n-1]) {
			for _, d := range strings.Split(parts[n-1], "x") {
				v, err := strconv.ParseInt(d, 10, 64)
				if err != nil {
					return nil, specErrorf("--tensor %q: bad shape: %v", f, err)
				}
				t.Shape = append(t.Shape, v)
			}
			n--
		}
		if n >= 3 {
			if _, err := shardfmt.ParseDType(parts[n-1]); err != nil {
				return nil, specErrorf("--tensor %q: bad shape %q: want positive sizes joined by x, e.g. 50 or 28x28, or jagged", f, parts[n-1])
			}
		}
		t.DType = parts[n-1]
		cols := strings.Split(strings.Join(parts[:n-1], ":"), ",")
		if len(cols) == 1 {
			t.Column = cols[0]
		} else {
			t.Columns = cols
		}
		out = append(out, t)
	}
	return out, nil
}

// Validate checks everything that can be checked without the source files:
// names, dtypes, shapes and policies. Errors wrap ErrSpec and name the tensor.
func (s *Spec) Validate() error {
	if len(s.Tensors) == 0 {
		return specErrorf("no tensors")
	}
	for i := range s.Tensors {
		t := &s.Tensors[i]
		if err := t.validate(); err != nil {
			if t.Name == "" {
				return fmt.Errorf("tensor %d: %w", i, err)
			}
			return fmt.Errorf("tensor %q: %w", t.Name, err)
		}
	}
	return s.checkNames()
}

// ReservedNames are the names no tensor may take: the keys gpuload's
// ShardDataset gives each item beside the tensors (sample_ids, pad,
// step) and the files prep export writes beside theirs (sample_ids.npy,
// pad_mask.npy, and sample_sources.npy for a plan with a mixture).
var ReservedNames = []string{"sample_ids", "pad", "step", "pad_mask", "sample_sources"}

// checkNames refuses two outputs of the spec with one name, an output
// taking a reserved name (ReservedNames), and a name that readers derive
// from a jagged output: its offsets' "<name>_offsets" (prep export's
// <name>_offsets.npy) and a jagged list's "<name>_inner_lengths" (taken
// when its column is a list of lists, known only from the source). The
// error names both tensors.
func (s *Spec) checkNames() error {
	owner := map[string]string{} // output or derived name -> who takes it
	stems := map[string]string{} // its file name in prep export (shardfmt.FileStem) -> the name
	for _, r := range ReservedNames {
		stems[shardfmt.FileStem(r)] = r
	}
	taken := func(n, by string) error {
		if o, dup := owner[n]; dup {
			return specErrorf("tensor name %q used twice: by %s and by %s (mask and lengths tensors take the names <name>_mask, <name>_element_mask, <name>_lengths, a jagged list <name>_inner_lengths; a map's <name>.keys and <name>.values; a jagged tensor's offsets <name>_offsets)", n, o, by)
		}
		if m, dup := stems[shardfmt.FileStem(n)]; dup && m != n {
			other := owner[m]
			if other == "" {
				other = "the reserved name " + strconv.Quote(m)
			}
			return specErrorf("tensor names %q (%s) and %q (%s) are one file name, %s.npy, once prep export writes '/', '\\' and NUL bytes as '_'; rename one of them", m, other, n, by, shardfmt.FileStem(n))
		}
		owner[n] = by
		stems[shardfmt.FileStem(n)] = n
		return nil
	}
	for i := range s.Tensors {
		t := &s.Tensors[i]
		for _, o := range t.outputs() {
			by := fmt.Sprintf("tensor %q", t.Name)
			if o.name != t.Name {
				by = fmt.Sprintf("tensor %q (as %q)", t.Name, o.name)
			}
			if slices.Contains(ReservedNames, o.name) {
				return specErrorf("%s: the name %q is reserved (gpuload's ShardDataset items hold sample_ids, pad and step beside the tensors; prep export writes sample_ids.npy, pad_mask.npy and sample_sources.npy); rename the tensor", by, o.name)
			}
			if err := taken(o.name, by); err != nil {
				return err
			}
			if !o.jagged {
				continue
			}
			if err := taken(DerivedName(o.name, DerivedOffsets), fmt.Sprintf("tensor %q (as the offsets of jagged %q, exported as %s_offsets.npy)", t.Name, o.name, o.name)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (t *TensorSpec) validate() error {
	if t.Name == "" {
		return specErrorf("missing name")
	}
	for _, v := range append([]string{t.Name, t.Column, t.ColumnsRegex, t.Partition}, t.Columns...) {
		if !utf8.ValidString(v) {
			// The canonical form (SPEC.md) and the manifest are UTF-8.
			return specErrorf("%q is not valid UTF-8", v)
		}
	}
	if strings.ContainsFunc(t.Name, unicode.IsControl) {
		// It would split verify's finding lines and inspect's tables,
		// and become part of an exported file name.
		return specErrorf("name %q holds a control character", t.Name)
	}
	if t.Partition != "" {
		return t.validatePartition()
	}
	srcs := 0
	if t.Column != "" {
		srcs++
	}
	if len(t.Columns) > 0 {
		srcs++
		for _, c := range t.Columns {
			if c == "" {
				return specErrorf("empty column name in columns")
			}
		}
	}
	if t.ColumnsRegex != "" {
		srcs++
		if _, err := regexp.Compile(t.ColumnsRegex); err != nil {
			return specErrorf("columns_regex: %v", err)
		}
	}
	if srcs != 1 {
		return specErrorf("set exactly one of column, columns, columns_regex and partition")
	}
	if t.Image != nil {
		if err := t.validateImage(); err != nil {
			return err
		}
	}
	dt, err := shardfmt.ParseDType(t.DType)
	if err != nil {
		return specErrorf("dtype: %v", err)
	}
	if len(t.Shape) > 8 {
		return specErrorf("shape %v has more than 8 dimensions", t.Shape)
	}
	for _, d := range t.Shape {
		if d <= 0 || d > 1<<31 {
			return specErrorf("shape %v: every dimension must be in [1, 2^31]", t.Shape)
		}
	}
	if t.NaN != nil && t.NaN.Policy != "pass" && t.NaN.Policy != "error" {
		return specErrorf("nan.policy must be pass or error, not %q", t.NaN.Policy)
	}
	if t.MaxValueBytes < 0 {
		return specErrorf("max_value_bytes must not be negative")
	}
	if c := t.Cast; c != nil {
		if c.FromUnannotated != "" && c.FromUnannotated != "F16" {
			return specErrorf("cast.from_unannotated must be F16, not %q", c.FromUnannotated)
		}
		switch c.Round {
		case "", "trunc", "nearest":
		default:
			return specErrorf("cast.round must be trunc or nearest, not %q", c.Round)
		}
		switch c.Overflow {
		case "", "inf", "error":
		default:
			return specErrorf("cast.overflow must be inf or error, not %q", c.Overflow)
		}
	}
	if l := t.List; l != nil && t.Map == nil {
		if t.Column == "" {
			return specErrorf("list policy needs a single column")
		}
		if _, err := lengthsDType(l.LengthsDType); err != nil {
			return err
		}
		if l.Jagged {
			if err := t.validateJagged(); err != nil {
				return err
			}
		}
	}
	if t.Map != nil {
		if err := t.validateMap(); err != nil {
			return err
		}
	}
	if b := t.Bytes; b != nil {
		if t.Column == "" {
			return specErrorf("bytes policy needs a single column")
		}
		jag := t.jagged() && t.Map == nil
		if b.Mode == "jagged" {
			return t.validateBytesJagged()
		}
		if t.List != nil && !jag {
			return specErrorf("bytes and list policies are exclusive, but for a jagged list of strings (list: {jagged: true}), whose elements bytes makes numbers of")
		}
		if jag && (b.Lengths || b.LengthsDType != "") {
			return specErrorf("bytes.lengths and lengths_dtype do not apply to a jagged list (each element is hashed, or padded to max_len)")
		}
		switch b.Mode {
		case "hash":
			if dt != shardfmt.I64 {
				return specErrorf("bytes.mode hash writes I64, not %s", dt)
			}
			if b.Buckets == 0 || b.Buckets > math.MaxInt64 {
				return specErrorf("bytes.buckets must be in [1, 2^63-1]")
			}
			if shapeProduct(t.Shape) != 1 {
				return specErrorf("bytes.mode hash gives one value per sample; shape %v", t.Shape)
			}
			if b.Lengths || b.MaxLen != 0 || b.Truncate {
				return specErrorf("bytes.max_len, truncate and lengths apply to mode pad only")
			}
		case "pad":
			if dt != shardfmt.U8 {
				return specErrorf("bytes.mode pad writes U8, not %s", dt)
			}
			if b.MaxLen <= 0 {
				return specErrorf("bytes.mode pad needs max_len > 0")
			}
			if t.Shape != nil && shapeProduct(t.Shape) != b.MaxLen {
				return specErrorf("shape %v does not hold max_len %d bytes", t.Shape, b.MaxLen)
			}
			if _, err := lengthsDType(b.LengthsDType); err != nil {
				return err
			}
		default:
			return specErrorf("bytes.mode must be hash, pad or jagged, not %q", b.Mode)
		}
	}
	return nil
}

// validateJagged checks the keys that list.jagged excludes.
func (t *TensorSpec) validateJagged() error {
	l := t.List
	switch {
	case t.Shape != nil:
		return specErrorf("list.jagged takes no shape: each value is a scalar and the offsets give each sample's length")
	case l.Pad != nil || l.Truncate || l.Lengths || l.LengthsDType != "":
		return specErrorf("list.pad, truncate, lengths and lengths_dtype do not apply to a jagged tensor: its offsets give each sample's length")
	case t.Nulls != nil && t.Nulls.Fill != nil:
		return specErrorf("nulls.fill does not apply to a jagged tensor: a null row becomes an empty list (give nulls: {} or nulls: {mask: true})")
	}
	return nil
}

// validateMap checks a map policy.
func (t *TensorSpec) validateMap() error {
	m := t.Map
	switch {
	case t.Column == "":
		return specErrorf("map policy needs a single column")
	case t.Bytes != nil:
		return specErrorf("map and bytes policies are exclusive (map.key_bytes reads string keys)")
	case t.List != nil && (t.List.Pad != nil || t.List.Truncate || t.List.Lengths || t.List.LengthsDType != "" || t.List.Jagged):
		return specErrorf("a map takes list.element_fill and list.element_mask only (for null values); list.pad, truncate, lengths, lengths_dtype and jagged do not apply")
	case t.List != nil && t.List.ElementMask && m.Keys != nil:
		return specErrorf("list.element_mask does not apply with map.keys (a null value of a listed key takes list.element_fill)")
	case t.Nulls != nil && t.Nulls.Fill != nil:
		return specErrorf("nulls.fill does not apply to a map: a null row becomes an empty map (give nulls: {} or nulls: {mask: true})")
	}
	if m.Keys == nil {
		switch {
		case m.Fill != nil:
			return specErrorf("map.fill applies with map.keys only")
		case t.Shape != nil:
			return specErrorf("a map without map.keys gives jagged tensors, which take no shape")
		}
		if m.KeyDType != "" {
			if _, err := shardfmt.ParseDType(m.KeyDType); err != nil {
				return specErrorf("map.key_dtype: %v", err)
			}
		}
		if b := m.KeyBytes; b != nil {
			kt := TensorSpec{Name: t.Name, Column: t.Column, DType: "I64", Bytes: b}
			if b.Mode == "pad" {
				kt.DType = "U8"
			}
			if m.KeyDType != "" {
				return specErrorf("map.key_dtype and map.key_bytes are exclusive (key_bytes gives I64 or U8)")
			}
			if err := kt.validate(); err != nil {
				return fmt.Errorf("map.key_bytes: %w", err)
			}
		}
		return nil
	}
	switch {
	case len(m.Keys) == 0:
		return specErrorf("map.keys is empty")
	case m.Fill == nil:
		return specErrorf("map.keys needs map.fill, the value of a key a row lacks")
	case m.KeyDType != "" || m.KeyBytes != nil:
		return specErrorf("map.key_dtype and map.key_bytes do not apply with map.keys (keys are matched by their bytes, integers by value)")
	case t.Shape != nil && (len(t.Shape) != 1 || t.Shape[0] != int64(len(m.Keys))):
		return specErrorf("shape %v does not hold the %d keys of map.keys", t.Shape, len(m.Keys))
	}
	seen := map[string]bool{}
	for _, k := range m.Keys {
		if seen[k] {
			return specErrorf("map.keys holds %q twice", k)
		}
		if !utf8.ValidString(k) {
			return specErrorf("%q is not valid UTF-8", k)
		}
		seen[k] = true
	}
	return nil
}

// jagged reports whether t is a jagged tensor (list.jagged).
func (t *TensorSpec) jagged() bool { return t.List != nil && t.List.Jagged }

func lengthsDType(s string) (shardfmt.DType, error) {
	switch s {
	case "", "I32":
		return shardfmt.I32, nil
	case "I64":
		return shardfmt.I64, nil
	}
	return 0, specErrorf("lengths_dtype must be I32 or I64, not %q", s)
}

// specOutput is a tensor a spec's tensor produces, or may produce: its
// name and whether it is jagged.
type specOutput struct {
	name   string
	jagged bool
}

// outputs returns every tensor t produces, main tensor first, and, last,
// a jagged list's <name>_inner_lengths, which it produces when its column
// is a list of lists.
func (t *TensorSpec) outputs() []specOutput {
	jag := t.jagged() || (t.Map != nil && t.Map.Keys == nil) || t.bytesJagged()
	n := []specOutput{{t.Name, jag}}
	if (t.Nulls != nil && t.Nulls.Mask) || t.imageMasked() {
		n = append(n, specOutput{DerivedName(t.Name, DerivedMask), false})
	}
	if t.Image != nil && t.Image.OriginalSize {
		n = append(n, specOutput{DerivedName(t.Name, DerivedOriginalSize), false})
	}
	if t.List != nil && t.List.ElementMask {
		n = append(n, specOutput{DerivedName(t.Name, DerivedElementMask), jag})
	}
	if (t.List != nil && t.List.Lengths) || (t.Bytes != nil && t.Bytes.Lengths) {
		n = append(n, specOutput{DerivedName(t.Name, DerivedLengths), false})
	}
	if t.Map != nil && t.Map.Keys == nil {
		n[0].name = DerivedName(t.Name, DerivedMapKeys)
		n = slices.Insert(n, 1, specOutput{DerivedName(t.Name, DerivedMapValues), true})
	}
	if t.jagged() && t.Map == nil {
		n = append(n, specOutput{DerivedName(t.Name, DerivedInnerLengths), true})
	}
	return n
}

// outputNames returns the names of every tensor t produces, main tensor
// first, but for a jagged list's <name>_inner_lengths (a list of lists'
// only).
func (t *TensorSpec) outputNames() []string {
	var n []string
	for _, o := range t.outputs() {
		if !t.jagged() || t.Map != nil || o.name != DerivedName(t.Name, DerivedInnerLengths) {
			n = append(n, o.name)
		}
	}
	return n
}

func shapeProduct(s []int64) int64 {
	p := int64(1)
	for _, d := range s {
		p *= d
	}
	return p
}
