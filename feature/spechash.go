package feature

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// The identity of a feature spec (SPEC.md §Canonical form and hash).
//
// A spec hash names its version in its prefix, so a shard set written by an
// earlier version of prep is recognised, not rejected:
//
//   - version 2 (SpecHashV2, what Hash returns): "v2:sha256:<hex>" over the
//     canonical form of SPEC.md, keys sorted, defaults omitted;
//   - version 1 (SpecHashV1): "sha256:<hex>" over encoding/json's form of
//     the Go structs as they were declared when it was defined (fields in
//     declaration order). It is frozen here as its own types (specV1 ...),
//     so reordering Spec's fields changes neither version.

// Spec hash prefixes, one per version of the canonical form.
const (
	SpecHashV1 = "sha256:"    // version 1: Go struct field order (frozen)
	SpecHashV2 = "v2:sha256:" // version 2: SPEC.md's canonical form
)

// CanonicalJSON returns the canonical form of the spec defined by SPEC.md
// §Canonical form: JSON with the YAML key names, every object's keys in
// byte order, keys at their default omitted, integers in decimal, fill and
// pad numbers as their canonical strings, no white space. It is what Hash
// digests and what the manifest records.
func (s *Spec) CanonicalJSON() []byte {
	var b []byte
	b = append(b, `{"tensors":[`...)
	for i := range s.Tensors {
		if i > 0 {
			b = append(b, ',')
		}
		b = s.Tensors[i].canonical().append(b)
	}
	return append(b, "]}"...)
}

// Hash returns the spec's version 2 hash: SpecHashV2 followed by the hex
// SHA-256 of CanonicalJSON.
func (s *Spec) Hash() string {
	h := sha256.Sum256(s.CanonicalJSON())
	return SpecHashV2 + hex.EncodeToString(h[:])
}

// MatchesHash reports whether h, a spec hash of any version (read from a
// manifest or a shard's provenance), is the hash of s.
func (s *Spec) MatchesHash(h string) bool {
	switch {
	case strings.HasPrefix(h, SpecHashV2):
		return h == s.Hash()
	case strings.HasPrefix(h, SpecHashV1):
		// Version 1 has no words for the keys added after it: a spec
		// using one matches no version 1 hash.
		return !s.usesV2Keys() && h == s.hashV1()
	}
	return false
}

// usesV2Keys reports whether s sets a key that version 1 of the canonical
// form cannot express (list.jagged, map, image, bytes.mode jagged,
// partition, packed).
func (s *Spec) usesV2Keys() bool {
	for i := range s.Tensors {
		if t := &s.Tensors[i]; t.jagged() || t.Map != nil || t.Image != nil || t.bytesJagged() || t.Partition != "" || t.Packed != nil {
			return true
		}
	}
	return false
}

// hashV1 returns the spec's version 1 hash.
func (s *Spec) hashV1() string {
	h := sha256.Sum256(s.canonicalV1(true))
	return SpecHashV1 + hex.EncodeToString(h[:])
}

// ManifestSpec returns the spec as the manifest of a shard set with spec
// hash h records it: the canonical form of h's version, so that the
// manifest's spec digests to its hash.
func (s *Spec) ManifestSpec(h string) json.RawMessage {
	if strings.HasPrefix(h, SpecHashV2) {
		return s.CanonicalJSON()
	}
	return s.canonicalV1(false)
}

// object is a JSON object under construction: its members are written in
// byte order of their keys.
type object []member

type member struct {
	key string
	val any // string, bool, int64, uint64, []string, []int64, *Number, object
}

// str, flag and num add a member unless its value is the default.
func (o *object) str(k, v string) {
	if v != "" {
		*o = append(*o, member{k, v})
	}
}

func (o *object) flag(k string, v bool) {
	if v {
		*o = append(*o, member{k, v})
	}
}

func (o *object) num(k string, v *Number) {
	if v != nil {
		*o = append(*o, member{k, v})
	}
}

// sub adds a policy object, present even when empty ("nulls: {}").
func (o *object) sub(k string, v object) { *o = append(*o, member{k, v}) }

// canonical returns t as a canonical-form object.
func (t *TensorSpec) canonical() object {
	var o object
	o.str("name", t.Name)
	o.str("column", t.Column)
	if len(t.Columns) > 0 {
		o = append(o, member{"columns", t.Columns})
	}
	o.str("columns_regex", t.ColumnsRegex)
	o.str("partition", t.Partition)
	o.str("dtype", t.DType)
	if len(t.Shape) > 0 {
		o = append(o, member{"shape", t.Shape})
	}
	if n := t.Nulls; n != nil {
		var p object
		p.num("fill", n.Fill)
		p.flag("mask", n.Mask)
		o.sub("nulls", p)
	}
	if n := t.NaN; n != nil {
		var p object
		p.str("policy", n.Policy)
		o.sub("nan", p)
	}
	if l := t.List; l != nil {
		var p object
		p.num("pad", l.Pad)
		p.flag("truncate", l.Truncate)
		p.flag("lengths", l.Lengths)
		p.str("lengths_dtype", l.LengthsDType)
		p.num("element_fill", l.ElementFill)
		p.flag("element_mask", l.ElementMask)
		p.flag("jagged", l.Jagged)
		o.sub("list", p)
	}
	if b := t.Bytes; b != nil {
		o.sub("bytes", b.canonical())
	}
	if p := t.Image; p != nil {
		o.sub("image", p.canonical())
	}
	if m := t.Map; m != nil {
		var p object
		p.str("key_dtype", m.KeyDType)
		if b := m.KeyBytes; b != nil {
			p.sub("key_bytes", b.canonical())
		}
		if len(m.Keys) > 0 {
			p = append(p, member{"keys", m.Keys})
		}
		p.num("fill", m.Fill)
		o.sub("map", p)
	}
	if t.MaxValueBytes != 0 {
		o = append(o, member{"max_value_bytes", t.MaxValueBytes})
	}
	if pp := t.Packed; pp != nil {
		var p object
		p.str("per", pp.Per)
		p.num("pad", pp.Pad)
		o.sub("packed", p)
	}
	if c := t.Cast; c != nil {
		var p object
		p.str("from_unannotated", c.FromUnannotated)
		p.str("round", c.Round)
		p.flag("widen", c.Widen)
		p.str("overflow", c.Overflow)
		o.sub("cast", p)
	}
	return o
}

// canonical returns b as a canonical-form object.
func (b *BytesPolicy) canonical() object {
	var p object
	p.str("mode", b.Mode)
	if b.Buckets != 0 {
		p = append(p, member{"buckets", b.Buckets})
	}
	if b.MaxLen != 0 {
		p = append(p, member{"max_len", b.MaxLen})
	}
	p.flag("truncate", b.Truncate)
	p.flag("lengths", b.Lengths)
	p.str("lengths_dtype", b.LengthsDType)
	return p
}

// append writes o to b in canonical form.
func (o object) append(b []byte) []byte {
	sorted := slices.Clone(o)
	slices.SortFunc(sorted, func(x, y member) int { return strings.Compare(x.key, y.key) })
	b = append(b, '{')
	for i, m := range sorted {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, m.key)
		b = append(b, ':')
		switch v := m.val.(type) {
		case string:
			b = appendString(b, v)
		case bool:
			b = strconv.AppendBool(b, v)
		case int64:
			b = strconv.AppendInt(b, v, 10)
		case uint64:
			b = strconv.AppendUint(b, v, 10)
		case *Number:
			b = appendString(b, v.String())
		case []string:
			b = append(b, '[')
			for j, s := range v {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendString(b, s)
			}
			b = append(b, ']')
		case []int64:
			b = append(b, '[')
			for j, n := range v {
				if j > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendInt(b, n, 10)
			}
			b = append(b, ']')
		case object:
			b = v.append(b)
		default:
			panic("convert: canonical form of a " + strconv.Quote(m.key) + " value of an unknown type")
		}
	}
	return append(b, '}')
}

// appendString writes s as a JSON string in canonical form (SPEC.md): '"'
// and '\' escaped by a backslash, U+0008, U+0009, U+000A, U+000C and
// U+000D as \b, \t, \n, \f and \r, other bytes below 0x20 as \u00xx with
// lowercase hex, every other byte as it is (s is valid UTF-8: Validate
// checks it).
func appendString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		case '\f':
			b = append(b, '\\', 'f')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			if c < 0x20 {
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
			} else {
				b = append(b, c)
			}
		}
	}
	return append(b, '"')
}

// Version 1, frozen: the Go structs as declared when version 1 was
// defined, encoded by encoding/json (fields in declaration order, omitempty
// as tagged, HTML characters escaped as \u003c, \u003e and \u0026).

type specV1 struct {
	Tensors []tensorV1 `json:"tensors"`
}

type tensorV1 struct {
	Name          string   `json:"name"`
	Column        string   `json:"column,omitempty"`
	Columns       []string `json:"columns,omitempty"`
	ColumnsRegex  string   `json:"columns_regex,omitempty"`
	DType         string   `json:"dtype"`
	Shape         []int64  `json:"shape,omitempty"`
	Nulls         *nullsV1 `json:"nulls,omitempty"`
	NaN           *nanV1   `json:"nan,omitempty"`
	List          *listV1  `json:"list,omitempty"`
	Bytes         *bytesV1 `json:"bytes,omitempty"`
	MaxValueBytes int64    `json:"max_value_bytes,omitempty"`
	Cast          *castV1  `json:"cast,omitempty"`
}

type nullsV1 struct {
	Fill *Number `json:"fill,omitempty"`
	Mask bool    `json:"mask,omitempty"`
}

type nanV1 struct {
	Policy string `json:"policy"`
}

type listV1 struct {
	Pad          *Number `json:"pad,omitempty"`
	Truncate     bool    `json:"truncate,omitempty"`
	Lengths      bool    `json:"lengths,omitempty"`
	LengthsDType string  `json:"lengths_dtype,omitempty"`
	ElementFill  *Number `json:"element_fill,omitempty"`
	ElementMask  bool    `json:"element_mask,omitempty"`
}

type bytesV1 struct {
	Mode         string `json:"mode"`
	Buckets      uint64 `json:"buckets,omitempty"`
	MaxLen       int64  `json:"max_len,omitempty"`
	Truncate     bool   `json:"truncate,omitempty"`
	Lengths      bool   `json:"lengths,omitempty"`
	LengthsDType string `json:"lengths_dtype,omitempty"`
}

type castV1 struct {
	FromUnannotated string `json:"from_unannotated,omitempty"`
	Round           string `json:"round,omitempty"`
	Widen           bool   `json:"widen,omitempty"`
	Overflow        string `json:"overflow,omitempty"`
}

// canonicalV1 returns the version 1 form of s; escapeHTML false gives the
// bytes an old manifest's spec field held (its encoder did not escape).
func (s *Spec) canonicalV1(escapeHTML bool) []byte {
	v := specV1{Tensors: make([]tensorV1, len(s.Tensors))}
	for i, t := range s.Tensors {
		o := tensorV1{Name: t.Name, Column: t.Column, Columns: t.Columns, ColumnsRegex: t.ColumnsRegex,
			DType: t.DType, Shape: t.Shape, MaxValueBytes: t.MaxValueBytes}
		if n := t.Nulls; n != nil {
			o.Nulls = &nullsV1{Fill: n.Fill, Mask: n.Mask}
		}
		if n := t.NaN; n != nil {
			o.NaN = &nanV1{Policy: n.Policy}
		}
		if l := t.List; l != nil {
			o.List = &listV1{Pad: l.Pad, Truncate: l.Truncate, Lengths: l.Lengths, LengthsDType: l.LengthsDType,
				ElementFill: l.ElementFill, ElementMask: l.ElementMask}
		}
		if b := t.Bytes; b != nil {
			o.Bytes = &bytesV1{Mode: b.Mode, Buckets: b.Buckets, MaxLen: b.MaxLen, Truncate: b.Truncate,
				Lengths: b.Lengths, LengthsDType: b.LengthsDType}
		}
		if c := t.Cast; c != nil {
			o.Cast = &castV1{FromUnannotated: c.FromUnannotated, Round: c.Round, Widen: c.Widen, Overflow: c.Overflow}
		}
		v.Tensors[i] = o
	}
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(escapeHTML)
	if err := enc.Encode(v); err != nil {
		panic(err) // every field is marshalable
	}
	return []byte(strings.TrimSuffix(buf.String(), "\n"))
}
