package plan

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// Split is what packing does with a document longer than the row length
// (PLAN.md §12).
type Split string

const (
	// SplitChunk cuts every document into pieces of at most the row length
	// (floor(ℓ/L) pieces of L tokens and one of ℓ mod L, when not 0): every
	// token is kept.
	SplitChunk Split = "chunk"
	// SplitNone keeps documents whole: a document longer than the row
	// length is dropped, and counted in Packing.DroppedDocuments and
	// Packing.DroppedTokens.
	SplitNone Split = "none"
)

// Bounds on the packing options, checked by PackOptions.Validate.
const (
	// MaxPackLength bounds PackOptions.Length, tokens per packed row.
	MaxPackLength = 1 << 24
	// MaxPackWindow bounds PackOptions.Window, documents per packing window
	// (the packer holds one window's pieces: 16 bytes each).
	MaxPackWindow = 1 << 24
	// DefaultPackWindow is the window used when PackOptions.Window is 0.
	DefaultPackWindow = 8192
)

// purposePack keys the document permutation of packing (PLAN.md §12).
const purposePack = "pack"

// PackOptions are the inputs of packing (PLAN.md §12): which list column
// holds the tokens, the row length L, the split policy, the end-of-document
// id appended to every document (nil: none), the pad id of unused slots,
// and the window K of documents packed together.
type PackOptions struct {
	Column string `json:"column"`        // token column, pqread name syntax (a list of INT32 or INT64)
	Length int    `json:"length"`        // L, tokens per packed row, 1 ≤ L ≤ MaxPackLength
	Split  Split  `json:"split"`         // chunk (default when "") or none
	EOD    *int64 `json:"eod,omitempty"` // appended after each non-empty document's tokens; nil: none
	Pad    int64  `json:"pad"`           // id of padding slots
	Window int    `json:"window"`        // K, documents per packing window, 1 ≤ K ≤ MaxPackWindow (0: DefaultPackWindow)
	// Scope, for a plan with a mixture only (PLAN.md §12.1): ScopeAcross
	// packs the documents of all sources together, ScopePerSource packs
	// each source's documents into rows of their own. "" without a
	// mixture (and, in an input with one, ScopeAcross).
	Scope PackScope `json:"scope,omitempty"`
}

// Validate checks the options and fills the defaults (split chunk, window
// DefaultPackWindow). Errors wrap ErrConfig and name the field
// ("packing.length", ...).
func (o *PackOptions) Validate() error {
	if o.Split == "" {
		o.Split = SplitChunk
	}
	if o.Window == 0 {
		o.Window = DefaultPackWindow
	}
	switch {
	case o.Column == "":
		return configErrorf("packing.column", "no token column named")
	case o.Length < 1 || o.Length > MaxPackLength:
		return configErrorf("packing.length", "row length %d not in [1, %d]", o.Length, MaxPackLength)
	case o.Split != SplitChunk && o.Split != SplitNone:
		return configErrorf("packing.split", "unknown split %q (want chunk or none)", o.Split)
	case o.Window < 1 || o.Window > MaxPackWindow:
		return configErrorf("packing.window", "window %d not in [1, %d] documents", o.Window, MaxPackWindow)
	case o.Scope != "" && o.Scope != ScopeAcross && o.Scope != ScopePerSource:
		return configErrorf("packing.scope", "unknown scope %q (want across or per_source)", o.Scope)
	}
	return nil
}

// Packing is the plan file's record of a packing (PLAN.md §12): the
// options, the counts it gave and its digests. A packed plan's samples
// are its Rows packed rows.
type Packing struct {
	PackOptions
	Documents        uint64 `json:"documents"`         // source rows
	EmptyDocuments   uint64 `json:"empty_documents"`   // null or empty lists: no tokens, no EOD
	DroppedDocuments uint64 `json:"dropped_documents"` // split none: documents longer than L
	DroppedTokens    uint64 `json:"dropped_tokens"`    // their tokens, EOD included
	Tokens           uint64 `json:"tokens"`            // tokens packed, EOD included
	Rows             uint64 `json:"rows"`              // packed rows P
	PadSlots         uint64 `json:"pad_slots"`         // P·L − Tokens
	LengthsDigest    string `json:"lengths_digest"`    // "sha256:<hex>" of the document lengths
	Digest           string `json:"digest"`            // "sha256:<hex>" of the layout
	// SourceRows, with scope per_source: the packed rows of each mixture
	// source, in source order (the rows of source i follow those of
	// sources 0 … i−1); absent otherwise, and in a packed mixture, which
	// records them per epoch (PackEpoch.SourceRows).
	SourceRows []uint64 `json:"source_rows,omitempty"`
	// Epochs, in a packed mixture only (format prep-plan/v2, PLAN.md
	// §12.1): the packing of each epoch's draws, one entry per epoch.
	// The counts above are then their sums over the epochs, Rows the
	// sample ids of the plan (every epoch's rows) and Digest the epochs
	// digest (§12.1).
	Epochs []PackEpoch `json:"epochs,omitempty"`
}

// PackEpoch is the packing of one epoch of a packed mixture (PLAN.md
// §12.1): the epoch's rows P_e (its sample ids are O_e … O_e+P_e−1, O_e
// the rows of the epochs before), its counts as Packing's, its rows per
// source with scope per_source, and the §12 layout digest of its rows.
type PackEpoch struct {
	Rows             uint64   `json:"rows"`
	Tokens           uint64   `json:"tokens"`
	PadSlots         uint64   `json:"pad_slots"`
	EmptyDocuments   uint64   `json:"empty_documents"`
	DroppedDocuments uint64   `json:"dropped_documents"`
	DroppedTokens    uint64   `json:"dropped_tokens"`
	SourceRows       []uint64 `json:"source_rows,omitempty"`
	Digest           string   `json:"digest"`
}

// Piece is a run of one document's tokens in a packed row: tokens
// [Offset, Offset+Len) of document Doc's token stream (its list values,
// then the EOD id when one is set). Doc is the document's sample id in
// the source (its global row index).
type Piece struct {
	Doc    uint64
	Offset uint32
	Len    uint32
}

// PackLayout is a packing's rows: row i holds Pieces[RowStart[i]:RowStart[i+1]],
// in order, then padding up to the row length. Row i is the packed row
// of sample id First+i: First is 0 for a plan packed once (PLAN.md §12),
// and O_e, the rows of the epochs before, for epoch e of a packed
// mixture (§12.1). Memory: 16 bytes per piece and 8 per row.
type PackLayout struct {
	First    uint64   // sample id of row 0
	RowStart []uint64 // len Rows+1
	Pieces   []Piece
}

// Rows returns the number of packed rows.
func (l *PackLayout) Rows() uint64 { return uint64(len(l.RowStart) - 1) }

// Row returns the pieces of packed row i (i < Rows, counted from the
// layout's first row), in order.
func (l *PackLayout) Row(i uint64) []Piece { return l.Pieces[l.RowStart[i]:l.RowStart[i+1]] }

// RowOf returns the pieces of the packed row whose sample id is id, and
// false (no pieces) when the layout does not hold it: id outside [First,
// First+Rows).
func (l *PackLayout) RowOf(id uint64) ([]Piece, bool) {
	if id < l.First || id-l.First >= l.Rows() {
		return nil, false
	}
	return l.Row(id - l.First), true
}

// LengthsDigest returns "sha256:" + hex SHA-256 of "prep-lengths/v1" 0x00
// LE64(D) then LE32(length) per document in sample id order (PLAN.md §12).
func LengthsDigest(lengths []uint32) string {
	h := sha256.New()
	h.Write([]byte("prep-lengths/v1\x00"))
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(len(lengths)))
	h.Write(b[:])
	buf := make([]byte, 0, 4096)
	for _, n := range lengths {
		buf = binary.LittleEndian.AppendUint32(buf, n)
		if len(buf) == cap(buf) {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Pack packs documents of the given token counts (lengths[d] = list
// length of source row d; null and empty lists are 0) into rows of
// opts.Length tokens, as PLAN.md §12 specifies: documents in the order
// of the keyed permutation (purpose "pack", seed, epoch 0, index 0) when
// shuffle is true, else in source order; windows of opts.Window
// documents; in each window, pieces by length descending then by arrival,
// each placed best-fit (the open row with the least room that fits it,
// the lowest such row on a tie) or into a new row. opts must be
// validated. It returns the layout and its record, or ctx's error when
// ctx is done first, or an error wrapping ErrConfig for a document of
// 2^32 tokens or more. Cost O(D log K + rows),
// memory the layout plus one window.
func Pack(ctx context.Context, lengths []uint32, opts PackOptions, seed uint64, shuffle bool) (*PackLayout, *Packing, error) {
	if err := opts.Validate(); err != nil {
		return nil, nil, err
	}
	d := uint64(len(lengths))
	var perm Perm
	if shuffle {
		perm = NewPerm(d, purposePack, seed, 0, 0)
	}
	pr := newPackRun(lengths, opts)
	win := make([]uint64, 0, min(d, uint64(opts.Window)))
	for lo := uint64(0); lo < d; lo += uint64(opts.Window) {
		win = win[:0]
		for q := lo; q < min(lo+uint64(opts.Window), d); q++ {
			doc := q
			if shuffle {
				doc = perm.Apply(q)
			}
			win = append(win, doc)
		}
		if err := pr.window(ctx, win); err != nil {
			return nil, nil, err
		}
	}
	return pr.finish()
}

// packRun packs windows of documents one after the other into one layout
// (PLAN.md §12): each window's pieces are sorted and placed best-fit into
// rows that follow the previous windows' rows.
type packRun struct {
	lengths []uint32
	l       uint32
	eod     uint64
	split   Split
	lay     *PackLayout
	rec     *Packing
	bp      *binPacker
	pend    []pendingPiece
}

func newPackRun(lengths []uint32, opts PackOptions) *packRun {
	pr := &packRun{lengths: lengths, l: uint32(opts.Length), split: opts.Split,
		lay: &PackLayout{RowStart: []uint64{0}}, rec: &Packing{PackOptions: opts, Documents: uint64(len(lengths))},
		bp: newBinPacker(uint32(opts.Length))}
	if opts.EOD != nil {
		pr.eod = 1
	}
	return pr
}

// window packs the documents docs (sample ids, in visiting order) as one
// window. It returns ctx's error when ctx is done, or an error wrapping
// ErrConfig for a document of 2^32 tokens or more.
func (pr *packRun) window(ctx context.Context, docs []uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	L, rec := uint64(pr.l), pr.rec
	pr.pend = pr.pend[:0]
	for _, doc := range docs {
		if pr.lengths[doc] == 0 {
			rec.EmptyDocuments++
			continue
		}
		n := uint64(pr.lengths[doc]) + pr.eod
		if n > 1<<32-1 {
			return configErrorf("packing", "document %d has %d tokens, more than 2^32-1", doc, n)
		}
		if n > L && pr.split == SplitNone {
			rec.DroppedDocuments++
			rec.DroppedTokens += n
			continue
		}
		rec.Tokens += n
		for off := uint64(0); off < n; off += L {
			pr.pend = append(pr.pend, pendingPiece{Piece{Doc: doc, Offset: uint32(off), Len: uint32(min(L, n-off))}, uint32(len(pr.pend))})
		}
	}
	slices.SortFunc(pr.pend, func(a, b pendingPiece) int {
		if a.Len != b.Len {
			return int(b.Len) - int(a.Len)
		}
		return int(a.seq) - int(b.seq)
	})
	pr.bp.reset()
	for _, p := range pr.pend {
		pr.bp.place(p.Piece)
	}
	pr.bp.flush(pr.lay)
	return nil
}

// finish fills the record's row count, pad slots and digests.
func (pr *packRun) finish() (*PackLayout, *Packing, error) {
	rec := pr.rec
	rec.Rows = pr.lay.Rows()
	rec.PadSlots = rec.Rows*uint64(pr.l) - rec.Tokens
	rec.LengthsDigest = LengthsDigest(pr.lengths)
	rec.Digest = pr.lay.digest()
	return pr.lay, rec, nil
}

// pendingPiece is a piece waiting in its window, with its arrival index.
type pendingPiece struct {
	Piece
	seq uint32
}

// binPacker places one window's pieces into rows best-fit. room[c] holds
// the open rows with c free slots (0 < c < L) as a min-heap of row
// indices; nonEmpty has bit c set when room[c] is not empty, so the
// smallest room ≥ n is found a 64-slot word at a time.
type binPacker struct {
	l        uint32
	rows     [][]Piece
	free     []uint32
	room     [][]int32
	nonEmpty []uint64
}

func newBinPacker(l uint32) *binPacker {
	return &binPacker{l: l, room: make([][]int32, l), nonEmpty: make([]uint64, l/64+1)}
}

func (b *binPacker) reset() {
	for i := range b.rows {
		if c := b.free[i]; c > 0 && c < b.l {
			b.room[c] = b.room[c][:0]
			b.nonEmpty[c/64] = 0
		}
	}
	b.rows, b.free = b.rows[:0], b.free[:0]
}

// smallest returns the least c ≥ n with open rows of c free slots, or 0.
func (b *binPacker) smallest(n uint32) uint32 {
	w := n / 64
	word := b.nonEmpty[w] &^ (1<<(n%64) - 1)
	for {
		if word != 0 {
			return w*64 + uint32(bits.TrailingZeros64(word))
		}
		w++
		if int(w) >= len(b.nonEmpty) {
			return 0
		}
		word = b.nonEmpty[w]
	}
}

func (b *binPacker) place(p Piece) {
	c := uint32(0)
	if p.Len < b.l {
		c = b.smallest(p.Len)
	}
	var r int32
	if c == 0 {
		r = int32(len(b.rows))
		b.rows = append(b.rows, nil)
		b.free = append(b.free, b.l)
	} else {
		r = heapPop(&b.room[c])
		if len(b.room[c]) == 0 {
			b.nonEmpty[c/64] &^= 1 << (c % 64)
		}
	}
	b.rows[r] = append(b.rows[r], p)
	b.free[r] -= p.Len
	if f := b.free[r]; f > 0 {
		heapPush(&b.room[f], r)
		b.nonEmpty[f/64] |= 1 << (f % 64)
	}
}

// flush appends the window's rows, in opening order, to lay.
func (b *binPacker) flush(lay *PackLayout) {
	for _, r := range b.rows {
		lay.Pieces = append(lay.Pieces, r...)
		lay.RowStart = append(lay.RowStart, uint64(len(lay.Pieces)))
	}
	for i := range b.rows {
		b.rows[i] = nil
	}
}

// heapPush and heapPop keep h a binary min-heap of row indices.
func heapPush(h *[]int32, x int32) {
	s := append(*h, x)
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if s[p] <= s[i] {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
	*h = s
}

func heapPop(h *[]int32) int32 {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && s[l] < s[m] {
			m = l
		}
		if l+1 < n && s[l+1] < s[m] {
			m = l + 1
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// digest is "sha256:" + hex SHA-256 of "prep-pack/v1" 0x00 LE64(rows),
// then per row LE64(pieces) and per piece LE64(doc) LE64(offset)
// LE64(len) (PLAN.md §12).
func (l *PackLayout) digest() string {
	h := sha256.New()
	h.Write([]byte("prep-pack/v1\x00"))
	buf := make([]byte, 0, 8192)
	put := func(h hash.Hash, x uint64) {
		buf = binary.LittleEndian.AppendUint64(buf, x)
		if len(buf) >= 8192-8 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	put(h, l.Rows())
	for i := uint64(0); i < l.Rows(); i++ {
		row := l.Row(i)
		put(h, uint64(len(row)))
		for _, p := range row {
			put(h, p.Doc)
			put(h, uint64(p.Offset))
			put(h, uint64(p.Len))
		}
	}
	h.Write(buf)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// canonical is the packing line of the order fingerprint text (PLAN.md
// §8, §12).
func (pk *Packing) canonical() string {
	eod := "none"
	if pk.EOD != nil {
		eod = strconv.FormatInt(*pk.EOD, 10)
	}
	line := fmt.Sprintf("packing=column=%d:%s,length=%d,split=%s,eod=%s,pad=%d,window=%d,rows=%d,digest=%s",
		len(pk.Column), pk.Column, pk.Length, pk.Split, eod, pk.Pad, pk.Window, pk.Rows, pk.Digest)
	if pk.Scope != "" { // a packed mixture (§12.1)
		line += ",scope=" + string(pk.Scope)
		if pk.SourceRows != nil {
			rows := make([]string, len(pk.SourceRows))
			for i, r := range pk.SourceRows {
				rows[i] = strconv.FormatUint(r, 10)
			}
			line += ",source_rows=" + strings.Join(rows, ";")
		}
		if pk.Epochs != nil { // packed per epoch (prep-plan/v2)
			line += ",epochs=" + strconv.Itoa(len(pk.Epochs))
		}
	}
	return line + "\n"
}

// check validates a recorded packing against the source: its options,
// its document count and the counts that follow from each other. Errors
// wrap ErrFormat or ErrConfig.
func (pk *Packing) check(docs uint64) error {
	if err := pk.PackOptions.Validate(); err != nil {
		return err
	}
	bad := func(f string, a ...any) error {
		return &Error{Field: "packing", Err: fmt.Errorf("%s: %w", fmt.Sprintf(f, a...), ErrFormat)}
	}
	switch {
	case pk.Documents != docs:
		return bad("records %d documents, the source has %d rows", pk.Documents, docs)
	case pk.EmptyDocuments+pk.DroppedDocuments > docs:
		return bad("more empty and dropped documents than documents")
	case pk.Rows > (1<<63)/uint64(pk.Length) || pk.Rows*uint64(pk.Length) != pk.Tokens+pk.PadSlots:
		return bad("rows × length ≠ tokens + pad slots")
	case pk.Tokens > 0 && pk.Rows == 0:
		return bad("tokens without rows")
	case len(pk.Digest) != 7+64 || pk.Digest[:7] != "sha256:" || len(pk.LengthsDigest) != 7+64 || pk.LengthsDigest[:7] != "sha256:":
		return bad("malformed digest")
	}
	return nil
}

// NewPacked is NewContext for a packed plan (PLAN.md §12): lengths[d] is
// the token count of source row d (the list length of opts.Column; 0 for
// a null or empty list), one per source row; the plan's samples are the
// packed rows. Only shuffle modes none and global apply to packed rows
// (none also keeps documents in source order). Errors wrap ErrConfig.
func NewPacked(ctx context.Context, src Source, cfg Config, opts PackOptions, lengths []uint32, progress func(epoch, steps, total int)) (*Plan, *PackLayout, error) {
	if _, err := packedSource(src, cfg, lengths); err != nil {
		return nil, nil, err
	}
	if opts.Scope != "" {
		return nil, nil, configErrorf("packing.scope", "scope %s applies to a mixture of sources (a sources file) only", opts.Scope)
	}
	lay, pk, err := Pack(ctx, lengths, opts, cfg.Seed, cfg.Shuffle == ShuffleGlobal)
	if err != nil {
		return nil, nil, err
	}
	p, err := newContext(ctx, src, cfg, pk, nil, progress)
	if err != nil {
		return nil, nil, err
	}
	return p, lay, nil
}

// packedSource checks cfg for a packed plan (shuffle none or global, and
// Config.Validate) and returns a normalized copy of src (src is not
// modified) holding one document length per row. Errors: *ConfigError, and
// those of Source.Normalize.
func packedSource(src Source, cfg Config, lengths []uint32) (Source, error) {
	if cfg.Shuffle != ShuffleNone && cfg.Shuffle != ShuffleGlobal {
		return Source{}, configErrorf("shuffle", "packing takes shuffle none or global, not %s (packed rows do not belong to row groups)", cfg.Shuffle)
	}
	if err := cfg.Validate(); err != nil {
		return Source{}, err
	}
	s := src
	s.Files = append([]SourceFile(nil), src.Files...)
	s.EmptyFiles = append([]SourceFile(nil), src.EmptyFiles...)
	if err := s.Normalize(); err != nil {
		return Source{}, err
	}
	if uint64(len(lengths)) != s.NumSamples() {
		return Source{}, configErrorf("packing", "%d document lengths for a source of %d rows", len(lengths), s.NumSamples())
	}
	return s, nil
}
