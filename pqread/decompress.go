package pqread

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/format"
	"github.com/pierrec/lz4/v4"
)

var (
	zstdPool   sync.Pool // *zstd.Decoder
	gzipPool   sync.Pool // *gzip.Reader
	brotliPool sync.Pool // *brotli.Reader
)

// decompress returns the size-byte decompressed form of src. The output is
// written into *buf (grown as needed) except for UNCOMPRESSED, which returns
// src itself. Every codec decodes into exactly size bytes, and a stream that
// is shorter or longer than size is corrupt: a header cannot make a codec
// allocate more than it declares, and no codec output is trusted without its
// length being checked. Errors wrap ErrCorrupt or ErrUnsupported.
func decompress(codec format.CompressionCodec, buf *[]byte, src []byte, size int) ([]byte, error) {
	if codec == format.Uncompressed {
		if len(src) != size {
			return nil, corruptf("uncompressed page holds %d bytes, header says %d", len(src), size)
		}
		return src, nil
	}
	if cap(*buf) < size {
		*buf = make([]byte, size)
	}
	out := (*buf)[:size]
	if size == 0 && len(src) == 0 {
		return out, nil
	}
	var err error
	switch codec {
	case format.Snappy:
		err = decodeSnappy(out, src)
	case format.Gzip:
		err = decodeGzip(out, src)
	case format.Zstd:
		err = decodeZstd(out, src)
	case format.Brotli:
		err = decodeBrotli(out, src)
	case format.Lz4Raw:
		err = decodeLZ4Raw(out, src)
	case format.Lz4:
		err = decodeLZ4Hadoop(out, src)
	default:
		return nil, unsupportedf("unsupported compression codec %s", codec)
	}
	if err != nil {
		return nil, corruptf("%s: %v", codec, err)
	}
	return out, nil
}

func decodeSnappy(out, src []byte) error {
	n, err := snappy.DecodedLen(src)
	if err != nil {
		return err
	}
	if n != len(out) {
		return fmt.Errorf("decodes to %d bytes, header says %d", n, len(out))
	}
	got, err := snappy.Decode(out, src)
	if err != nil {
		return err
	}
	if len(got) != len(out) || (len(got) > 0 && &got[0] != &out[0]) {
		return fmt.Errorf("decoded %d bytes, header says %d", len(got), len(out))
	}
	return nil
}

// readExact fills out from r and checks that r then ends.
func readExact(r io.Reader, out []byte) error {
	if _, err := io.ReadFull(r, out); err != nil {
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			return fmt.Errorf("stream shorter than the %d bytes the header says", len(out))
		}
		return err
	}
	var one [1]byte
	n, err := r.Read(one[:])
	for n == 0 && err == nil {
		n, err = r.Read(one[:])
	}
	if n > 0 {
		return fmt.Errorf("stream longer than the %d bytes the header says", len(out))
	}
	if err != io.EOF {
		return err
	}
	return nil
}

func decodeGzip(out, src []byte) error {
	zr, _ := gzipPool.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(bytes.NewReader(src))
	} else {
		err = zr.Reset(bytes.NewReader(src))
	}
	if err != nil {
		return err
	}
	defer gzipPool.Put(zr)
	return readExact(zr, out)
}

// decodeZstd decodes src into exactly len(out) bytes with DecodeAll into
// out's own memory: the decoder's history is out itself, so a page costs
// its output and no window-sized history buffer beside it (a streaming
// Reader keeps one of up to the frame's window, as large as the page),
// and WithDecodeAllCapLimit keeps a stream that decodes to more than
// len(out) from growing it: it fails instead.
func decodeZstd(out, src []byte) error {
	zr, _ := zstdPool.Get().(*zstd.Decoder)
	if zr == nil {
		var err error
		zr, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(1<<28), zstd.WithDecodeAllCapLimit(true))
		if err != nil {
			return err
		}
	}
	defer zstdPool.Put(zr)
	got, err := zr.DecodeAll(src, out[:0:len(out)])
	if err != nil {
		return err
	}
	if len(got) != len(out) {
		return fmt.Errorf("decoded %d bytes, want %d", len(got), len(out))
	}
	return nil
}

func decodeBrotli(out, src []byte) error {
	br, _ := brotliPool.Get().(*brotli.Reader)
	if br == nil {
		br = brotli.NewReader(bytes.NewReader(src))
	} else if err := br.Reset(bytes.NewReader(src)); err != nil {
		return err
	}
	defer brotliPool.Put(br)
	return readExact(br, out)
}

// decodeLZ4Raw decodes one LZ4 block into exactly len(out) bytes. This is
// the workaround for parquet-go v0.32.0 issue #608 (its LZ4_RAW codec can
// return output that the page reader then discards): the block API writes
// into our buffer of the exact size and the decoded length is checked.
func decodeLZ4Raw(out, src []byte) error {
	n, err := lz4.UncompressBlock(src, out)
	if err != nil {
		return err
	}
	if n != len(out) {
		return fmt.Errorf("block decodes to %d bytes, header says %d", n, len(out))
	}
	return nil
}

// decodeLZ4Hadoop decodes the deprecated LZ4 codec. Writers used two forms:
// Hadoop's framing (repeated <uncompressed size BE32> <compressed size BE32>
// <LZ4 block>) and a bare LZ4 block; like Arrow, try the framing first and
// fall back to a bare block.
func decodeLZ4Hadoop(out, src []byte) error {
	if hadoopLZ4(out, src) {
		return nil
	}
	if err := decodeLZ4Raw(out, src); err != nil {
		return fmt.Errorf("neither Hadoop-framed nor raw LZ4: %v", err)
	}
	return nil
}

func hadoopLZ4(out, src []byte) bool {
	o := 0
	for len(src) > 0 {
		if len(src) < 8 {
			return false
		}
		ul := int(binary.BigEndian.Uint32(src))
		cl := int(binary.BigEndian.Uint32(src[4:]))
		src = src[8:]
		if cl > len(src) || ul > len(out)-o || ul < 0 || cl < 0 {
			return false
		}
		n, err := lz4.UncompressBlock(src[:cl], out[o:o+ul])
		if err != nil || n != ul {
			return false
		}
		o += ul
		src = src[cl:]
	}
	return o == len(out)
}
