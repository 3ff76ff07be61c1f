package verify

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/shardfmt"
)

// Derived tensors under --deep. The value comparison checks a shard
// against the source through the same transforms convert wrote it with,
// so a fault shared by the two (a derived tensor declared or filled
// wrongly by both) would pass it. The tensors a feature spec derives
// beside a tensor (feature/SPEC.md §2.7: <name>_mask, <name>_element_mask,
// <name>_lengths, <name>_inner_lengths) are therefore also checked on
// their own, from the manifest's spec and the shard alone:
//
//   - once per shard, each is declared as the spec derives it: present,
//     its dtype, its shape (per sample, or per value when jagged) and
//     whether it is jagged (a finding of kind shard_identity naming it);
//   - in every batch compared, each of its present samples agrees with the
//     tensor it derives from (value_mismatch naming it): masks hold 0 or
//     1; a null row (mask 0) of a jagged tensor holds no values, and of a
//     fixed list length 0 and no element marked present; a jagged element
//     mask holds one value per value of its tensor; a list of lists' inner
//     lengths are not negative and add up to the sample's values count;
//     lengths are not negative, and a fixed list's element mask marks no
//     element at or past its length.

// specDoc is what the derived checks read of a manifest's feature spec
// (its canonical form, SPEC.md §5, or version 1's Go encoding: the same
// key names).
type specDoc struct {
	Tensors []specTensor `json:"tensors"`
}

type specTensor struct {
	Name  string `json:"name"`
	Nulls *struct {
		Mask bool `json:"mask"`
	} `json:"nulls"`
	List *struct {
		ElementMask  bool   `json:"element_mask"`
		Lengths      bool   `json:"lengths"`
		LengthsDType string `json:"lengths_dtype"`
		Jagged       bool   `json:"jagged"`
	} `json:"list"`
	Bytes *struct {
		Lengths      bool   `json:"lengths"`
		LengthsDType string `json:"lengths_dtype"`
	} `json:"bytes"`
	Map *struct {
		Keys []string `json:"keys"`
	} `json:"map"`
	Image *struct {
		Invalid string `json:"invalid"`
	} `json:"image"`
	Partition string `json:"partition"`
}

// derivedKind is what a derived tensor records of its base.
type derivedKind int

const (
	derivedMask      derivedKind = iota + 1 // <name>_mask: 1 valid row, 0 null row
	derivedElemMask                         // <name>_element_mask: 1 per present element
	derivedLengths                          // <name>_lengths: a row's source length
	derivedInnerLens                        // <name>_inner_lengths: each inner list's length
)

// derivedRule is one tensor the spec derives: its name, its base's (the
// tensor whose samples it describes) and the spec tensor's other derived
// tensors, by table index (-1 when absent), and its expected declaration.
type derivedRule struct {
	kind             derivedKind
	name             string
	t, base          int
	mask, elem, lens int // the same spec tensor's mask, element mask, lengths
	dt               shardfmt.DType
	shape            []uint64
	jagged           bool
	declared         bool // the shard declares it as expected: its batches are checked
}

// derivedRules returns the derived tensors spec gives for the tensor
// table ts, with their declaration checked against ts (declared).
func derivedRules(spec any, ts []shardfmt.TensorInfo) ([]derivedRule, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	var doc specDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	index := func(n string) int {
		return slices.IndexFunc(ts, func(t shardfmt.TensorInfo) bool { return t.Name == n })
	}
	var rules []derivedRule
	for _, st := range doc.Tensors {
		base := index(st.Name)
		jaggedMap := st.Map != nil && st.Map.Keys == nil
		if jaggedMap {
			base = index(feature.DerivedName(st.Name, feature.DerivedMapValues))
		}
		if base < 0 {
			continue // the shard identity check reports a missing tensor
		}
		bi := ts[base]
		listJagged := st.List != nil && st.List.Jagged
		// Stacked columns: a mask per value; an image's or a partition
		// tensor's is a scalar.
		stacks := st.List == nil && st.Bytes == nil && st.Map == nil && st.Image == nil && st.Partition == ""
		one := func(kind derivedKind, name string, dt shardfmt.DType, shape []uint64, jagged bool) {
			rules = append(rules, derivedRule{kind: kind, name: name, t: index(name), base: base, dt: dt, shape: shape, jagged: jagged})
		}
		// An image's invalid: fill adds the mask without nulls (SPEC.md §2.8).
		imageFill := st.Image != nil && st.Image.Invalid == "fill"
		if (st.Nulls != nil && st.Nulls.Mask) || imageFill {
			var sh []uint64
			if stacks {
				sh = bi.Shape
			}
			one(derivedMask, feature.DerivedName(st.Name, feature.DerivedMask), shardfmt.U8, sh, false)
		}
		if st.List != nil && st.List.ElementMask && (st.Map == nil || jaggedMap) {
			sh := bi.Shape
			if bi.Jagged {
				sh = nil
			}
			one(derivedElemMask, feature.DerivedName(st.Name, feature.DerivedElementMask), shardfmt.U8, sh, bi.Jagged)
		}
		if (st.List != nil && st.List.Lengths) || (st.Bytes != nil && st.Bytes.Lengths) {
			ld := ""
			if st.List != nil && st.List.Lengths {
				ld = st.List.LengthsDType
			} else {
				ld = st.Bytes.LengthsDType
			}
			dt := shardfmt.I32
			if ld == "I64" {
				dt = shardfmt.I64
			}
			one(derivedLengths, feature.DerivedName(st.Name, feature.DerivedLengths), dt, nil, false)
		}
		if listJagged && st.Map == nil && index(feature.DerivedName(st.Name, feature.DerivedInnerLengths)) >= 0 {
			// Only a list of lists has it, known from the source alone.
			one(derivedInnerLens, feature.DerivedName(st.Name, feature.DerivedInnerLengths), shardfmt.I64, nil, true)
		}
	}
	// Each rule's siblings (of the same base), and its declaration.
	for i := range rules {
		r := &rules[i]
		r.mask, r.elem, r.lens = -1, -1, -1
		for _, o := range rules {
			if o.base != r.base || o.t < 0 {
				continue
			}
			switch o.kind {
			case derivedMask:
				r.mask = o.t
			case derivedElemMask:
				r.elem = o.t
			case derivedLengths:
				r.lens = o.t
			}
		}
		if r.t >= 0 {
			ti := ts[r.t]
			r.declared = ti.DType == r.dt && ti.Jagged == r.jagged && slices.Equal(ti.Shape, r.shape)
		}
	}
	return rules, nil
}

// shapeText renders a shape as in the spec: [] for a scalar.
func shapeText(s []uint64) string {
	if len(s) == 0 {
		return "[]"
	}
	return fmt.Sprint(s)
}

// declFindings returns a finding per derived tensor of rules that ts
// lacks or declares otherwise than the spec derives it.
func declFindings(rules []derivedRule, ts []shardfmt.TensorInfo) []Finding {
	var out []Finding
	kindText := func(j bool) string {
		if j {
			return "jagged"
		}
		return "fixed"
	}
	for _, r := range rules {
		want := fmt.Sprintf("%s %s %s", kindText(r.jagged), r.dt, shapeText(r.shape))
		if r.t < 0 {
			out = append(out, Finding{Kind: KindShardIdentity, Tensor: r.name, What: "tensor", Expected: want, Actual: "absent",
				Message: fmt.Sprintf("the spec derives tensor %q beside %q; the shard has none", r.name, ts[r.base].Name)})
			continue
		}
		if r.declared {
			continue
		}
		ti := ts[r.t]
		out = append(out, Finding{Kind: KindShardIdentity, Tensor: r.name, What: "declaration",
			Expected: want, Actual: fmt.Sprintf("%s %s %s", kindText(ti.Jagged), ti.DType, shapeText(ti.Shape)),
			Message: fmt.Sprintf("declared otherwise than the spec derives it beside %q (dtype, shape per sample or per value, jagged)", ts[r.base].Name)})
	}
	return out
}

// derivedCheck checks the derived tensors of one batch block.
type derivedCheck struct {
	g     shardfmt.Geometry
	r     *shardfmt.Reader
	ts    []shardfmt.TensorInfo
	rules []derivedRule
}

// check reports through add (tensor index, slot, finding) every present
// sample of batch k (block got, ids in slot order) whose derived tensors
// disagree with their base, at most one finding per tensor and slot.
func (dc *derivedCheck) check(k int, got []byte, ids []uint64, add func(t, slot int, f Finding)) {
	// A jagged tensor's slab and per-slot values counts; nil counts when
	// its offsets are bad (the integrity check reports them).
	slabs := map[int]shardfmt.JaggedSlab{}
	counts := map[int][]int{}
	count := func(t int) []int {
		if c, ok := counts[t]; ok {
			return c
		}
		s, err := dc.r.Jagged(k, got, t)
		var c []int
		if err == nil {
			c = make([]int, len(ids))
			for i := range ids {
				c[i] = s.Offset(i+1) - s.Offset(i)
			}
			slabs[t] = s
		}
		counts[t] = c
		return c
	}
	fixed := func(t, i int) []byte {
		n := dc.g.SampleBytes[t]
		o := dc.g.SlabOffset[t] + uint64(i)*n
		return got[o : o+n]
	}
	for _, r := range dc.rules {
		if !r.declared {
			continue
		}
		bad := func(i int, what, want, have string) {
			add(r.t, i, Finding{Kind: KindValueMismatch, Batch: intp(k), Tensor: r.name, SampleID: u64p(ids[i]), What: what,
				Expected: want, Actual: have, Message: fmt.Sprintf("slot %d: derived tensor disagrees with %q", i, dc.ts[r.base].Name)})
		}
		baseCounts := []int(nil)
		if dc.g.IsJagged(r.base) {
			if baseCounts = count(r.base); baseCounts == nil {
				continue
			}
		}
		rowNull := func(i int) bool {
			if r.mask < 0 {
				return false
			}
			m := fixed(r.mask, i)
			return len(m) == 1 && m[0] == 0
		}
		switch r.kind {
		case derivedMask:
			for i := range ids {
				m := fixed(r.t, i)
				if j := slices.IndexFunc(m, func(b byte) bool { return b > 1 }); j >= 0 {
					bad(i, "mask value", "0 or 1", fmt.Sprint(m[j]))
					continue
				}
				if baseCounts != nil && len(m) == 1 && m[0] == 0 && baseCounts[i] != 0 {
					bad(i, "values of a null row", "0", fmt.Sprint(baseCounts[i]))
				}
			}
		case derivedElemMask:
			var own []int
			if r.jagged {
				if own = count(r.t); own == nil {
					continue
				}
			}
			for i := range ids {
				var m []byte
				if r.jagged {
					s := slabs[r.t]
					if own[i] != baseCounts[i] {
						bad(i, "values count", fmt.Sprint(baseCounts[i]), fmt.Sprint(own[i]))
						continue
					}
					m = s.Values[s.Offset(i):s.Offset(i+1)]
				} else {
					m = fixed(r.t, i)
				}
				if j := slices.IndexFunc(m, func(b byte) bool { return b > 1 }); j >= 0 {
					bad(i, "element mask value", "0 or 1", fmt.Sprint(m[j]))
					continue
				}
				if r.jagged {
					continue
				}
				limit := len(m)
				if rowNull(i) {
					limit = 0
				} else if r.lens >= 0 {
					limit = min(limit, int(lengthAt(fixed(r.lens, i))))
				}
				if j := slices.Index(m[max(0, limit):], 1); j >= 0 {
					bad(i, "element mask past the row's length", "0", "1")
				}
			}
		case derivedLengths:
			for i := range ids {
				n := lengthAt(fixed(r.t, i))
				switch {
				case n < 0:
					bad(i, "length", ">= 0", fmt.Sprint(n))
				case n != 0 && rowNull(i):
					bad(i, "length of a null row", "0", fmt.Sprint(n))
				}
			}
		case derivedInnerLens:
			own := count(r.t)
			if own == nil {
				continue
			}
			s := slabs[r.t]
			for i := range ids {
				var sum int64
				neg := false
				for j := s.Offset(i); j < s.Offset(i+1); j++ {
					v := int64(binary.LittleEndian.Uint64(s.Values[8*j:]))
					neg = neg || v < 0
					sum += v
				}
				switch {
				case neg:
					bad(i, "inner length", ">= 0", "a negative one")
				case sum != int64(baseCounts[i]):
					bad(i, "inner lengths sum", fmt.Sprint(baseCounts[i]), fmt.Sprint(sum))
				}
			}
		}
	}
}

// lengthAt reads a lengths sample: I32 or I64 little-endian, signed.
func lengthAt(b []byte) int64 {
	if len(b) == 4 {
		return int64(int32(binary.LittleEndian.Uint32(b)))
	}
	return int64(binary.LittleEndian.Uint64(b))
}
