package feature

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/source"
)

// Packed plans (PLAN.md §12, SPEC.md §2.9): a sample is a packed row of L
// tokens made of document pieces. The spec holds one tensor, on the
// packed column; it becomes four output tensors per packed row:
//
//	NAME             dtype [L]   the tokens, the pad id after the last piece
//	NAME_segment_ids I32 [L]     1..k for the row's pieces in order, 0 for padding
//	NAME_positions   I32 [L]     0, 1, ... restarting at each piece, 0 for padding
//	NAME_cu_seqlens  I32 jagged  k+1 values: 0, n_1, n_1+n_2, ..., the piece boundaries
//
// The run reads the token column's lengths again (levels only), recomputes
// the packing and checks its digests against the plan (Plan.PackLayout),
// decodes the documents the requested shards hold as a jagged tensor of a
// plan over the source rows (the document plan), in groups of steps whose
// documents fit half of --memory-limit (runPacked), holds a group's tokens
// in anonymous memory (4 or 8 bytes per token) and writes its batches
// from them. Per-document columns (packed_spec.go) are decoded with the
// tokens, one value per document.

// Suffixes of the packed outputs.
const (
	SegmentIDsSuffix = "_segment_ids" // I32 [L]: 1..k per piece, 0 for padding
	PositionsSuffix  = "_positions"   // I32 [L]: position within the piece, 0 for padding
	CuSeqlensSuffix  = "_cu_seqlens"  // I32 jagged: the row's piece boundaries, 0 first
)

// packedRun is what a run of a packed plan keeps beside the runner.
type packedRun struct {
	pk      *plan.Packing
	name    string     // the token tensor's name
	docSpec *Spec      // the packed column as a jagged tensor over documents, then the extras' columns
	docPlan *plan.Plan // one epoch of the source rows in source order
	es      int        // bytes per token (4 or 8)
	eod     []byte     // the EOD id in the dtype, nil when none
	pad     []byte     // the pad id in the dtype
	extras  []packedExtra
	tokHeld int // the tokens' output index among the decoded document tensors

	heldOnce sync.Once // findHeld for decode, which may run on several goroutines (PackedGroups)
	heldErr  error
}

// PackedTensors returns the output tensors of spec over a plan packed as
// pk (see the file comment, and packed_spec.go for the per-document
// tensors), or an error wrapping ErrSpec: the spec must hold exactly one
// tensor on pk.Column, without a packed policy, of dtype I32 or I64,
// without shape, bytes or map policy (a list policy, if any, jagged), the
// EOD and pad ids must fit the dtype, and every other tensor must carry a
// packed policy (PackedPolicy).
func PackedTensors(spec *Spec, pk *plan.Packing) ([]shardfmt.TensorInfo, error) {
	pr, err := newPackedRun(spec, pk)
	if err != nil {
		return nil, err
	}
	return pr.tensors(), nil
}

func newPackedRun(spec *Spec, pk *plan.Packing) (*packedRun, error) {
	tok := -1
	for i, t := range spec.Tensors {
		if t.Column == pk.Column && t.Packed == nil {
			if tok >= 0 {
				return nil, specErrorf("tensors %q and %q both read the packed column %s; the spec holds one token tensor", spec.Tensors[tok].Name, t.Name, pk.Column)
			}
			tok = i
		}
	}
	if tok < 0 {
		return nil, specErrorf("the plan packs column %s: the spec must hold one tensor on that column (the tokens), without a packed policy", pk.Column)
	}
	t := spec.Tensors[tok]
	switch {
	case t.DType != "I32" && t.DType != "I64":
		return nil, specErrorf("tensor %q: packed tokens take dtype I32 or I64, not %s", t.Name, t.DType)
	case len(t.Shape) > 0 || t.Bytes != nil || t.Map != nil || (t.List != nil && !t.List.Jagged):
		return nil, specErrorf("tensor %q: a packed column takes no shape, bytes, map or fixed list policy (its rows are [%d] by the plan)", t.Name, pk.Length)
	}
	pr := &packedRun{pk: pk, es: 4, name: t.Name}
	if t.DType == "I64" {
		pr.es = 8
	}
	put := func(what string, v int64) ([]byte, error) {
		if pr.es == 4 && (v < math.MinInt32 || v > math.MaxInt32) {
			return nil, specErrorf("tensor %q: the packing's %s id %d does not fit I32", t.Name, what, v)
		}
		b := make([]byte, pr.es)
		putInt(b, v)
		return b, nil
	}
	var err error
	if pr.pad, err = put("pad", pk.Pad); err != nil {
		return nil, err
	}
	if pk.EOD != nil {
		if pr.eod, err = put("eod", *pk.EOD); err != nil {
			return nil, err
		}
	}
	d := t
	d.List = &ListPolicy{Jagged: true}
	pr.docSpec = &Spec{Tensors: []TensorSpec{d}}
	for i, x := range spec.Tensors {
		if i == tok {
			continue
		}
		e, err := newPackedExtra(x, pk)
		if err != nil {
			return nil, err
		}
		pr.extras = append(pr.extras, e)
		x.Packed = nil
		pr.docSpec.Tensors = append(pr.docSpec.Tensors, x)
	}
	names := map[string]bool{}
	for _, ti := range pr.tensors() {
		if names[ti.Name] {
			return nil, specErrorf("tensor name %q used twice in the packed outputs (the token tensor %q also yields %s%s, %s%s and %s%s)",
				ti.Name, t.Name, t.Name, SegmentIDsSuffix, t.Name, PositionsSuffix, t.Name, CuSeqlensSuffix)
		}
		names[ti.Name] = true
	}
	// prep export writes each packed batch's documents beside the
	// tensors, and a jagged output's offsets as <name>_offsets.npy.
	for _, ti := range pr.tensors() {
		if slices.Contains(packedExportNames, ti.Name) {
			return nil, specErrorf("tensor %q: the name is reserved in a packed plan (prep export writes documents.npy, documents_offsets.npy and documents_sources.npy beside the tensors); rename the tensor", ti.Name)
		}
		if ti.Jagged && names[DerivedName(ti.Name, DerivedOffsets)] {
			return nil, specErrorf("tensor name %q is the offsets of the jagged packed output %q (prep export writes them as %s_offsets.npy); rename the tensor", ti.Name+"_offsets", ti.Name, ti.Name)
		}
	}
	return pr, nil
}

// packedExportNames are the names of the files, less ".npy", that prep
// export writes beside a packed batch's tensors (describe.DocumentsFile and
// its companions).
var packedExportNames = []string{"documents", "documents_offsets", "documents_sources"}

// putInt writes v little-endian into b (4 or 8 bytes).
func putInt(b []byte, v int64) {
	if len(b) == 4 {
		binary.LittleEndian.PutUint32(b, uint32(int32(v)))
		return
	}
	binary.LittleEndian.PutUint64(b, uint64(v))
}

// tensors returns the run's output tensors: the four of the token tensor
// (file comment), then one per extra, in spec order.
func (pr *packedRun) tensors() []shardfmt.TensorInfo {
	dt := shardfmt.I32
	if pr.es == 8 {
		dt = shardfmt.I64
	}
	l := []uint64{uint64(pr.pk.Length)}
	name := pr.name
	out := []shardfmt.TensorInfo{
		{Name: name, DType: dt, Shape: l},
		{Name: name + SegmentIDsSuffix, DType: shardfmt.I32, Shape: l},
		{Name: name + PositionsSuffix, DType: shardfmt.I32, Shape: l},
		{Name: name + CuSeqlensSuffix, DType: shardfmt.I32, Jagged: true},
	}
	for i := range pr.extras {
		out = append(out, pr.extras[i].tensorInfo(pr.pk.Length))
	}
	return out
}

// cuTensor is the output index of the cu_seqlens tensor; the extras
// follow it.
const cuTensor = 3

// documentPlan returns the plan whose sample ids are p's source rows:
// one epoch in source order, every row in one partial batch per row.
func documentPlan(p *plan.Plan) (*plan.Plan, error) {
	return plan.New(p.Source, plan.Config{Epochs: 1, GlobalBatch: 1, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderPartial})
}

// PackedDocuments holds the tokens of some documents of a packed plan,
// decoded from the source, and the plan's layouts: enough to build any
// packed row holding only those documents (Row).
type PackedDocuments struct {
	lays  *packLayouts
	pr    *packedRun
	docs  []uint64 // ascending
	held  *HeldSamples
	bytes int64 // heldBytes of docs
}

// Close releases the documents' memory.
func (d *PackedDocuments) Close() { d.held.Close() }

// Len returns the number of documents held.
func (d *PackedDocuments) Len() int { return len(d.docs) }

// RowGroups returns the row groups read to decode the documents and the
// non-empty row groups skipped for holding none of them.
func (d *PackedDocuments) RowGroups() (read, skipped int) {
	return d.held.rowGroupsRead, d.held.rowGroupsSkipped
}

// HeldBytes returns the bytes the documents take decoded, as a packed
// run's --memory-limit counts them: each document's tokens at the dtype's
// size plus its staging record (the tokens' reference, a U8 null mask
// when the token column has one, the per-document columns' values).
func (d *PackedDocuments) HeldBytes() int64 { return d.bytes }

// packedSource is a packed run's inputs before any document is decoded:
// the spec's outputs, every source row's token count (checked against the
// plan) and the layouts.
type packedSource struct {
	pr       *packedRun
	lengths  []uint32
	lays     *packLayouts
	recBytes int64 // staging record bytes per document held
}

// packLayouts holds the packing layouts a run needs, each recomputed from
// the lengths and checked against the plan on first use
// (plan.Plan.PackLayout) and kept for the run's life: one for a plan
// packed once (every epoch's), one per epoch for a packed mixture, whose
// epochs pack their own draws (PLAN.md §12.1). Memory: 16 bytes per piece
// and 8 per row of each layout held. Safe for concurrent use.
type packLayouts struct {
	p       *plan.Plan
	lengths []uint32
	mu      sync.Mutex
	byEpoch map[int]*plan.PackLayout
}

func newPackLayouts(p *plan.Plan, lengths []uint32) *packLayouts {
	return &packLayouts{p: p, lengths: lengths, byEpoch: map[int]*plan.PackLayout{}}
}

// epoch returns the layout of epoch e's packed rows, computing it on
// first use (ErrMismatch when it differs from the plan's).
func (l *packLayouts) epoch(ctx context.Context, e int) (*plan.PackLayout, error) {
	if l.p.Packing.Epochs == nil {
		e = 0 // packed once: every epoch has epoch 0's layout
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if lay := l.byEpoch[e]; lay != nil {
		return lay, nil
	}
	lay, err := l.p.PackLayout(ctx, l.lengths, e)
	if err != nil {
		return nil, err
	}
	l.byEpoch[e] = lay
	return lay, nil
}

// row returns the pieces of packed row id, computing its epoch's layout
// on first use; an id outside the plan wraps ErrValue.
func (l *packLayouts) row(ctx context.Context, id uint64) ([]plan.Piece, error) {
	e := l.p.LayoutEpoch(id)
	if e < 0 {
		return nil, ValueErrorf("packed row %d not in [0, %d)", id, l.p.NumSamples())
	}
	lay, err := l.epoch(ctx, e)
	if err != nil {
		return nil, err
	}
	pcs, _ := lay.RowOf(id)
	return pcs, nil
}

// held returns the pieces of packed row id from a layout computed
// already, and false when its epoch's layout has not been.
func (l *packLayouts) held(id uint64) ([]plan.Piece, bool) {
	e := l.p.LayoutEpoch(id)
	if l.p.Packing.Epochs == nil {
		e = 0
	}
	l.mu.Lock()
	lay := l.byEpoch[e]
	l.mu.Unlock()
	if lay == nil {
		return nil, false
	}
	return lay.RowOf(id)
}

// preparePacked reads the packing of p again from the source (the token
// column's lengths, levels only) and checks it against the plan
// (plan.Plan.PackLayout: ErrMismatch when the source changed).
func preparePacked(ctx context.Context, st source.Store, jobs int, p *plan.Plan, spec *Spec) (*packedSource, error) {
	ps, err := newPackedSource(p, spec)
	if err != nil {
		return nil, err
	}
	if ps.lengths, err = TokenLengths(ctx, st, p.Source, p.Packing.Column, jobs); err != nil {
		return nil, err
	}
	if err := p.CheckLengths(ps.lengths); err != nil {
		return nil, err
	}
	ps.lays = newPackLayouts(p, ps.lengths)
	return ps, nil
}

// newPackedSource checks spec against p's packing; lengths and layout are
// left to fill.
func newPackedSource(p *plan.Plan, spec *Spec) (*packedSource, error) {
	pk := p.Packing
	if pk == nil {
		return nil, specErrorf("the plan packs no column")
	}
	pr, err := newPackedRun(spec, pk)
	if err != nil {
		return nil, err
	}
	if pr.docPlan, err = documentPlan(p); err != nil {
		return nil, err
	}
	ps := &packedSource{pr: pr, recBytes: RefBytes}
	if t := pr.docSpec.Tensors[0]; t.Nulls != nil && t.Nulls.Mask {
		ps.recBytes++ // the tokens' U8 null mask
	}
	for _, x := range pr.extras {
		ps.recBytes += int64(x.dt.Size())
	}
	return ps, nil
}

// decodeAll decodes every document of p (split chunk: all of them are
// packed) when a bound on their held bytes from the footers (the token
// column's level entries, pqread's decoded-size estimate per row group,
// at the dtype's size, plus a record per row) is at most budget, and
// takes the lengths from the decoded lists instead of a levels pass: the
// lengths digest and the layout are then checked as preparePacked does.
// It returns nil, nil when the bound exceeds budget, when split is none
// (its dropped documents need not decode) or when a per-document column
// has no nulls.fill (a null there is an error only in a packed document,
// and an empty document is packed nowhere). A null token list decodes as
// an empty document, as TokenLengths counts it.
func decodeAll(ctx context.Context, st source.Store, runLimit int64, p *plan.Plan, spec *Spec, budget int64) (*packedSource, *PackedDocuments, int64, error) {
	if p.Packing.Split != plan.SplitChunk {
		return nil, nil, 0, nil
	}
	ps, err := newPackedSource(p, spec)
	if err != nil {
		return nil, nil, 0, err
	}
	for _, t := range ps.pr.docSpec.Tensors[1:] {
		if t.Nulls == nil || t.Nulls.Fill == nil {
			// A null in a per-document column is an error only for a
			// document that is packed: decode only those.
			return nil, nil, 0, nil
		}
	}
	entries, err := tokenEntriesBound(ctx, st, p.Source, p.Packing.Column)
	if err != nil {
		return nil, nil, 0, err
	}
	n := p.Source.NumSamples()
	if entries > budget/int64(ps.pr.es) || int64(n) > (budget-entries*int64(ps.pr.es))/ps.recBytes {
		return nil, nil, 0, nil
	}
	if tok := &ps.pr.docSpec.Tensors[0]; tok.Nulls == nil {
		tok.Nulls = &NullPolicy{} // a null list: an empty document
	}
	docs := make([]uint64, n)
	for i := range docs {
		docs[i] = uint64(i)
	}
	held, err := Hold(ctx, st, ps.pr.docPlan, ps.pr.docSpec, docs, NewBudget(runLimit).PackedDecode())
	if err != nil {
		return nil, nil, 0, err
	}
	if err := ps.pr.findHeld(held.Tensors()); err != nil {
		held.Close()
		return nil, nil, 0, err
	}
	ps.lengths = make([]uint32, n)
	var bytes int64
	for i := range ps.lengths {
		v := len(held.Sample(ps.pr.tokHeld, i)) / ps.pr.es
		if v > 1<<32-1 {
			held.Close()
			return nil, nil, 0, ValueErrorf("document %d (source row) holds %d tokens, more than 2^32-1", i, v)
		}
		ps.lengths[i] = uint32(v)
		bytes += ps.heldBytes(uint64(i))
	}
	if err := p.CheckLengths(ps.lengths); err != nil {
		held.Close()
		return nil, nil, 0, err
	}
	ps.lays = newPackLayouts(p, ps.lengths)
	return ps, &PackedDocuments{lays: ps.lays, pr: ps.pr, docs: docs, held: held, bytes: bytes}, bytes, nil
}

// heldBytes returns what holding document d decoded costs: its tokens at
// the dtype's size, then its staging record (the tokens' reference, the
// per-document columns' values).
func (ps *packedSource) heldBytes(d uint64) int64 {
	return int64(ps.lengths[d])*int64(ps.pr.es) + ps.recBytes
}

// decode decodes the documents docs (ascending source rows) with the
// decoded column chunks in flight bounded by lim.
func (ps *packedSource) decode(ctx context.Context, st source.Store, docs []uint64, lim Bounds) (*PackedDocuments, error) {
	pr := ps.pr
	held, err := Hold(ctx, st, pr.docPlan, pr.docSpec, docs, lim)
	if err != nil {
		return nil, err
	}
	pr.heldOnce.Do(func() { pr.heldErr = pr.findHeld(held.Tensors()) })
	if pr.heldErr != nil {
		held.Close()
		return nil, pr.heldErr
	}
	var bytes int64
	for i, d := range docs {
		if n := len(held.Sample(pr.tokHeld, i)) / pr.es; n != int(ps.lengths[d]) {
			held.Close()
			return nil, ValueErrorf("document %d (source row) decoded %d tokens, its list length is %d", d, n, ps.lengths[d])
		}
		bytes += ps.heldBytes(d)
	}
	return &PackedDocuments{lays: ps.lays, pr: pr, docs: docs, held: held, bytes: bytes}, nil
}

// findHeld finds the token tensor and the extras among the decoded
// document tensors, by name.
func (pr *packedRun) findHeld(ts []shardfmt.TensorInfo) error {
	at := map[string]int{}
	for i, t := range ts {
		at[t.Name] = i
	}
	var ok bool
	if pr.tokHeld, ok = at[pr.name]; !ok {
		return fmt.Errorf("internal: token tensor %q not decoded", pr.name)
	}
	for i := range pr.extras {
		x := &pr.extras[i]
		if x.held, ok = at[x.name]; !ok || ts[x.held].Jagged || ts[x.held].DType != x.dt || len(ts[x.held].Shape) != 0 {
			return fmt.Errorf("internal: per-document tensor %q not decoded as one %s", x.name, x.dt)
		}
	}
	return nil
}

// pieces returns the pieces of packed row r, whose epoch's layout the
// documents were grouped with (packLayouts.row) or, for documents decoded
// all at once, that runPacked computed before writing.
func (d *PackedDocuments) pieces(r uint64) ([]plan.Piece, error) {
	pcs, ok := d.lays.held(r)
	if !ok {
		return nil, fmt.Errorf("internal: the layout of packed row %d is not computed", r)
	}
	return pcs, nil
}

// index returns the position of document doc among the held ones.
func (d *PackedDocuments) index(doc uint64) (int, error) {
	i := sort.Search(len(d.docs), func(i int) bool { return d.docs[i] >= doc })
	if i == len(d.docs) || d.docs[i] != doc {
		return 0, fmt.Errorf("internal: document %d not decoded", doc)
	}
	return i, nil
}

// Row writes packed row r into tokens (L values of the dtype), segs and
// pos (L I32 each), and appends its k+1 piece boundaries to cu (I32
// values). tokens, segs and pos must be zeroed by the caller.
func (d *PackedDocuments) Row(r uint64, tokens, segs, pos []byte, cu []byte) ([]byte, error) {
	pr := d.pr
	es := pr.es
	at := 0
	cu = binary.LittleEndian.AppendUint32(cu, 0)
	row, err := d.pieces(r)
	if err != nil {
		return cu, err
	}
	for j, pc := range row {
		i, err := d.index(pc.Doc)
		if err != nil {
			return cu, err
		}
		vals := d.held.Sample(pr.tokHeld, i)
		n := len(vals) / es
		lo, hi := int(pc.Offset), int(pc.Offset)+int(pc.Len)
		limit := n
		if pr.eod != nil {
			limit++
		}
		if hi > limit {
			return cu, fmt.Errorf("internal: piece [%d, %d) of document %d beyond its %d tokens", lo, hi, pc.Doc, n)
		}
		if lo < n {
			copy(tokens[at*es:], vals[lo*es:min(hi, n)*es])
		}
		if hi > n { // the EOD closes the document
			copy(tokens[(at+hi-lo-1)*es:], pr.eod)
		}
		for i := 0; i < hi-lo; i++ {
			binary.LittleEndian.PutUint32(segs[(at+i)*4:], uint32(j+1))
			binary.LittleEndian.PutUint32(pos[(at+i)*4:], uint32(i))
		}
		at += hi - lo
		cu = binary.LittleEndian.AppendUint32(cu, uint32(at))
	}
	if !isZero(pr.pad) {
		for i := at; i < pr.pk.Length; i++ {
			copy(tokens[i*es:], pr.pad)
		}
	}
	return cu, nil
}

// FillFixed writes packed row r's fixed-shape tensors (every output of
// PackedTensors but the jagged ones, by output index t): slot(t) is the
// row's zeroed slot of tensor t. The token tensors are Row's; a per-token
// extra holds its document's value over each piece's tokens, then its pad
// value.
func (d *PackedDocuments) FillFixed(r uint64, slot func(t int) []byte) error {
	if _, err := d.Row(r, slot(0), slot(1), slot(2), nil); err != nil {
		return err
	}
	for e := range d.pr.extras {
		x := &d.pr.extras[e]
		if !x.perToken {
			continue
		}
		dst, es, at := slot(cuTensor+1+e), len(x.pad), 0
		row, err := d.pieces(r)
		if err != nil {
			return err
		}
		for _, pc := range row {
			i, err := d.index(pc.Doc)
			if err != nil {
				return err
			}
			v := d.held.Sample(x.held, i)
			for k := 0; k < int(pc.Len); k++ {
				copy(dst[(at+k)*es:], v)
			}
			at += int(pc.Len)
		}
		if !isZero(x.pad) {
			for k := at; k < d.pr.pk.Length; k++ {
				copy(dst[k*es:], x.pad)
			}
		}
	}
	return nil
}

// AppendJagged appends packed row r's values of jagged output t to dst:
// the cu_seqlens (I32, k+1 values) or a per-document extra's k values,
// one per piece in order.
func (d *PackedDocuments) AppendJagged(t int, r uint64, dst []byte) ([]byte, error) {
	row, err := d.pieces(r)
	if err != nil {
		return dst, err
	}
	if t == cuTensor {
		at := uint32(0)
		dst = binary.LittleEndian.AppendUint32(dst, 0)
		for _, pc := range row {
			at += pc.Len
			dst = binary.LittleEndian.AppendUint32(dst, at)
		}
		return dst, nil
	}
	e := t - cuTensor - 1
	if e < 0 || e >= len(d.pr.extras) || d.pr.extras[e].perToken {
		return dst, fmt.Errorf("internal: output %d is not a jagged tensor of the packed run", t)
	}
	for _, pc := range row {
		i, err := d.index(pc.Doc)
		if err != nil {
			return dst, err
		}
		dst = append(dst, d.held.Sample(d.pr.extras[e].held, i)...)
	}
	return dst, nil
}

// JaggedCount returns the values packed row r holds in jagged output t
// (AppendJagged's count): k+1 for the cu_seqlens, k for an extra; 0
// for a row whose layout is not held (AppendJagged reports it).
func (d *PackedDocuments) JaggedCount(t int, r uint64) uint64 {
	row, ok := d.lays.held(r)
	if !ok {
		return 0
	}
	k := uint64(len(row))
	if t == cuTensor {
		return k + 1
	}
	return k
}

func isZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}
