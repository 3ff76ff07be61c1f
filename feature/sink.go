package feature

// The stage-1 sink: where decode workers hand the records they assemble.

// RecordSink is one decode worker's way into a stage: stage 1 assembles
// each block of records where block says, then hands it over with put.
type RecordSink interface {
	// inPlace reports whether records are assembled straight into the
	// staging records (records().data), so that a record may be written a
	// column at a time (in memory); otherwise every block of records is
	// built whole in scratch and then handed over (spilled).
	InPlace() bool
	// block returns the records to assemble a block of slots staging
	// slots into, from slot base on, with blk's runs (slots relative to
	// base) made relative to them, and scratch (grown if the block is
	// built in it) for reuse.
	Block(blk []RowRun, base int64, slots int, scratch []byte) (*Records, []byte)
	// put hands over an assembled block: blk's rows of a row group whose
	// first sample id is start, their records in r.
	Put(start uint64, blk []RowRun, r *Records) error
	// flush hands over whatever the sink still buffers; a decode worker
	// calls it once at the end of a stage 1 that was not cancelled.
	Flush() error
}

// memSink assembles records in place in the staging records: a block's
// records are stored as they are built, and nothing is left to hand over.
type memSink struct{ recs *Records }

func (s memSink) InPlace() bool { return true }

func (s memSink) Block(blk []RowRun, base int64, _ int, scratch []byte) (*Records, []byte) {
	for i := range blk {
		blk[i].Dst += base
	}
	return s.recs, scratch
}

func (s memSink) Put(uint64, []RowRun, *Records) error { return nil }
func (s memSink) Flush() error                         { return nil }

// NewMemSink returns the RecordSink of records held in memory (recs.Data,
// every slot of the set decoded): a block's records are assembled in place
// at their slots, and nothing is left to hand over.
func NewMemSink(recs *Records) RecordSink { return memSink{recs} }
