package describe

import (
	"encoding/binary"
	"fmt"
	"path/filepath"

	"github.com/prepml/prep/internal/npy"
	"github.com/prepml/prep/plan"
)

// Files Export writes for a packed shard set (PLAN.md §12): which
// documents make each packed row, so every token is traceable to its
// source row.
const (
	// DocumentsFile is '<i8' [M, 3]: the pieces of the count present packed
	// rows, one after another, each (document sample id, offset, length):
	// tokens [offset, offset+length) of the document's token stream (its
	// list values, then the EOD id when the packing sets one).
	DocumentsFile = "documents.npy"
	// DocumentsOffsetsFile is '<i8' [count+1]: row i's pieces are rows
	// [offsets[i], offsets[i+1]) of DocumentsFile.
	DocumentsOffsetsFile = "documents_offsets.npy"
	// DocumentsSourcesFile is '<i4' [M], for a packed mixture (PLAN.md
	// §12.1) only: each piece's document source, an index into
	// ExportResult.Sources.
	DocumentsSourcesFile = "documents_sources.npy"
)

// PackedRow is one present packed row of an exported batch and its
// documents in order.
type PackedRow struct {
	ID     uint64        `json:"id"` // packed row id (the sample id)
	Pad    bool          `json:"pad"`
	Pieces []PackedPiece `json:"documents"`
}

// PackedPiece is one document piece of a packed row.
type PackedPiece struct {
	Doc    uint64 `json:"sample_id"`        // the document's source row (global row index)
	Offset uint32 `json:"offset"`           // first token of the piece in the document's token stream
	Len    uint32 `json:"length"`           // tokens
	Source string `json:"source,omitempty"` // the document's mixture source (a packed mixture only)
}

// exportPieces writes DocumentsFile and DocumentsOffsetsFile for the
// batch's ids and adds the rows to res; for a packed mixture (mix not nil,
// with a packing), also DocumentsSourcesFile.
func exportPieces(dir string, ids []uint64, pieces [][]plan.Piece, mix *plan.Plan, res *ExportResult) error {
	if mix != nil && mix.Packing == nil {
		mix = nil
	}
	if len(pieces) != len(ids) {
		return fmt.Errorf("documents of %d packed rows for %d samples", len(pieces), len(ids))
	}
	var docs, srcs []byte
	offs := binary.LittleEndian.AppendUint64(nil, 0)
	m := 0
	for i, row := range pieces {
		pr := PackedRow{ID: ids[i], Pad: i >= len(ids)-res.Pads, Pieces: []PackedPiece{}}
		for _, pc := range row {
			docs = binary.LittleEndian.AppendUint64(docs, pc.Doc)
			docs = binary.LittleEndian.AppendUint64(docs, uint64(pc.Offset))
			docs = binary.LittleEndian.AppendUint64(docs, uint64(pc.Len))
			pp := PackedPiece{Doc: pc.Doc, Offset: pc.Offset, Len: pc.Len}
			if mix != nil {
				s := mix.DocumentSource(pc.Doc)
				if s < 0 {
					return fmt.Errorf("packed row %d: document %d belongs to no source of the plan's mixture", ids[i], pc.Doc)
				}
				srcs = binary.LittleEndian.AppendUint32(srcs, uint32(s))
				pp.Source = mix.Mixture.Sources[s].Name
			}
			pr.Pieces = append(pr.Pieces, pp)
		}
		m += len(row)
		offs = binary.LittleEndian.AppendUint64(offs, uint64(m))
		res.Rows = append(res.Rows, pr)
	}
	type npyFile struct {
		name, descr string
		shape       []int
		data        []byte
	}
	files := []npyFile{{DocumentsFile, "<i8", []int{m, 3}, docs}, {DocumentsOffsetsFile, "<i8", []int{len(ids) + 1}, offs}}
	if mix != nil {
		files = append(files, npyFile{DocumentsSourcesFile, "<i4", []int{m}, srcs})
	}
	for _, f := range files {
		file := filepath.Join(dir, f.name)
		if err := npy.WriteFile(file, f.descr, f.shape, f.data); err != nil {
			return err
		}
		res.Files = append(res.Files, ExportedFile{File: file, Part: "documents", Descr: f.descr, Shape: f.shape})
	}
	return nil
}
