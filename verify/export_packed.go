package verify

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
	Doc    uint64 `json:"sample_id"` // the document's source row (global row index)
	Offset uint32 `json:"offset"`    // first token of the piece in the document's token stream
	Len    uint32 `json:"length"`    // tokens
}

// exportPieces writes DocumentsFile and DocumentsOffsetsFile for the
// batch's ids and adds the rows to res.
func exportPieces(dir string, ids []uint64, pieces [][]plan.Piece, res *ExportResult) error {
	if len(pieces) != len(ids) {
		return fmt.Errorf("documents of %d packed rows for %d samples", len(pieces), len(ids))
	}
	var docs []byte
	offs := binary.LittleEndian.AppendUint64(nil, 0)
	m := 0
	for i, row := range pieces {
		pr := PackedRow{ID: ids[i], Pad: i >= len(ids)-res.Pads, Pieces: []PackedPiece{}}
		for _, pc := range row {
			docs = binary.LittleEndian.AppendUint64(docs, pc.Doc)
			docs = binary.LittleEndian.AppendUint64(docs, uint64(pc.Offset))
			docs = binary.LittleEndian.AppendUint64(docs, uint64(pc.Len))
			pr.Pieces = append(pr.Pieces, PackedPiece{Doc: pc.Doc, Offset: pc.Offset, Len: pc.Len})
		}
		m += len(row)
		offs = binary.LittleEndian.AppendUint64(offs, uint64(m))
		res.Rows = append(res.Rows, pr)
	}
	for _, f := range []struct {
		name  string
		shape []int
		data  []byte
	}{{DocumentsFile, []int{m, 3}, docs}, {DocumentsOffsetsFile, []int{len(ids) + 1}, offs}} {
		file := filepath.Join(dir, f.name)
		if err := npy.WriteFile(file, "<i8", f.shape, f.data); err != nil {
			return err
		}
		res.Files = append(res.Files, ExportedFile{File: file, Part: "documents", Descr: "<i8", Shape: f.shape})
	}
	return nil
}
