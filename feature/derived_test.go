package feature

import "testing"

// TestDerivedName pins the names SPEC.md §2.6 and §2.7 give the tensors
// derived from a tensor named "x".
func TestDerivedName(t *testing.T) {
	for k, want := range map[Derived]string{
		DerivedMask: "x_mask", DerivedElementMask: "x_element_mask", DerivedLengths: "x_lengths",
		DerivedInnerLengths: "x_inner_lengths", DerivedOriginalSize: "x_original_size",
		DerivedMapKeys: "x.keys", DerivedMapValues: "x.values", DerivedOffsets: "x_offsets",
	} {
		if got := DerivedName("x", k); got != want {
			t.Errorf("DerivedName(x, %d) = %q, want %q", k, got, want)
		}
	}
}
