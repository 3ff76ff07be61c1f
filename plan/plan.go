package plan

// SourceFile is one input file of a plan's source, in the order sample ids
// are assigned (sorted by relative path, byte-wise).
type SourceFile struct {
	Path         string  `json:"path"` // relative to Source.Root, '/'-separated
	Size         int64   `json:"size"`
	FooterSHA256 string  `json:"footer_sha256"` // hex sha256 of the footer bytes (thrift FileMetaData + length + "PAR1")
	RowGroups    []int64 `json:"row_groups"`    // rows per row group, in file order (zero-row groups kept)
}

// Source is the ordered list of input files. Sample id = global row index in
// this order.
type Source struct {
	Root  string       `json:"root"` // absolute directory the relative paths are resolved against; not fingerprinted
	Files []SourceFile `json:"files"`
}

// Shuffle modes and remainder policies.
type Shuffle string
type Remainder string

const (
	ShuffleNone        Shuffle   = "none"
	ShuffleGlobal      Shuffle   = "global"
	ShuffleBlocks      Shuffle   = "blocks"
	ShufflePartitioned Shuffle   = "partitioned"
	RemainderDrop      Remainder = "drop"
	RemainderPad       Remainder = "pad"
	RemainderPartial   Remainder = "partial"
)

// Config holds the plan inputs other than the source.
type Config struct {
	Seed        uint64    `json:"seed"`
	Epochs      int       `json:"epochs"`
	GlobalBatch int       `json:"global_batch"`
	WorldSize   int       `json:"world_size"`
	Workers     int       `json:"workers"`
	Shuffle     Shuffle   `json:"shuffle"`
	Window      int       `json:"window,omitempty"`
	Remainder   Remainder `json:"remainder"`
}

// Plan is a loaded or newly made plan. STUB.
type Plan struct {
	Source      Source `json:"source"`
	Config      Config `json:"config"`
	Fingerprint string `json:"fingerprint"`
}

// New validates cfg and derives a plan over src.
func New(src Source, cfg Config) (*Plan, error) { panic("unimplemented") }

// Load reads and validates a plan file.
func Load(path string) (*Plan, error) { panic("unimplemented") }

// Save writes the plan file atomically.
func (p *Plan) Save(path string) error { panic("unimplemented") }

// NumSamples returns N, the total number of source rows.
func (p *Plan) NumSamples() uint64 { panic("unimplemented") }

// BatchSize returns b = G / R, samples per rank batch.
func (p *Plan) BatchSize() int { panic("unimplemented") }

// Steps returns the number of steps every rank takes in every epoch.
func (p *Plan) Steps() int { panic("unimplemented") }

// RankBatch returns the sample ids of rank r's batch at step k of epoch e,
// appended to dst[:0]. The last pads ids are pad samples. len(ids) may be < b
// (remainder "partial") or 0.
func (p *Plan) RankBatch(epoch, rank, step int, dst []uint64) (ids []uint64, pads int, err error) {
	panic("unimplemented")
}

// Locate maps a global sample id to (file index, row group, row within group).
func (s *Source) Locate(id uint64) (file, rowGroup int, row int64, err error) { panic("unimplemented") }

// Fingerprint returns the source fingerprint ("sha256:<hex>").
func (s *Source) Fingerprint() string { panic("unimplemented") }
