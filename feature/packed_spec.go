package feature

import (
	"fmt"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
)

// Values of PackedPolicy.Per.
const (
	// PackedPerToken repeats the document's value over each of its tokens
	// in the packed row: a tensor of the dtype, [L], the policy's pad value
	// in the padding slots.
	PackedPerToken = "token"
	// PackedPerDocument gives one value per document piece of the packed
	// row, in piece order (the order of segment ids 1 … k): a jagged
	// tensor of the dtype holding k values.
	PackedPerDocument = "document"
)

// PackedPolicy makes a tensor of a packed plan's spec (SPEC.md §2.9.1)
// follow the documents: another column of the document's source row (a
// source id, a language tag hashed, any fixed-width scalar) is written per
// token or per document of each packed row. The tensor must read one
// column into one scalar of its dtype (no shape, list, map, image, bytes
// pad or mask; nulls.fill, bytes hash and cast apply as to any scalar).
type PackedPolicy struct {
	Per string  `yaml:"per" json:"per"`                     // PackedPerToken or PackedPerDocument
	Pad *Number `yaml:"pad,omitempty" json:"pad,omitempty"` // per token: the value of padding slots (default 0)
}

// packedExtra is one per-document tensor of a packed run.
type packedExtra struct {
	name     string
	perToken bool
	dt       shardfmt.DType
	pad      []byte // per token: the pad value in the dtype
	held     int    // its output's index among the decoded document tensors
}

// newPackedExtra checks tensor t, a tensor of a packed plan's spec other
// than the token tensor, and returns what the run needs of it. Errors
// wrap ErrSpec and name the tensor.
func newPackedExtra(t TensorSpec, pk *plan.Packing) (packedExtra, error) {
	bad := func(f string, a ...any) (packedExtra, error) {
		return packedExtra{}, specErrorf("tensor %q: %s", t.Name, fmt.Sprintf(f, a...))
	}
	p := t.Packed
	switch {
	case p == nil:
		return bad("the plan packs column %s: a tensor on another column needs a packed policy (packed: {per: token} or {per: document}; SPEC.md §2.9.1)", pk.Column)
	case p.Per != PackedPerToken && p.Per != PackedPerDocument:
		return bad("packed.per %q: want token or document", p.Per)
	case p.Pad != nil && p.Per != PackedPerToken:
		return bad("packed.pad applies to per: token only (a per-document tensor has no padding)")
	case t.Column == "" || len(t.Columns) > 0 || t.ColumnsRegex != "":
		return bad("a per-document tensor reads one column (column:)")
	case t.Column == pk.Column:
		return bad("reads the packed column %s; only its token tensor may", pk.Column)
	case len(t.Shape) > 0 || t.List != nil || t.Map != nil || t.Image != nil || (t.Bytes != nil && t.Bytes.Mode != "hash"):
		return bad("a per-document tensor is one scalar per document: no shape, list, map, image or bytes pad (bytes hash is accepted)")
	case t.Nulls != nil && t.Nulls.Mask:
		return bad("nulls.mask is not offered on a per-document tensor (use nulls.fill)")
	}
	dt, err := shardfmt.ParseDType(t.DType)
	if err != nil {
		return bad("%v", err)
	}
	x := packedExtra{name: t.Name, perToken: p.Per == PackedPerToken, dt: dt}
	if x.perToken {
		x.pad = make([]byte, dt.Size())
		if p.Pad != nil {
			e := newEncoder(dt, "")
			e.constant = true
			if p.Pad.isInt {
				err = e.putInt(x.pad, p.Pad.i)
			} else {
				err = e.putFloat(x.pad, p.Pad.f)
			}
			if err != nil {
				return bad("packed.pad %s: %v", p.Pad, err)
			}
		}
	}
	return x, nil
}

// tensorInfo returns the output tensor of x in rows of l tokens.
func (x *packedExtra) tensorInfo(l int) shardfmt.TensorInfo {
	if x.perToken {
		return shardfmt.TensorInfo{Name: x.name, DType: x.dt, Shape: []uint64{uint64(l)}}
	}
	return shardfmt.TensorInfo{Name: x.name, DType: x.dt, Jagged: true}
}
