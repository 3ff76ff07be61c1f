package verify

import (
	"fmt"
	"strings"

	"github.com/prepml/prep/plan"
)

// Kind is the stable snake_case code of a finding. Codes are part of prep's
// scripting interface (the --json output): they are never renamed or reused.
type Kind string

// The finding kinds, grouped by the check that reports them.
const (
	// Structure.
	KindManifestInvalid Kind = "manifest_invalid" // manifest.json missing, unparsable or inconsistent
	KindShardMissing    Kind = "shard_missing"    // a listed shard file does not exist
	KindSizeMismatch    Kind = "size_mismatch"    // a shard's size differs from the manifest (truncated or grown)
	KindDigestMismatch  Kind = "digest_mismatch"  // a shard's digest differs from the manifest
	KindHeaderInvalid   Kind = "header_invalid"   // a shard's header, tables or footer fail validation
	KindShardIdentity   Kind = "shard_identity"   // a shard's own epoch, rank, fingerprints, tensors or batch count differ from its manifest entry
	KindUnlistedFile    Kind = "unlisted_file"    // a file in the shard set that the manifest does not list
	KindTempFile        Kind = "temp_file"        // a temporary or lock file left by an unfinished write
	KindIOError         Kind = "io_error"         // a file could not be read for a reason other than the above

	// Integrity.
	KindBatchChecksum Kind = "batch_checksum" // a batch block's CRC-32C differs from the batch table

	// Plan conformance.
	KindPlanInvalid  Kind = "plan_invalid"  // the plan could not be loaded, so conformance was not checked
	KindPlanMismatch Kind = "plan_mismatch" // sample ids, counts, pads or fingerprints differ from the plan
	KindStepsUnequal Kind = "steps_unequal" // a shard does not hold the plan's number of steps
	KindRankMissing  Kind = "rank_missing"  // the plan has an (epoch, rank) that no shard covers

	// Source conformance (deep).
	KindSourceChanged    Kind = "source_changed"    // a source file differs from the plan's fingerprint of it
	KindSourceUnreadable Kind = "source_unreadable" // expected values could not be materialized from the source
	KindValueMismatch    Kind = "value_mismatch"    // a stored value differs from the source after the feature spec
)

// Finding is one problem found in a shard set. Location fields that do not
// apply are nil or empty (and omitted from JSON).
//
// JSON schema (one object per finding, keys omitted when empty):
//
//	kind      string  stable code, see Kind
//	shard     string  shard path relative to the shard set, '/'-separated
//	          (or the file path for unlisted files and source files)
//	epoch     int     epoch of the shard
//	rank      int     rank of the shard
//	batch     int     batch (step) index inside the shard
//	tensor    string  tensor name
//	sample_id int     global sample id (source row index)
//	source    string  the named source holding sample_id (plans with a
//	          mixture, prep plan --sources)
//	element   int     element index inside the sample, row-major
//	what      string  the quantity compared: "size", "digest", "crc32c",
//	          "sample_id", "count", "pads", "value", "batches", ...
//	expected  string  expected value, rendered as text
//	actual    string  actual value, rendered as text
//	message   string  human-readable description
type Finding struct {
	Kind     Kind    `json:"kind"`
	Shard    string  `json:"shard,omitempty"`
	Epoch    *int    `json:"epoch,omitempty"`
	Rank     *int    `json:"rank,omitempty"`
	Batch    *int    `json:"batch,omitempty"`
	Tensor   string  `json:"tensor,omitempty"`
	SampleID *uint64 `json:"sample_id,omitempty"`
	Source   string  `json:"source,omitempty"`
	Element  *int    `json:"element,omitempty"`
	What     string  `json:"what,omitempty"`
	Expected string  `json:"expected,omitempty"`
	Actual   string  `json:"actual,omitempty"`
	Message  string  `json:"message"`
}

// String renders the finding as one line:
//
//	SHARD: KIND: epoch E rank R batch K tensor T sample S: MESSAGE (expected WHAT X, actual WHAT Y)
func (f Finding) String() string {
	var b strings.Builder
	if f.Shard != "" {
		b.WriteString(f.Shard)
		b.WriteString(": ")
	}
	b.WriteString(string(f.Kind))
	b.WriteString(": ")
	var loc []string
	if f.Epoch != nil {
		loc = append(loc, fmt.Sprintf("epoch %d", *f.Epoch))
	}
	if f.Rank != nil {
		loc = append(loc, fmt.Sprintf("rank %d", *f.Rank))
	}
	if f.Batch != nil {
		loc = append(loc, fmt.Sprintf("batch %d", *f.Batch))
	}
	if f.Tensor != "" {
		loc = append(loc, fmt.Sprintf("tensor %q", f.Tensor))
	}
	if f.SampleID != nil {
		loc = append(loc, fmt.Sprintf("sample %d", *f.SampleID))
		if f.Source != "" {
			loc = append(loc, fmt.Sprintf("(source %s)", f.Source))
		}
	}
	if f.Element != nil {
		loc = append(loc, fmt.Sprintf("element %d", *f.Element))
	}
	if len(loc) > 0 {
		b.WriteString(strings.Join(loc, " "))
		b.WriteString(": ")
	}
	b.WriteString(f.Message)
	if f.Expected != "" || f.Actual != "" {
		what := f.What
		if what != "" {
			what += " "
		}
		fmt.Fprintf(&b, " (expected %s%s, actual %s%s)", what, f.Expected, what, f.Actual)
	}
	return b.String()
}

func intp(v int) *int       { return &v }
func u64p(v uint64) *uint64 { return &v }

// nameSources sets Source on every finding with a sample id when p has a
// mixture: the name of the source holding that id.
func nameSources(p *plan.Plan, fs []Finding) {
	if p == nil || p.Mixture == nil {
		return
	}
	for i := range fs {
		if fs[i].SampleID == nil {
			continue
		}
		if s := p.SourceOf(*fs[i].SampleID); s >= 0 {
			fs[i].Source = p.Mixture.Sources[s].Name
		}
	}
}
