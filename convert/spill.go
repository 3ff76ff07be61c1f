package convert

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/internal/pool"
	"github.com/prepml/prep/internal/sysmem"
	"github.com/prepml/prep/plan"
)

// Spilled staging: the path for runs whose staging records do not fit
// Options.MemoryLimit. Memory stays bounded by the limit whatever the input
// size, at the cost of writing every record to disk once and reading it back
// once (an external bucket shuffle, as in the two-pass shuffles of MapReduce
// and Spark's sort-based shuffle):
//
//   - The requested ranks of each requested epoch are cut into groups of as
//     many ranks as stage 2 writes shards at once (shardWriters), and each
//     group's output into windows of consecutive steps, every rank of the
//     group in each, so that a window's records fit the memory limit. Each
//     window owns one region of the spill file, sized exactly in advance
//     from the plan (countRecords).
//   - Stage 1 decodes and assembles records as usual, then routes each
//     record, for every slot of a requested shard that holds it
//     (plan.Occurrences), to that slot's window: an 8-byte little-endian header (the record's slot in the
//     window, see spillWindow) followed by the record, appended to the
//     decode worker's buffer for that window and written with one pwrite
//     when full. Appends claim space with an atomic add, so their order
//     inside a region varies from run to run while the slots they carry do
//     not.
//   - Stage 2 takes the windows in order: it reads a region back in chunks,
//     puts each record at the slot its header names, then writes the
//     window's batches to the group's shards with the same gather as the
//     in-memory path, and commits the group's shards after its last window.
//
// Pad slots (remainder pad) repeat samples from the start of a lane, in
// another window and, in a partitioned plan whose partitions differ in
// length, possibly many times (most of a short partition's slots can be
// pads). Each occurrence of a sample (plan.Occurrences) is routed to its
// window like any record, so memory stays bounded by the limit whatever the
// plan.

// spillGroup is one group of requested ranks of one requested epoch of a
// spilled run: at most shardWriters(Jobs) ranks, whose shards stage 2 keeps open
// together from the group's first window to its last.
type spillGroup struct {
	epoch int
	ranks []int // requested ranks of the group, ascending
	sw    int   // steps per window
	first int   // index of the group's first window in spiller.windows
}

// spillRoute maps the ranks of one requested epoch to their groups.
type spillRoute struct {
	epoch int
	group []int32 // per plan rank: index in spiller.groups, or -1 when not requested
	local []int32 // per plan rank: index in that group's ranks
}

// spillWindow is steps [s0, s1) of every rank of one group. The
// record of rank ranks[u], step s, batch slot i sits at window slot
// (u*(s1-s0) + s-s0)*b + i.
type spillWindow struct {
	group  int   // index into spiller.groups
	s0, s1 int   // steps
	count  int64 // records routed to the window, one per sample slot (pads included)
	base   int64 // byte offset of the window's region in the spill file
	fill   atomic.Int64
}

// spiller holds a spilled run's windows and spill file.
type spiller struct {
	p       *plan.Plan
	b       int // batch size
	rec     int // record bytes
	ent     int // entry bytes: 8-byte header + record
	file    *os.File
	groups  []spillGroup
	routes  []spillRoute // one per requested epoch, ascending
	windows []*spillWindow
	bufCap  int              // bytes per route buffer
	dir     string           // the run's temporary directory, holding the spill file
	layout  *feature.Records // the record layout (no data)
	jobs    int              // goroutines reading a window back, and shards written at once
	win     *staging         // stage 2's window buffer in anonymous memory (phases), nil before
}

// spillChunk is the read size of stage 2 (rounded down to whole entries).
const spillChunk = 4 << 20

// spillBufMax is the largest route buffer of one decode worker for one
// window.
const spillBufMax = 256 << 10

// newSpiller plans the windows of todo for records of rec bytes under a
// memory limit of limit bytes and counts each window's records. Each
// epoch's ranks are cut into groups of at most group ranks (stage 2 has a
// group's shards open at once). The spill file is made by create.
func newSpiller(ctx context.Context, p *plan.Plan, todo []shardKey, rec int, limit int64, jobs, group int) (*spiller, error) {
	s := &spiller{p: p, b: p.BatchSize(), rec: rec, ent: 8 + rec}
	byEpoch := map[int][]int{}
	var order []int
	for _, k := range todo {
		if byEpoch[k.epoch] == nil {
			order = append(order, k.epoch)
		}
		byEpoch[k.epoch] = append(byEpoch[k.epoch], k.rank)
	}
	slices.Sort(order)
	steps := p.Steps()
	group = max(1, group)
	for _, e := range order {
		ranks := slices.Clone(byEpoch[e])
		slices.Sort(ranks)
		rt := spillRoute{epoch: e, group: make([]int32, p.Config.WorldSize), local: make([]int32, p.Config.WorldSize)}
		for i := range rt.group {
			rt.group[i] = -1
		}
		for g0 := 0; g0 < len(ranks); g0 += group {
			grp := spillGroup{epoch: e, ranks: ranks[g0:min(len(ranks), g0+group)], first: len(s.windows)}
			for u, k := range grp.ranks {
				rt.group[k], rt.local[k] = int32(len(s.groups)), int32(u)
			}
			perStep := int64(len(grp.ranks)) * int64(s.b) * int64(rec)
			grp.sw = int(max(1, min(int64(steps), limit/max(1, perStep))))
			for s0 := 0; s0 < steps; s0 += grp.sw {
				s.windows = append(s.windows, &spillWindow{group: len(s.groups), s0: s0, s1: min(steps, s0+grp.sw)})
			}
			s.groups = append(s.groups, grp)
		}
		s.routes = append(s.routes, rt)
	}
	if err := s.countRecords(ctx); err != nil {
		return nil, err
	}
	var total int64
	for _, w := range s.windows {
		w.base = total
		total += w.count * int64(s.ent)
	}
	per := limit / int64(4*max(1, jobs)*max(1, len(s.windows)))
	s.bufCap = int(max(int64(s.ent), min(spillBufMax, per)/int64(s.ent)*int64(s.ent)))
	return s, nil
}

// open makes the spill file under dir with every block reserved (see
// reserveSpace): a full disk fails here, with ErrNoSpace, not midway.
func (s *spiller) open(dir string) error {
	s.dir = dir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating spill file: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, SpillFileName), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("creating spill file: %w", err)
	}
	s.file = f
	if total := s.spillBytes(); total > 0 {
		if err := sysmem.Reserve(f, total); err != nil {
			s.close()
			return err
		}
	}
	return nil
}

// SpillFileName is the spill file inside a run's temporary directory
// (OUT/.prep-tmp/<pid>/), present while a run whose staging exceeds the
// memory limit is in progress.
const SpillFileName = "spill.bin"

// spillBytes returns the size of the spill file.
func (s *spiller) spillBytes() int64 {
	if len(s.windows) == 0 {
		return 0
	}
	w := s.windows[len(s.windows)-1]
	return w.base + w.count*int64(s.ent)
}

// close closes the spill file and removes the run's temporary directory.
func (s *spiller) close() {
	if s.win != nil {
		s.win.remove()
		s.win = nil
	}
	if s.file != nil {
		s.file.Close()
		s.file = nil
	}
	if s.dir != "" {
		sysmem.RemoveTemp(s.dir)
		s.dir = ""
	}
}

func (s *spiller) records() *feature.Records { return s.layout }
func (s *spiller) sink() feature.RecordSink  { return &spillSink{s: s, rb: s.newRouteBuffers()} }
func (s *spiller) diskBytes() int64          { return s.spillBytes() }
func (s *spiller) memBytes() int64           { return int64(s.windowSlots()) * int64(s.rec) }

// windowSlots is the most record slots of one output window: stage 2's
// window buffer holds that many records.
func (s *spiller) windowSlots() int {
	slots := 0
	for _, w := range s.windows {
		slots = max(slots, len(s.groups[w.group].ranks)*(w.s1-w.s0)*s.b)
	}
	return slots
}
func (s *spiller) spillWindows() int { return len(s.windows) }
func (s *spiller) finish() error     { return s.checkFull() }

// phases is one phase per window, in order: the window's records are read
// back (load) into one window buffer and its steps written to its group's
// shards, Jobs shards at once; a group's shards are committed in its last
// window.
func (s *spiller) phases() []phase {
	rec := s.rec
	// The window buffer is anonymous memory, outside the Go heap, like
	// staging in memory (memBytes counts it against the memory limit).
	win := make([]byte, 0)
	if w := s.memBytes(); w > 0 {
		if s.win = newStaging(w); s.win != nil {
			win = s.win.data
		} else {
			win = make([]byte, w)
		}
	}
	var out []phase
	for gi := range s.groups {
		grp := &s.groups[gi]
		keys := make([]shardKey, len(grp.ranks))
		for u, k := range grp.ranks {
			keys[u] = shardKey{grp.epoch, k}
		}
		for wi := grp.first; wi < len(s.windows) && s.windows[wi].group == gi; wi++ {
			w := s.windows[wi]
			last := wi+1 == len(s.windows) || s.windows[wi+1].group != gi
			out = append(out, phase{keys: keys, s0: w.s0, s1: w.s1, par: s.jobs, commit: last,
				load: func(ctx context.Context) error { return s.load(ctx, wi, win, s.jobs) },
				filler: func(u int, o *shardOut) fillFunc {
					ga := newGatherer(s.layout, nil, o)
					var src []int
					return func(step int, block []byte, ids []uint64, _ int) error {
						src = src[:0]
						first := (u*(w.s1-w.s0) + step - w.s0) * s.b
						for i := range ids { // pads too: routed like every record
							src = append(src, (first+i)*rec)
						}
						return ga.gatherAt(win, block, src)
					}
				}})
		}
	}
	return out
}

// countRecords sets each window's record count: every slot of its batches
// holding a sample, pads included. Only a rank's last batches can be short
// (a batch covers consecutive positions of its lane), so each rank's steps
// are read from the last one back until a full batch.
func (s *spiller) countRecords(ctx context.Context) error {
	steps := s.p.Steps()
	var ids []uint64
	var err error
	for gi := range s.groups {
		grp := &s.groups[gi]
		full := make([]int, len(grp.ranks)) // per rank: steps before this are full
		for u, k := range grp.ranks {
			if err := ctx.Err(); err != nil {
				return err
			}
			for step := steps - 1; step >= 0; step-- {
				ids, _, err = s.p.RankBatch(grp.epoch, k, step, ids)
				if err != nil {
					return err
				}
				if len(ids) == s.b {
					full[u] = step + 1
					break
				}
				s.windows[grp.first+step/grp.sw].count += int64(len(ids))
			}
		}
		for wi := grp.first; wi < len(s.windows) && s.windows[wi].group == gi; wi++ {
			w := s.windows[wi]
			for _, f := range full {
				w.count += int64(max(0, min(f, w.s1)-w.s0)) * int64(s.b)
			}
		}
	}
	return nil
}

// spillSink is one decode worker's sink into a spilled stage: each block
// of records is built whole in the worker's scratch, then routed to the
// windows of its samples' occurrences through the worker's append buffers.
type spillSink struct {
	s  *spiller
	rb *routeBuffers
}

func (k *spillSink) InPlace() bool { return false }

func (k *spillSink) Block(_ []feature.RowRun, _ int64, slots int, scratch []byte) (*feature.Records, []byte) {
	l := k.s.layout
	if len(scratch) < slots*l.Rec {
		scratch = make([]byte, feature.BlockRows(l.Rec)*l.Rec)
	}
	return &feature.Records{Data: scratch[:slots*l.Rec], Rec: l.Rec, Off: l.Off, Size: l.Size}, scratch
}

func (k *spillSink) Put(start uint64, blk []feature.RowRun, r *feature.Records) error {
	return k.s.route(k.rb, start, blk, r.Data)
}

func (k *spillSink) Flush() error { return k.s.flushAll(k.rb) }

// routeBuffers is one decode worker's append buffers, one per window, and
// one scratch entry for records too large to buffer (see add).
type routeBuffers struct {
	bufs [][]byte
	one  []byte
}

func (s *spiller) newRouteBuffers() *routeBuffers {
	return &routeBuffers{bufs: make([][]byte, len(s.windows))}
}

// route sends the records of one assembled block to their windows: blk's
// runs give rows of a row group whose first sample id is start, and their
// records at slot dst.. of data.
func (s *spiller) route(rb *routeBuffers, start uint64, blk []feature.RowRun, data []byte) error {
	rec := s.rec
	var occ []plan.Position
	for _, r := range blk {
		for row := r.Lo; row < r.Hi; row++ {
			id := start + uint64(row)
			o := (int(r.Dst) + row - r.Lo) * rec
			record := data[o : o+rec : o+rec]
			for ri := range s.routes {
				rt := &s.routes[ri]
				var err error
				if occ, err = s.p.Occurrences(rt.epoch, id, occ); err != nil {
					return err
				}
				for _, pos := range occ { // none when dropped
					gi := rt.group[pos.Rank]
					if gi < 0 {
						continue
					}
					if err := s.add(rb, &s.groups[gi], rt.local[pos.Rank], pos.Step, pos.Slot, record); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// add appends record to rb's buffer for the window of group grp holding
// step of its rank u, at batch slot slot, writing the buffer out when full.
func (s *spiller) add(rb *routeBuffers, grp *spillGroup, u int32, step, slot int, record []byte) error {
	wi := grp.first + step/grp.sw
	w := s.windows[wi]
	ws := (uint64(u)*uint64(w.s1-w.s0)+uint64(step-w.s0))*uint64(s.b) + uint64(slot)
	if s.bufCap < 2*s.ent {
		// A buffer would hold one entry: write it at once through the
		// worker's one scratch entry. Keeping an entry-sized buffer per
		// window instead added up to windows x record bytes per worker,
		// far past the memory limit with large records.
		rb.one = append(binary.LittleEndian.AppendUint64(rb.one[:0], ws), record...)
		return s.flush(wi, rb.one)
	}
	buf := rb.bufs[wi]
	if buf == nil {
		buf = make([]byte, 0, s.bufCap)
	}
	buf = binary.LittleEndian.AppendUint64(buf, ws)
	buf = append(buf, record...)
	if len(buf)+s.ent > s.bufCap {
		if err := s.flush(wi, buf); err != nil {
			return err
		}
		buf = buf[:0]
	}
	rb.bufs[wi] = buf
	return nil
}

// flushAll writes out what is left in rb.
func (s *spiller) flushAll(rb *routeBuffers) error {
	for wi, buf := range rb.bufs {
		if len(buf) > 0 {
			if err := s.flush(wi, buf); err != nil {
				return err
			}
			rb.bufs[wi] = buf[:0]
		}
	}
	return nil
}

// flush appends buf (whole entries) to window wi's region.
func (s *spiller) flush(wi int, buf []byte) error {
	w := s.windows[wi]
	n := int64(len(buf))
	off := w.fill.Add(n) - n
	if off+n > w.count*int64(s.ent) {
		return fmt.Errorf("%w: spill window %d overflows its %d records", feature.ErrInternal, wi, w.count)
	}
	if _, err := s.file.WriteAt(buf, w.base+off); err != nil {
		return fmt.Errorf("writing spill file: %w", err)
	}
	return nil
}

// checkFull reports an internal error unless every window received exactly
// the records counted for it: with a bijective plan that means every slot
// of every window is written exactly once.
func (s *spiller) checkFull() error {
	for wi, w := range s.windows {
		if got, want := w.fill.Load(), w.count*int64(s.ent); got != want {
			return fmt.Errorf("%w: spill window %d (epoch %d, steps %d-%d) holds %d bytes, want %d", feature.ErrInternal,
				wi, s.groups[w.group].epoch, w.s0, w.s1-1, got, want)
		}
	}
	return nil
}

// load reads window wi's region back and puts each record at its window
// slot in dst, reading in chunks on jobs goroutines, then discards the
// region (dropRange).
func (s *spiller) load(ctx context.Context, wi int, dst []byte, jobs int) error {
	w := s.windows[wi]
	total := w.count
	slots := uint64(len(s.groups[w.group].ranks)*(w.s1-w.s0)) * uint64(s.b)
	per := (total + int64(jobs) - 1) / int64(jobs)
	chunkEnt := int64(max(1, spillChunk/s.ent))
	err := pool.ForEach(ctx, jobs, jobs, func(j int) error {
		lo, hi := int64(j)*per, min(total, int64(j+1)*per)
		if lo >= hi {
			return nil
		}
		buf := make([]byte, min(hi-lo, chunkEnt)*int64(s.ent))
		for e := lo; e < hi; e += chunkEnt {
			if err := ctx.Err(); err != nil {
				return err
			}
			b := buf[:min(hi-e, chunkEnt)*int64(s.ent)]
			if _, err := s.file.ReadAt(b, w.base+e*int64(s.ent)); err != nil {
				return fmt.Errorf("reading spill file: %w", err)
			}
			for o := 0; o < len(b); o += s.ent {
				slot := binary.LittleEndian.Uint64(b[o:])
				if slot >= slots {
					return fmt.Errorf("%w: spill record slot %d beyond window %d's %d", feature.ErrInternal, slot, wi, slots)
				}
				copy(dst[int(slot)*s.rec:], b[o+8:o+s.ent])
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	sysmem.DropRange(s.file, w.base, total*int64(s.ent))
	return nil
}
