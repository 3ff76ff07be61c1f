package shardfmt

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/prepml/prep/internal/atomicfile"
)

// ManifestName is the file name of a shard set's manifest.
const ManifestName = "manifest.json"

// ManifestFormat identifies the manifest schema in Manifest.Format.
const ManifestFormat = "prep-manifest/v1"

// ShardEntry is one committed shard in a manifest.
type ShardEntry struct {
	Path    string `json:"path"` // relative to the shard set directory, slash-separated (ShardFileName)
	Epoch   int    `json:"epoch"`
	Rank    int    `json:"rank"`
	Batches int    `json:"batches"`
	Size    int64  `json:"size"`   // file length in bytes
	Digest  string `json:"digest"` // "sha256:<hex>", see FileDigest
}

// Manifest describes a shard set (one directory). It holds no timestamps or
// host names, so identical inputs give a byte-identical manifest.
type Manifest struct {
	Format            string       `json:"format"` // ManifestFormat
	ToolVersion       string       `json:"tool_version"`
	ShardFormat       string       `json:"shard_format,omitempty"` // "major.minor" of the shard files, e.g. "1.0"
	PlanFingerprint   string       `json:"plan_fingerprint"`
	SourceFingerprint string       `json:"source_fingerprint"`
	SpecHash          string       `json:"spec_hash"`
	Spec              any          `json:"spec"`
	BatchSize         int          `json:"batch_size,omitempty"` // per-rank batch size b
	Tensors           []TensorInfo `json:"tensors"`
	Shards            []ShardEntry `json:"shards"` // sorted by (epoch, rank)
	// EmptyFiles lists the source files (relative paths, as in the plan)
	// that hold zero rows: they are part of the source fingerprint but
	// contribute no samples. Omitted when there are none.
	EmptyFiles []EmptyFile `json:"empty_files,omitempty"`
	// Dropped lists, per epoch of the plan, the sample ids that remainder
	// "drop" leaves out of that epoch, in the epoch's order. Omitted when
	// the plan drops nothing.
	Dropped []DroppedIDs `json:"dropped,omitempty"`
}

// EmptyFile is a source file with no rows, recorded in the manifest.
type EmptyFile struct {
	Path string `json:"path"` // relative to the source root, slash-separated
	Rows int64  `json:"rows"` // always 0
}

// DroppedIDs is one epoch's dropped sample ids (global row indices in
// source order), recorded in the manifest.
type DroppedIDs struct {
	Epoch int      `json:"epoch"`
	IDs   []uint64 `json:"ids"`
}

// ShardFileName returns the canonical shard path for (epoch, rank) relative
// to the shard set directory, slash-separated:
// "epoch-00003/rank-00012.shard". Numbers are zero-padded to 5 digits so names
// sort in numeric order up to 99999 (wider numbers print in full).
func ShardFileName(epoch, rank int) string {
	return fmt.Sprintf("epoch-%05d/rank-%05d.shard", epoch, rank)
}

// ErrManifest is returned (wrapped, with the manifest path and the entry
// concerned) by ReadManifest and Manifest.Check when a manifest's shard list
// cannot be trusted to name files inside the shard set: a path other than
// ShardFileName(epoch, rank) (absolute, "..", unclean or merely renamed), a
// negative epoch, rank, batch count or size, or two entries with the same
// path or the same (epoch, rank).
var ErrManifest = errors.New("invalid manifest")

// Check validates the shard list so that callers may join each entry's Path
// to the shard set directory and open, replace or delete the file without
// leaving that directory: every Path must equal ShardFileName(Epoch, Rank)
// (FORMAT.md §Shard set), Epoch, Rank, Batches and Size must not be
// negative, and no path or (epoch, rank) may appear twice. The error wraps
// ErrManifest and names the entry by its index.
func (m *Manifest) Check() error {
	paths := make(map[string]int, len(m.Shards))
	pairs := make(map[[2]int]int, len(m.Shards))
	for i, s := range m.Shards {
		switch {
		case s.Epoch < 0 || s.Rank < 0 || s.Batches < 0 || s.Size < 0:
			return fmt.Errorf("%w: shard %d (%q): negative epoch, rank, batch count or size", ErrManifest, i, s.Path)
		case s.Path != ShardFileName(s.Epoch, s.Rank):
			return fmt.Errorf("%w: shard %d: path %q is not %q, the name of epoch %d rank %d", ErrManifest, i, s.Path, ShardFileName(s.Epoch, s.Rank), s.Epoch, s.Rank)
		}
		if j, dup := paths[s.Path]; dup {
			return fmt.Errorf("%w: shards %d and %d both have path %q", ErrManifest, j, i, s.Path)
		}
		paths[s.Path] = i
		k := [2]int{s.Epoch, s.Rank}
		if j, dup := pairs[k]; dup {
			return fmt.Errorf("%w: shards %d and %d are both epoch %d rank %d", ErrManifest, j, i, s.Epoch, s.Rank)
		}
		pairs[k] = i
	}
	return nil
}

// ReadManifest reads and decodes dir/manifest.json and checks it with
// Manifest.Check, so every entry's Path names a file inside dir. It fails
// if the format field is not ManifestFormat (wrapping ErrManifest) or the
// shard list is invalid (wrapping ErrManifest); a missing file gives an
// error wrapping fs.ErrNotExist. Unknown fields are ignored. It reads the
// path as given, following symbolic links: tools working on a shard set read
// it through shardset.Set, which follows none inside the set.
func ReadManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return nil, fmt.Errorf("reading manifest: %w", err)
	}
	return ParseManifest(b, dir)
}

// ParseManifest is ReadManifest for the bytes of dir/manifest.json already
// read (dir only names the file in errors), so a caller that keeps the bytes
// (convert, to restore them on failure) reads the file once.
func ParseManifest(data []byte, dir string) (*Manifest, error) {
	m, err := parseManifest(data, filepath.Join(dir, ManifestName))
	if err != nil {
		return nil, err
	}
	if err := m.Check(); err != nil {
		return nil, fmt.Errorf("decoding manifest %s: %w", filepath.Join(dir, ManifestName), err)
	}
	return m, nil
}

// ReadManifestUnchecked is ReadManifest without Manifest.Check: it only
// decodes and checks the format field. It is for checkers that report each
// problem of the shard list themselves (prep verify); anything that opens,
// replaces or deletes the listed files must use ReadManifest (through
// shardset.Set, so that no link inside the set is followed).
func ReadManifestUnchecked(dir string) (*Manifest, error) {
	p := filepath.Join(dir, ManifestName)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("reading manifest: %w", err)
	}
	return parseManifest(b, p)
}

// ParseManifestUnchecked is ReadManifestUnchecked for bytes already read;
// path only names the file in errors.
func ParseManifestUnchecked(data []byte, path string) (*Manifest, error) {
	return parseManifest(data, path)
}

// parseManifest decodes a manifest (read from path) and checks its format
// field. Numbers inside the feature spec (Manifest.Spec) are kept as their text
// (json.Number), so an integer such as bytes.buckets up to 2^63-1 is
// encoded again exactly, not rounded through float64.
func parseManifest(b []byte, path string) (*Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("decoding manifest %s: %w", path, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("decoding manifest %s: data after the JSON object", path)
	}
	if m.Format != ManifestFormat {
		return nil, fmt.Errorf("decoding manifest %s: format %q, want %q: %w", path, m.Format, ManifestFormat, ErrManifest)
	}
	return &m, nil
}

// WriteManifest writes dir/manifest.json atomically (temporary file, fsync,
// rename, fsync of dir). It sets an empty Format to ManifestFormat and sorts
// m.Shards by (epoch, rank) in place; the output is indented JSON ending in a
// newline, deterministic for equal inputs.
func WriteManifest(dir string, m *Manifest) error {
	b, err := m.Encode()
	if err != nil {
		return err
	}
	return WriteManifestBytes(dir, b)
}

// Encode returns the bytes WriteManifest writes for m: it sets an empty
// Format to ManifestFormat and sorts m.Shards by (epoch, rank) in place, then
// encodes indented JSON ending in a newline, deterministic for equal inputs.
// It lets a caller snapshot the manifest under its own lock and write it
// (WriteManifestBytes) outside.
func (m *Manifest) Encode() ([]byte, error) {
	if m.Format == "" {
		m.Format = ManifestFormat
	}
	slices.SortStableFunc(m.Shards, func(a, b ShardEntry) int {
		return cmp.Or(cmp.Compare(a.Epoch, b.Epoch), cmp.Compare(a.Rank, b.Rank))
	})
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("encoding manifest: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteManifestBytes writes b (from Manifest.Encode) to dir/manifest.json
// atomically, as WriteManifest does. An error of the final directory fsync
// wraps ErrNotDurable: the new manifest is then in place.
func WriteManifestBytes(dir string, b []byte) error {
	if err := atomicfile.WriteFile(filepath.Join(dir, ManifestName), b, 0o644); err != nil {
		return fmt.Errorf("writing manifest: %w", err)
	}
	return nil
}

// FileDigest opens and validates the shard at path and returns its digest
// (see Reader.Digest): "sha256:<hex>" of every byte except the batch blocks,
// which the digest covers through their CRC-32Cs in the batch table. It reads
// the header, tables and sample ids, not the block data.
func FileDigest(path string) (string, error) {
	r, err := Open(path)
	if err != nil {
		return "", err
	}
	defer r.Close()
	return r.Digest()
}
