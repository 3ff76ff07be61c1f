package shardfmt

// Region is a named byte range of a shard file (or of a block, for slabs).
type Region struct {
	Name   string `json:"name"`
	Offset uint64 `json:"offset"`
	Size   uint64 `json:"size"`
}

// Layout is the structure of an open shard, computed by the library for
// tools such as `prep inspect` to render.
type Layout struct {
	Major    int    `json:"major"` // format version of the file
	Minor    int    `json:"minor"`
	FileSize uint64 `json:"file_size"`
	// Regions covers the file in order without gaps: "header",
	// "tensor table", "metadata", "padding" (zero bytes up to the 4096-aligned
	// data offset, possibly empty), "data" (all blocks), "batch table",
	// "sample ids", "footer"; in format 2 "sample ids" comes after
	// "metadata", before "padding".
	Regions    []Region `json:"regions"`
	DataOffset uint64   `json:"data_offset"`
	BlockSize  uint64   `json:"block_size"` // the largest block in format 2
	NumBatches int      `json:"num_batches"`
	BatchSize  int      `json:"batch_size"`
	// Slabs gives each tensor's slab inside a block (Offset relative to the
	// block start), named after the tensor, in table order; for a jagged
	// tensor, its offsets slab (its values follow the fixed part, at a
	// place that differs per batch: Reader.Jagged).
	Slabs []Region `json:"slabs"`

	blocks func(k int) (off, size uint64) // where block k is
}

// Block returns the file region of batch k's block ("block k"). It does not
// check k.
func (l Layout) Block(k int) Region {
	if l.blocks != nil {
		off, size := l.blocks(k)
		return Region{Name: "block", Offset: off, Size: size}
	}
	return Region{Name: "block", Offset: l.DataOffset + uint64(k)*l.BlockSize, Size: l.BlockSize}
}

// Layout returns the shard's layout.
func (r *Reader) Layout() Layout {
	h := &r.h
	metaEnd := h.metaOff + h.metaLen
	l := Layout{
		Major: int(h.major), Minor: int(h.minor),
		FileSize: h.fileLen,
		Regions: []Region{
			{"header", 0, uint64(h.headerLen)},
			{"tensor table", h.ttOff, h.ttLen},
			{"metadata", h.metaOff, h.metaLen},
			{"padding", metaEnd, h.dataOff - metaEnd},
			{"data", h.dataOff, h.btOff - h.dataOff},
			{"batch table", h.btOff, h.btLen},
			{"sample ids", h.idsOff, h.idsLen},
			{"footer", h.footerOff, FooterLen},
		},
		DataOffset: h.dataOff,
		BlockSize:  h.blockSize,
		NumBatches: int(h.numBatches),
		BatchSize:  int(h.batchSize),
		blocks:     r.block,
	}
	if h.major >= JaggedMajorVersion {
		// Format 2: the sample ids come before the data.
		idsEnd := h.idsOff + h.idsLen
		l.Regions = []Region{
			{"header", 0, uint64(h.headerLen)},
			{"tensor table", h.ttOff, h.ttLen},
			{"metadata", h.metaOff, h.metaLen},
			{"sample ids", h.idsOff, h.idsLen},
			{"padding", idsEnd, h.dataOff - idsEnd},
			{"data", h.dataOff, h.btOff - h.dataOff},
			{"batch table", h.btOff, h.btLen},
			{"footer", h.footerOff, FooterLen},
		}
	}
	for i, t := range r.tensors {
		l.Slabs = append(l.Slabs, Region{t.Name, r.geo.SlabOffset[i], r.geo.SlabSize[i]})
	}
	return l
}
