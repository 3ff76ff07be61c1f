package feature

// The names of the tensors a spec tensor derives beside its own (SPEC.md
// §2.7), and of a map's two jagged tensors (§2.6): one rule, used by the
// spec's name checks (spec.go), the compiled outputs (compile.go, maps.go)
// and verify's checks of derived tensors.

// Derived is a kind of tensor named after a spec tensor.
type Derived int

// The kinds of derived tensors, each named by DerivedName.
const (
	DerivedMask         Derived = iota + 1 // <name>_mask: U8, 1 for a valid row, 0 for a null one
	DerivedElementMask                     // <name>_element_mask: U8 per element, 1 present, 0 null
	DerivedLengths                         // <name>_lengths: the row's list or byte length
	DerivedInnerLengths                    // <name>_inner_lengths: I64 jagged, a list of lists' inner lengths
	DerivedOriginalSize                    // <name>_original_size: I32 [2], an image's height and width
	DerivedMapKeys                         // <name>.keys: a map's keys, jagged
	DerivedMapValues                       // <name>.values: a map's values, jagged
	DerivedOffsets                         // <name>_offsets: a jagged tensor's offsets as prep export writes them (<name>_offsets.npy)
)

// derivedSuffix is the suffix of each kind.
var derivedSuffix = [...]string{
	DerivedMask:         "_mask",
	DerivedElementMask:  "_element_mask",
	DerivedLengths:      "_lengths",
	DerivedInnerLengths: "_inner_lengths",
	DerivedOriginalSize: "_original_size",
	DerivedMapKeys:      ".keys",
	DerivedMapValues:    ".values",
	DerivedOffsets:      "_offsets",
}

// DerivedName returns the name of the tensor of kind k derived from the
// tensor named base: base followed by the kind's suffix.
func DerivedName(base string, k Derived) string { return base + derivedSuffix[k] }
