package plan

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"iter"
	"math/big"
	"math/bits"
	"regexp"
	"sort"
	"strings"
	"unsafe"

	"github.com/prepml/prep/internal/sysmem"
)

// MixtureVersion tags the mixture's canonical text (PLAN.md §11), hashed
// into the order fingerprint of a plan with a mixture.
const MixtureVersion = "prep-mixture/v1"

// MaxMixSources bounds the number of sources of a mixture. The per-batch
// composition (PLAN.md §11.3) costs O(m log m) per step once per plan.
const MaxMixSources = 256

// maxMixCells bounds steps per epoch × sources: the composition table
// takes one bit per (full batch, source) plus 8 bytes per source every
// 512 batches (about 70 MiB at the bound).
const maxMixCells = 1 << 29

// MixSource is one named source of a mixture: a set of the plan's files
// whose rows are drawn at their own rate (PLAN.md §11).
type MixSource struct {
	// Name identifies the source in the sources file, plan show, export
	// and verify: 1 to 64 characters of [A-Za-z0-9_.-], unique.
	Name string `json:"name"`
	// Weight is the source's relative weight as an exact decimal string
	// ("0.7", "3", "0.125"; up to 18 fractional digits), > 0. Empty: the
	// source's share of the pool by rows, Rows / (rows of all sources).
	Weight string `json:"weight,omitempty"`
	// Paths are the files, directories or globs the sources file named,
	// as written; for the reader only, not fingerprinted.
	Paths []string `json:"paths"`
	// Files are the paths (relative to Source.Root, as in Source.Files or
	// Source.EmptyFiles) of the files that make up the source, sorted
	// byte-wise. Every file of the plan belongs to exactly one source.
	Files []string `json:"files"`
	// Filter is the row filter's text as written (selection/SELECTION.md),
	// "" for none. The plan does not evaluate it: Selection records what
	// it selected.
	Filter string `json:"filter,omitempty"`
	// Selection is the rows the filter selected (PLAN.md §11.7): ranges of
	// the source's rows, encoded by EncodeSelection; "" without a filter.
	Selection string `json:"selection,omitempty"`
	// SelectionDigest is "sha256:<hex>" of the selected ranges (derived;
	// checked on Load), "" without a filter.
	SelectionDigest string `json:"selection_digest,omitempty"`
	// Partitions are the source's hive partition keys in level order,
	// typed (partition.go); none when its files are not partitioned.
	Partitions []PartitionKey `json:"partitions,omitempty"`
	// Rows is the source's row count n_i: the rows of its files, or the
	// selected ones with a filter (derived; checked on Load).
	Rows uint64 `json:"rows"`
	// SamplesPerEpoch is c_i, the samples drawn from the source in every
	// epoch (derived; checked on Load).
	SamplesPerEpoch uint64 `json:"samples_per_epoch"`

	// pieces are Selection's bytes before base64 and counted the rows
	// they hold (SetSelectionUvarints), valid while text is Selection's
	// memory; nil otherwise.
	pieces  [][]byte
	counted uint64
	text    *byte
}

// Mixture draws each epoch's samples from several named sources at fixed
// rates (PLAN.md §11). Sample ids stay global row indices of the plan's
// Source; each source owns the ids of its files.
type Mixture struct {
	// EpochSamples is T, the samples of every epoch over all sources; 0 in
	// an input means the sum of the sources' rows. A plan always records
	// the resolved value.
	EpochSamples uint64      `json:"epoch_samples"`
	Sources      []MixSource `json:"sources"`
}

var mixNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
var mixWeightRE = regexp.MustCompile(`^[0-9]{1,18}(\.[0-9]{1,18})?$`)

// ParseWeight parses an exact decimal weight ("0.7", "3", "0.125": up to
// 18 digits before and after the point, no sign, no exponent) as a
// rational. It returns an error (not wrapped) saying why for anything else,
// including a weight of 0.
func ParseWeight(s string) (*big.Rat, error) {
	if !mixWeightRE.MatchString(s) {
		return nil, fmt.Errorf("weight %q is not a plain decimal number (like 0.7 or 3)", s)
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok || r.Sign() <= 0 {
		return nil, fmt.Errorf("weight %s must be greater than 0", s)
	}
	return r, nil
}

// mixSrc is the derived form of one mixture source.
type mixSrc struct {
	part partition // its blocks in id order and their row prefix
	n    uint64    // rows (selected rows with a filter)
	c    uint64    // samples per epoch
	// sel, with a filter and no selRow: the selected ranges of the
	// source's rows (before selection), selPrefix[j] = selected rows
	// before range j.
	sel       [][2]uint64
	selPrefix []uint64
	selJump   []int // see selJumpRows
	// selRow, when the source has at most selDirectMax selected rows
	// whose sample ids are all below 2^32: selRow[k] = the sample id of
	// the k-th selected row (one load per drawn sample instead of a search
	// of the ranges and of the row groups); nil otherwise.
	selRow []uint32
	// contig: the source's rows are the sample ids [base, base+rows)
	// (set by newMixState).
	contig bool
	base   uint64
	digest string
}

// EncodeSelection encodes ascending, non-empty, non-adjacent ranges
// (start, length) of a source's rows as PLAN.md §11.7 specifies: for each
// range the uvarint of its gap from the previous range's end (from 0 for
// the first), then the uvarint of its length; the bytes in standard base64
// with padding.
func EncodeSelection(ranges [][2]uint64) string {
	return EncodeSelectionSeq(func(yield func(uint64, uint64) bool) {
		for _, r := range ranges {
			if !yield(r[0], r[1]) {
				return
			}
		}
	}, 3*len(ranges))
}

// EncodeSelectionSeq is EncodeSelection of the ranges (start, length) that
// ranges yields, without holding them or their bytes: the text is written
// as they come, into one allocation when size is at least the bytes of
// their uvarints (a capacity hint; smaller only costs copies).
func EncodeSelectionSeq(ranges iter.Seq2[uint64, uint64], size int) string {
	var b strings.Builder
	b.Grow(base64.StdEncoding.EncodedLen(size))
	w := base64.NewEncoder(base64.StdEncoding, &b)
	buf := make([]byte, 0, 3<<10) // the uvarints of some ranges, encoded when full
	var end uint64
	for start, k := range ranges {
		if cap(buf)-len(buf) < 2*binary.MaxVarintLen64 {
			w.Write(buf) // a strings.Builder does not fail
			buf = buf[:0]
		}
		if gap := start - end; gap < 0x80 && k < 0x80 { // one byte each: most ranges
			buf = append(buf, byte(gap), byte(k))
		} else {
			buf = binary.AppendUvarint(buf, gap)
			buf = binary.AppendUvarint(buf, k)
		}
		end = start + k
	}
	w.Write(buf)
	w.Close()
	return b.String()
}

// SetSelectionUvarints sets ms.Selection to the text of a selection whose
// bytes (the uvarints of PLAN.md §11.7, before base64) parts yields in
// pieces of whole ranges (of any length), size bytes at most (a capacity
// hint), and keeps the pieces and rows, the number
// of rows they select (selection.Result.Selected): a plan made from ms in
// this process reads its selection from them instead of decoding the text
// again, as long as ms.Selection is that text, and refuses them when they
// hold another number of rows. The pieces must stay unchanged from then
// on (selection.Result.Uvarints' do). The base64 is written on two
// goroutines, each into its half of one allocation.
func (ms *MixSource) SetSelectionUvarints(parts iter.Seq[[]byte], size int, rows uint64) {
	ms.pieces, ms.counted = nil, rows
	n := 0
	for p := range parts {
		if len(p) > 0 {
			ms.pieces = append(ms.pieces, p)
			n += len(p)
		}
	}
	if n == 0 {
		ms.Selection, ms.pieces, ms.counted, ms.text = "", nil, 0, nil
		return
	}
	dst := sysmem.MakeHuge[byte](base64.StdEncoding.EncodedLen(n), base64.StdEncoding.EncodedLen(n))
	half := n / 2 / 3 * 3 // a whole number of 3-byte groups: no padding inside
	done := make(chan struct{})
	go func() {
		encodePieces(dst[half/3*4:], ms.pieces, half, n)
		close(done)
	}()
	encodePieces(dst, ms.pieces, 0, half)
	<-done
	ms.Selection = unsafe.String(&dst[0], len(dst)) // dst is not written again
	ms.text = unsafe.StringData(ms.Selection)
}

// selectionPieces returns the bytes of ms.Selection before base64 and the
// rows they select as kept by SetSelectionUvarints; nil when it did not
// write that text.
func (ms *MixSource) selectionPieces() ([][]byte, uint64) {
	if ms.text == nil || ms.Selection == "" || unsafe.StringData(ms.Selection) != ms.text {
		return nil, 0
	}
	return ms.pieces, ms.counted
}

// encodePieces writes the standard base64 of bytes [from, to) of the
// concatenation of pieces into dst; from is a multiple of 3, and so is to
// unless it is the end (where padding is written).
func encodePieces(dst []byte, pieces [][]byte, from, to int) {
	var carry [3]byte
	nc, o, at := 0, 0, 0
	for _, p := range pieces {
		lo, hi := max(from-at, 0), min(to-at, len(p))
		at += len(p)
		if lo >= hi {
			if at >= to {
				break
			}
			continue
		}
		seg := p[lo:hi]
		for nc > 0 && nc < 3 && len(seg) > 0 {
			carry[nc] = seg[0]
			nc, seg = nc+1, seg[1:]
		}
		if nc == 3 {
			base64.StdEncoding.Encode(dst[o:], carry[:])
			o, nc = o+4, 0
		}
		m := len(seg) / 3 * 3
		base64.StdEncoding.Encode(dst[o:], seg[:m])
		o += m / 3 * 4
		nc += copy(carry[nc:], seg[m:])
	}
	if nc > 0 {
		base64.StdEncoding.Encode(dst[o:], carry[:nc])
	}
}

// resolveMixture checks mix against the normalized source and returns the
// per-source rows, blocks and quotas, and the resolved epoch samples T.
// packed says the mixture chooses documents to pack (PLAN.md §12.1): its
// draws are not composed into batches, so the bound on steps × sources
// does not apply. Errors wrap ErrConfig and name the source.
func resolveMixture(src *Source, cfg Config, mix *Mixture, packed bool) ([]mixSrc, uint64, error) {
	m := len(mix.Sources)
	switch {
	case m < 1:
		return nil, 0, configErrorf("sources", "a mixture needs at least one source")
	case m > MaxMixSources:
		return nil, 0, configErrorf("sources", "%d sources exceed the limit of %d", m, MaxMixSources)
	case cfg.Shuffle != ShuffleNone && cfg.Shuffle != ShuffleGlobal:
		return nil, 0, configErrorf("shuffle", "a mixture draws from each source's own permutation; shuffle %s permutes the row groups of one pool and is not defined for mixtures: use global or none", cfg.Shuffle)
	}
	fileIdx := map[string]int{}
	for i, f := range src.Files {
		fileIdx[f.Path] = i
	}
	empty := map[string]bool{}
	for _, f := range src.EmptyFiles {
		empty[f.Path] = true
	}
	owner := make([]int, len(src.Files))
	for i := range owner {
		owner[i] = -1
	}
	names := map[string]int{}
	seenEmpty := map[string]int{}
	for s, ms := range mix.Sources {
		if !mixNameRE.MatchString(ms.Name) {
			return nil, 0, configErrorf("sources", "source %d: name %q must be 1 to 64 of A-Z a-z 0-9 _ . -", s, ms.Name)
		}
		if j, ok := names[ms.Name]; ok {
			return nil, 0, configErrorf("sources", "sources %d and %d are both named %q; names must be unique", j, s, ms.Name)
		}
		names[ms.Name] = s
		if ms.Weight != "" {
			if _, err := ParseWeight(ms.Weight); err != nil {
				return nil, 0, configErrorf("sources", "source %s: %v", ms.Name, err)
			}
		}
		if !sort.StringsAreSorted(ms.Files) {
			return nil, 0, configErrorf("sources", "source %s: files are not sorted by path", ms.Name)
		}
		for _, p := range ms.Files {
			if empty[p] {
				if j, ok := seenEmpty[p]; ok {
					return nil, 0, configErrorf("sources", "file %s is in both source %s and source %s; a file belongs to one source (raise a weight to draw a source more often)", p, mix.Sources[j].Name, ms.Name)
				}
				seenEmpty[p] = s
				continue
			}
			fi, ok := fileIdx[p]
			if !ok {
				return nil, 0, configErrorf("sources", "source %s: file %s is not in the plan's source", ms.Name, p)
			}
			if owner[fi] >= 0 {
				return nil, 0, configErrorf("sources", "file %s is in both source %s and source %s; a file belongs to one source (raise a weight to draw a source more often)", p, mix.Sources[owner[fi]].Name, ms.Name)
			}
			owner[fi] = s
		}
	}
	for fi, s := range owner {
		if s < 0 {
			return nil, 0, configErrorf("sources", "file %s belongs to no source", src.Files[fi].Path)
		}
	}
	idx := src.idx()
	out := make([]mixSrc, m)
	for i := range out {
		out[i].part.prefix = []uint64{0}
	}
	for bi, b := range idx.blocks {
		pt := &out[owner[b.file]].part
		pt.blocks = append(pt.blocks, bi)
		pt.prefix = append(pt.prefix, pt.prefix[len(pt.prefix)-1]+b.rows)
	}
	var total uint64
	for s := range out {
		ms := &mix.Sources[s]
		out[s].n = out[s].part.rows()
		if out[s].n == 0 {
			return nil, 0, configErrorf("sources", "source %s has no rows: nothing to draw from", ms.Name)
		}
		if err := checkPartitions(ms); err != nil {
			return nil, 0, configErrorf("sources", "%v", err)
		}
		if (ms.Filter == "") != (ms.Selection == "") {
			if ms.Filter == "" {
				return nil, 0, configErrorf("sources", "source %s has a selection but no filter", ms.Name)
			}
			return nil, 0, configErrorf("sources", "source %s: filter %q selects no row: nothing to draw from", ms.Name, ms.Filter)
		}
		if ms.Filter != "" {
			pieces, counted := ms.selectionPieces()
			err := out[s].setSelection(ms.Selection, pieces, counted, idx)
			if err != nil {
				return nil, 0, configErrorf("sources", "source %s: %v", ms.Name, err)
			}
			if out[s].n == 0 {
				return nil, 0, configErrorf("sources", "source %s: filter %q selects no row: nothing to draw from", ms.Name, ms.Filter)
			}
		}
		total += out[s].n
	}
	t := mix.EpochSamples
	if t == 0 {
		t = total
	}
	if hi, lo := bits.Mul64(t, uint64(cfg.Epochs)); hi != 0 || lo >= 1<<63 {
		return nil, 0, configErrorf("epoch_samples", "%d samples per epoch x %d epochs exceed 2^63-1", t, cfg.Epochs)
	}
	if steps := (t + uint64(cfg.GlobalBatch) - 1) / uint64(cfg.GlobalBatch); !packed && steps*uint64(m) > maxMixCells {
		return nil, 0, configErrorf("epoch_samples", "%d steps per epoch x %d sources exceed the limit of %d (use a larger global batch or fewer epoch samples)", steps, m, maxMixCells)
	}
	quotas := mixQuotas(mix.Sources, out, total, t)
	for s := range out {
		out[s].c = quotas[s]
	}
	return out, t, nil
}

// mixWeights returns each source's weight as a rational (PLAN.md §11.1):
// the given decimal, or Rows/total for a source without one.
func mixWeights(ms []MixSource, srcs []mixSrc, total uint64) []*big.Rat {
	w := make([]*big.Rat, len(ms))
	for i := range ms {
		if ms[i].Weight == "" {
			w[i] = new(big.Rat).SetFrac(new(big.Int).SetUint64(srcs[i].n), new(big.Int).SetUint64(total))
			continue
		}
		w[i], _ = ParseWeight(ms[i].Weight)
	}
	return w
}

// mixQuotas returns c_i = T·w_i/W rounded by largest remainder (PLAN.md
// §11.1): each source gets the floor of its exact share, and the T − Σ
// floors samples left go one each to the sources with the largest
// fractional parts, ties to the lower source index. Σ c_i = T exactly.
func mixQuotas(ms []MixSource, srcs []mixSrc, total, t uint64) []uint64 {
	w := mixWeights(ms, srcs, total)
	sum := new(big.Rat)
	for _, x := range w {
		sum.Add(sum, x)
	}
	tr := new(big.Rat).SetInt(new(big.Int).SetUint64(t))
	c := make([]uint64, len(w))
	frac := make([]*big.Rat, len(w))
	var assigned uint64
	for i, x := range w {
		share := new(big.Rat).Mul(tr, x)
		share.Quo(share, sum)
		fl := new(big.Int).Quo(share.Num(), share.Denom())
		c[i] = fl.Uint64()
		assigned += c[i]
		frac[i] = share.Sub(share, new(big.Rat).SetInt(fl))
	}
	order := make([]int, len(w))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return frac[order[a]].Cmp(frac[order[b]]) > 0 })
	for k := uint64(0); k < t-assigned; k++ {
		c[order[k]]++
	}
	return c
}

// canonical returns the mixture's canonical text (PLAN.md §11.5).
func (mix *Mixture) canonical() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nepoch_samples=%d\n", MixtureVersion, mix.EpochSamples)
	for _, s := range mix.Sources {
		w := s.Weight
		if w == "" {
			w = "rows"
		}
		fmt.Fprintf(&b, "source\t%s\t%s\n", s.Name, w)
		if s.Filter != "" {
			fmt.Fprintf(&b, "filter\t%x\nselection\t%s\n", sha256.Sum256([]byte(s.Filter)), s.SelectionDigest)
		}
		b.WriteString(partitionCanonical(s.Partitions))
		for _, f := range s.Files {
			fmt.Fprintf(&b, "file\t%s\n", f)
		}
	}
	return b.String()
}

// fingerprint returns "sha256:<hex>" of the canonical text.
func (mix *Mixture) fingerprint() string {
	h := sha256.Sum256([]byte(mix.canonical()))
	return fmt.Sprintf("sha256:%x", h[:])
}

// resolved returns a deep copy of mix with the derived fields (resolved T,
// rows, samples per epoch) filled from srcs.
func (mix *Mixture) resolved(srcs []mixSrc, t uint64) *Mixture {
	out := &Mixture{EpochSamples: t, Sources: make([]MixSource, len(mix.Sources))}
	for i, s := range mix.Sources {
		s.Paths = append([]string{}, s.Paths...)
		s.Files = append([]string{}, s.Files...)
		s.Partitions = append([]PartitionKey(nil), s.Partitions...)
		s.Rows, s.SamplesPerEpoch, s.SelectionDigest = srcs[i].n, srcs[i].c, srcs[i].digest
		s.pieces, s.counted, s.text = nil, 0, nil
		out.Sources[i] = s
	}
	return out
}
