// Package pages extracts the raw compressed page payloads of a Parquet file
// by walking each column chunk's page headers (thrift compact protocol), so
// the benchmark can time decompression of exactly the file's bytes.
package pages

import (
	"bytes"
	"fmt"
	"os"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// Page is one compressed region of a page: for V1 data pages and dictionary
// pages the whole payload, for V2 data pages the values after the levels.
type Page struct {
	Codec        format.CompressionCodec
	Compressed   []byte
	Uncompressed int // size after decompression
}

// Info summarizes a file's footer.
type Info struct {
	Rows              int64
	RowGroups         int
	CompressedBytes   int64 // sum of column chunk total_compressed_size
	UncompressedBytes int64 // sum of column chunk total_uncompressed_size
	Columns           []string
}

// Stat reads the footer of path.
func Stat(path string) (Info, error) {
	f, err := os.Open(path)
	if err != nil {
		return Info{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Info{}, err
	}
	pf, err := parquet.OpenFile(f, st.Size(), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return Info{}, fmt.Errorf("opening %s: %w", path, err)
	}
	md := pf.Metadata()
	in := Info{Rows: md.NumRows, RowGroups: len(md.RowGroups)}
	for i, rg := range md.RowGroups {
		for _, cc := range rg.Columns {
			in.CompressedBytes += cc.MetaData.TotalCompressedSize
			in.UncompressedBytes += cc.MetaData.TotalUncompressedSize
			if i == 0 {
				in.Columns = append(in.Columns, fmt.Sprintf("%v %v %v", cc.MetaData.PathInSchema, cc.MetaData.Encoding, cc.MetaData.Codec))
			}
		}
	}
	return in, nil
}

// Read returns every compressed page region of every column chunk of path,
// in file order.
func Read(path string) ([]Page, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	var out []Page
	var proto thrift.CompactProtocol
	for g, rg := range pf.Metadata().RowGroups {
		for c, cc := range rg.Columns {
			md := cc.MetaData
			start := md.DataPageOffset
			if md.DictionaryPageOffset > 0 && md.DictionaryPageOffset < start {
				start = md.DictionaryPageOffset
			}
			end := start + md.TotalCompressedSize
			if start < 0 || end > int64(len(data)) {
				return nil, fmt.Errorf("%s: row group %d, column %d: chunk [%d, %d) outside the file", path, g, c, start, end)
			}
			chunk := data[start:end]
			for len(chunk) > 0 {
				r := bytes.NewReader(chunk)
				var h format.PageHeader
				if err := thrift.NewDecoder(proto.NewReader(r)).Decode(&h); err != nil {
					return nil, fmt.Errorf("%s: row group %d, column %d: page header: %w", path, g, c, err)
				}
				hdr := len(chunk) - r.Len()
				n := int(h.CompressedPageSize)
				if n < 0 || hdr+n > len(chunk) {
					return nil, fmt.Errorf("%s: row group %d, column %d: page of %d bytes overruns the chunk", path, g, c, n)
				}
				payload := chunk[hdr : hdr+n]
				unc := int(h.UncompressedPageSize)
				if h.Type == format.DataPageV2 {
					v2 := h.DataPageHeaderV2.V
					lv := int(v2.RepetitionLevelsByteLength + v2.DefinitionLevelsByteLength)
					if lv > len(payload) || lv > unc {
						return nil, fmt.Errorf("%s: row group %d, column %d: level bytes overrun the page", path, g, c)
					}
					payload = payload[lv:]
					unc -= lv
					if c, ok := v2.IsCompressed.Get(); ok && !c {
						chunk = chunk[hdr+n:]
						continue
					}
				}
				out = append(out, Page{Codec: md.Codec, Compressed: payload, Uncompressed: unc})
				chunk = chunk[hdr+n:]
			}
		}
	}
	return out, nil
}
