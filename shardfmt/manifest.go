package shardfmt

// ManifestName is the file name of a shard set's manifest.
const ManifestName = "manifest.json"

// ShardEntry is one committed shard in a manifest.
type ShardEntry struct {
	Path    string `json:"path"` // relative to the shard set directory
	Epoch   int    `json:"epoch"`
	Rank    int    `json:"rank"`
	Batches int    `json:"batches"`
	Size    int64  `json:"size"`
	Digest  string `json:"digest"` // "sha256:<hex>"
}

// Manifest describes a shard set. STUB.
type Manifest struct {
	Format            string       `json:"format"` // "prep-manifest/v1"
	ToolVersion       string       `json:"tool_version"`
	PlanFingerprint   string       `json:"plan_fingerprint"`
	SourceFingerprint string       `json:"source_fingerprint"`
	SpecHash          string       `json:"spec_hash"`
	Spec              any          `json:"spec"`
	Tensors           []TensorInfo `json:"tensors"`
	Shards            []ShardEntry `json:"shards"`
}

// ShardFileName returns the canonical shard file name for (epoch, rank).
func ShardFileName(epoch, rank int) string { panic("unimplemented") }

// ReadManifest reads dir/manifest.json.
func ReadManifest(dir string) (*Manifest, error) { panic("unimplemented") }

// WriteManifest writes dir/manifest.json atomically.
func WriteManifest(dir string, m *Manifest) error { panic("unimplemented") }

// FileDigest returns the shard digest of a shard file ("sha256:<hex>").
func FileDigest(path string) (string, error) { panic("unimplemented") }
