package plan

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// PackScope says how a packed mixture groups the documents it draws into
// rows (PLAN.md §12.1).
type PackScope string

const (
	// ScopeAcross packs the documents of all sources together, in the
	// mixture's interleaved order: a packed row may hold documents of
	// several sources.
	ScopeAcross PackScope = "across"
	// ScopePerSource packs each source's documents into rows of their
	// own: every packed row holds documents of one source.
	ScopePerSource PackScope = "per_source"
)

// packMixture packs the documents a mixture draws in one epoch (PLAN.md
// §12.1): source i's draws d = 0 … c_i − 1 of epoch e are its stream
// positions e·c_i + d (§11.2), so a filter selects the documents, the
// quota c_i counts them before packing, and over epochs a source's stream
// continues as in an unpacked mixture. With scope across, the T draws are
// visited in the order of §11.4 applied to one batch holding c_i draws of
// each source (key (2j+1)/(2·c_i), ties to the lower source index) and
// packed in windows of opts.Window consecutive draws; with scope
// per_source, each source's draws are visited in draw order and packed in
// windows of their own, the rows of source i following those of the
// sources before it (Packing.SourceRows). lengths holds one token count
// per source row. The layout's First is 0. Errors wrap ErrConfig; ctx's
// error when ctx is done first. Memory: the layout, one window and O(m).
func packMixture(ctx context.Context, lengths []uint32, opts PackOptions, ms *mixState, epoch uint64) (*PackLayout, *Packing, error) {
	if err := opts.Validate(); err != nil {
		return nil, nil, err
	}
	if opts.Scope == "" {
		return nil, nil, configErrorf("packing.scope", "a packed mixture needs a scope (across or per_source)")
	}
	pr := newPackRun(lengths, opts)
	o := mixOrder{ms: ms, epoch: epoch}
	pp := o.newPerms()
	k := uint64(opts.Window)
	win := make([]uint64, 0, min(k, ms.t))
	switch opts.Scope {
	case ScopePerSource:
		rows := make([]uint64, len(ms.src))
		for i := range ms.src {
			before := pr.lay.Rows()
			c := ms.src[i].c
			for lo := uint64(0); lo < c; lo += k {
				win = win[:0]
				for d := lo; d < min(lo+k, c); d++ {
					win = append(win, o.drawID(pp, i, d))
				}
				if err := pr.window(ctx, win); err != nil {
					return nil, nil, err
				}
			}
			rows[i] = pr.lay.Rows() - before
		}
		pr.rec.SourceRows = rows
	default: // ScopeAcross
		cnt := make([]uint64, len(ms.src))
		for i := range ms.src {
			cnt[i] = ms.src[i].c
		}
		var err error
		merge(cnt, ms.t, func(_ uint64, i int, j uint64) {
			if err != nil {
				return
			}
			win = append(win, o.drawID(pp, i, j))
			if uint64(len(win)) == k {
				err = pr.window(ctx, win)
				win = win[:0]
			}
		})
		if err == nil && len(win) > 0 {
			err = pr.window(ctx, win)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	return pr.finish()
}

// packEpochs packs the draws of every epoch 0 … epochs−1 of a mixture
// (packMixture) and returns the plan's record (PLAN.md §12.1): one
// PackEpoch per epoch, the counts summed over the epochs, Rows the rows
// of all epochs and Digest their epochs digest. It holds one epoch's
// layout at a time. Errors: those of packMixture; an error wrapping
// ErrConfig when the epochs' rows reach MaxSamples.
func packEpochs(ctx context.Context, lengths []uint32, opts PackOptions, ms *mixState, epochs int) (*Packing, error) {
	var rec *Packing
	for e := range epochs {
		_, r, err := packMixture(ctx, lengths, opts, ms, uint64(e))
		if err != nil {
			return nil, err
		}
		if rec == nil {
			rec = &Packing{PackOptions: r.PackOptions, Documents: r.Documents, LengthsDigest: r.LengthsDigest, Epochs: make([]PackEpoch, 0, epochs)}
		}
		rec.Epochs = append(rec.Epochs, PackEpoch{Rows: r.Rows, Tokens: r.Tokens, PadSlots: r.PadSlots, EmptyDocuments: r.EmptyDocuments,
			DroppedDocuments: r.DroppedDocuments, DroppedTokens: r.DroppedTokens, SourceRows: r.SourceRows, Digest: r.Digest})
		rec.Rows += r.Rows
		rec.Tokens += r.Tokens
		rec.PadSlots += r.PadSlots
		rec.EmptyDocuments += r.EmptyDocuments
		rec.DroppedDocuments += r.DroppedDocuments
		rec.DroppedTokens += r.DroppedTokens
		if rec.Rows > MaxSamples {
			return nil, configErrorf("packing", "the epochs' packed rows exceed the limit of %d samples per plan", uint64(MaxSamples))
		}
	}
	rec.Digest = epochsDigest(rec.Epochs)
	return rec, nil
}

// epochsDigest is a packed mixture's Packing.Digest (PLAN.md §12.1):
// "sha256:" + hex SHA-256 of "prep-pack-epochs/v1" 0x00 LE64(E), then per
// epoch the 32 bytes of its layout digest, LE64(number of its
// source_rows) and LE64 of each. It returns "" when an epoch's digest is
// malformed.
func epochsDigest(eps []PackEpoch) string {
	h := sha256.New()
	h.Write([]byte("prep-pack-epochs/v1\x00"))
	buf := binary.LittleEndian.AppendUint64(nil, uint64(len(eps)))
	for _, ep := range eps {
		raw, err := hex.DecodeString(strings.TrimPrefix(ep.Digest, "sha256:"))
		if err != nil || len(raw) != sha256.Size || !strings.HasPrefix(ep.Digest, "sha256:") {
			return ""
		}
		buf = append(buf, raw...)
		buf = binary.LittleEndian.AppendUint64(buf, uint64(len(ep.SourceRows)))
		for _, r := range ep.SourceRows {
			buf = binary.LittleEndian.AppendUint64(buf, r)
		}
		if len(buf) >= 1<<16 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// NewPackedMixture is NewPacked for a plan whose documents come from the
// named sources of mix (PLAN.md §11, §12.1): filters and quotas choose the
// documents (mix.EpochSamples counts documents), and each epoch packs the
// documents it draws with opts (opts.Scope "" means ScopeAcross), its
// sources' streams continuing across epochs as in an unpacked mixture
// (§11.2). The plan's samples are the packed rows of every epoch (epoch
// e's are ids O_e … O_e+P_e−1), ordered per epoch by §12.1; the plan's
// format is FormatPackedMixture. It returns the layout of epoch 0.
// lengths[d] is the token count of source row d, one per row of src. The
// caller's mix is not modified. Cost: one packing per epoch, one epoch's
// layout held at a time. Errors wrap ErrConfig and name the source or the
// option.
func NewPackedMixture(ctx context.Context, src Source, cfg Config, opts PackOptions, mix *Mixture, lengths []uint32, progress func(epoch, steps, total int)) (*Plan, *PackLayout, error) {
	s, err := packedSource(src, cfg, lengths)
	if err != nil {
		return nil, nil, err
	}
	if opts.Scope == "" {
		opts.Scope = ScopeAcross
	}
	srcs, t, err := resolveMixture(&s, cfg, mix, true)
	if err != nil {
		return nil, nil, err
	}
	ms := newMixState(s.index, srcs, t, cfg)
	pk, err := packEpochs(ctx, lengths, opts, ms, cfg.Epochs)
	if err != nil {
		return nil, nil, err
	}
	p, err := newContext(ctx, src, cfg, pk, mix, progress)
	if err != nil {
		return nil, nil, err
	}
	lay, err := p.PackLayout(ctx, lengths, 0)
	if err != nil {
		return nil, nil, err
	}
	return p, lay, nil
}

// checkPackedMixture checks a recorded packing against the plan's
// mixture and epochs (PLAN.md §12.1): a scope and one PackEpoch per epoch
// exactly when there is a mixture; per epoch rows · L = tokens + pad
// slots and, with scope per_source, one row count per source adding up
// to its rows; the counts their sums over the epochs; and the digest the
// epochs digest. Errors wrap ErrFormat.
func checkPackedMixture(pk *Packing, mix *Mixture, epochs int) error {
	bad := func(f string, a ...any) error {
		return &Error{Field: "packing", Err: fmt.Errorf("%s: %w", fmt.Sprintf(f, a...), ErrFormat)}
	}
	switch {
	case mix == nil && (pk.Scope != "" || pk.SourceRows != nil || pk.Epochs != nil):
		return bad("scope %q, source_rows and epochs apply only to a plan with a mixture", pk.Scope)
	case mix == nil:
		return nil
	case pk.Scope == "":
		return bad("a packed mixture records its scope (across or per_source)")
	case pk.SourceRows != nil:
		return bad("a packed mixture records source_rows per epoch (packing.epochs)")
	case len(pk.Epochs) != epochs:
		return bad("%d epochs packed for a plan of %d epochs", len(pk.Epochs), epochs)
	}
	var sum PackEpoch
	for e, ep := range pk.Epochs {
		switch {
		case ep.Rows > MaxSamples || ep.Rows > (1<<63)/uint64(pk.Length) || ep.Tokens > 1<<63 || ep.PadSlots > 1<<63 ||
			ep.Rows*uint64(pk.Length) != ep.Tokens+ep.PadSlots:
			return bad("epoch %d: rows × length ≠ tokens + pad slots", e)
		case pk.Scope == ScopeAcross && ep.SourceRows != nil:
			return bad("epoch %d: source_rows applies only to scope per_source", e)
		case pk.Scope == ScopePerSource && len(ep.SourceRows) != len(mix.Sources):
			return bad("epoch %d: %d source_rows for %d sources", e, len(ep.SourceRows), len(mix.Sources))
		}
		var rows uint64
		for _, r := range ep.SourceRows {
			rows += r
		}
		if pk.Scope == ScopePerSource && rows != ep.Rows {
			return bad("epoch %d: source_rows add up to %d, not its %d rows", e, rows, ep.Rows)
		}
		sum.Rows += ep.Rows
		sum.Tokens += ep.Tokens
		sum.PadSlots += ep.PadSlots
		sum.EmptyDocuments += ep.EmptyDocuments
		sum.DroppedDocuments += ep.DroppedDocuments
		sum.DroppedTokens += ep.DroppedTokens
		if sum.Rows > MaxSamples {
			return bad("the epochs' rows exceed %d", uint64(MaxSamples))
		}
	}
	if sum.Rows != pk.Rows || sum.Tokens != pk.Tokens || sum.PadSlots != pk.PadSlots || sum.EmptyDocuments != pk.EmptyDocuments ||
		sum.DroppedDocuments != pk.DroppedDocuments || sum.DroppedTokens != pk.DroppedTokens {
		return bad("the counts are not the sums of the epochs' counts")
	}
	if d := epochsDigest(pk.Epochs); d == "" || d != pk.Digest {
		return bad("digest %s is not the epochs digest %s of its epochs", pk.Digest, d)
	}
	return nil
}

// sourceOfRow returns the mixture source of packed row id (scope
// per_source), or -1 when rows may hold several sources' documents.
// epoch and first are the epoch holding the row and its first row's id.
func (pk *Packing) sourceOfRow(id uint64, epoch int, first uint64) int {
	rows := pk.SourceRows
	if pk.Epochs != nil {
		rows, id = pk.Epochs[epoch].SourceRows, id-first
	}
	for i, r := range rows {
		if id < r {
			return i
		}
		id -= r
	}
	return -1
}

// PackLayout recomputes the layout of epoch's packed rows (PLAN.md §12,
// §12.1) from the document lengths (one per source row, as NewPacked
// takes them) and checks it is the one the plan records: the lengths
// digest first (ErrMismatch naming the column when the source's lengths
// changed), then the layout's digest and rows. A plan packed once (no
// mixture) has the same layout in every epoch (First 0); epoch e of a
// packed mixture packs that epoch's draws, its rows the sample ids
// First = O_e … O_e+P_e−1. Errors: ErrConfig for a plan without packing,
// ErrRange for an epoch out of range, ctx's error.
func (p *Plan) PackLayout(ctx context.Context, lengths []uint32, epoch int) (*PackLayout, error) {
	pk := p.Packing
	if pk == nil {
		return nil, configErrorf("packing", "the plan packs no column")
	}
	if epoch < 0 || epoch >= p.Config.Epochs {
		return nil, rangeErrorf("epoch %d not in [0, %d)", epoch, p.Config.Epochs)
	}
	if err := p.CheckLengths(lengths); err != nil {
		return nil, err
	}
	var (
		lay        *PackLayout
		rec        *Packing
		err        error
		rows, want = pk.Rows, pk.Digest
		srcRows    = pk.SourceRows
	)
	if p.packMix != nil {
		lay, rec, err = packMixture(ctx, lengths, pk.PackOptions, p.packMix, uint64(epoch))
		ep := pk.Epochs[epoch]
		rows, want, srcRows = ep.Rows, ep.Digest, ep.SourceRows
	} else {
		lay, rec, err = Pack(ctx, lengths, pk.PackOptions, p.Config.Seed, p.Config.Shuffle == ShuffleGlobal)
	}
	if err != nil {
		return nil, err
	}
	if rec.Digest != want || rec.Rows != rows || !slices.Equal(rec.SourceRows, srcRows) {
		return nil, fmt.Errorf("packing: epoch %d: recomputed layout %s (%d rows), the plan recorded %s (%d rows): %w", epoch, rec.Digest, rec.Rows, want, rows, ErrMismatch)
	}
	lay.First = p.st.rowBase(epoch)
	return lay, nil
}

// CheckLengths checks the document lengths (one per source row, as
// NewPacked takes them) against the packed plan's lengths digest: an
// error wrapping ErrMismatch, naming the column, when they differ (the
// source changed since the plan was made); ErrConfig for a plan without
// packing.
func (p *Plan) CheckLengths(lengths []uint32) error {
	pk := p.Packing
	if pk == nil {
		return configErrorf("packing", "the plan packs no column")
	}
	if got := LengthsDigest(lengths); got != pk.LengthsDigest {
		return fmt.Errorf("packing: the lengths of column %s (%d rows) digest to %s, the plan recorded %s: the source changed since the plan was made: %w",
			pk.Column, len(lengths), got, pk.LengthsDigest, ErrMismatch)
	}
	return nil
}

// LayoutEpoch returns the epoch whose layout (PackLayout) holds packed
// row id: the epoch e with O_e ≤ id < O_e + P_e in a packed mixture, 0 in
// a plan packed once (every epoch has that layout); -1 for a plan without
// packing or an id out of range. O(log epochs).
func (p *Plan) LayoutEpoch(id uint64) int {
	if p.Packing == nil || id >= p.NumSamples() {
		return -1
	}
	return p.st.rowEpoch(id)
}

// DocumentSource returns the index in Mixture.Sources of the source that
// holds document doc (a source row, as Piece.Doc names it) of a packed
// mixture (PLAN.md §12.1), or -1 for a plan that is not one or a doc out
// of range. O(log row groups).
func (p *Plan) DocumentSource(doc uint64) int {
	if p.packMix == nil || doc >= p.Source.NumSamples() {
		return -1
	}
	return p.packMix.sourceOf(doc)
}
