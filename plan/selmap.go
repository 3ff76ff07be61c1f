package plan

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"unsafe"

	"github.com/prepml/prep/internal/sysmem"
)

// A filtered source's selection (PLAN.md §11.7) as the plan uses it: the
// selected rows' sample ids in a table (selRow) where that fits, else the
// ranges with their prefix counts and jump table. The plan's text is
// decoded in passes over its varints, without the ranges in memory when
// the table is built: the first checks every range and counts the rows,
// then one hashes the selection digest while another fills the table or
// the ranges.

// selDirectMax bounds the selected rows of a source whose direct table
// (4 bytes a row, 256 MiB at most) is built; above it, and when a
// selected row's sample id is at or above 2^32, drawn rows are mapped by
// searching the ranges through the jump table, then the row groups.
const selDirectMax = 1 << 26

// selDirectLimit is selDirectMax, lowered by tests to exercise the search.
var selDirectLimit uint64 = selDirectMax

// eachRange calls fn with the ranges (start, length) of a decoded
// selection (EncodeSelection's bytes, in pieces of whole ranges) in order,
// up to 1024 at a time, after checking each against a source of n rows:
// length ≥ 1, gap ≥ 1 after the first range, inside [0, n). It returns the
// number of ranges, or an error naming the first bad one (fn has then been
// called with the ranges before it, or some of them).
func eachRange(pieces [][]byte, n uint64, fn func(ranges [][2]uint64)) (int, error) {
	var batch [1024][2]uint64
	var end uint64
	k, b := 0, 0
	for _, buf := range pieces {
		for ; len(buf) > 0; k++ {
			var gap, ln uint64
			if len(buf) >= 2 && buf[0] < 0x80 && buf[1] < 0x80 { // both one byte: most ranges
				gap, ln = uint64(buf[0]), uint64(buf[1])
				buf = buf[2:]
			} else {
				var a int
				gap, a = binary.Uvarint(buf)
				if a <= 0 {
					return k, fmt.Errorf("selection: bad varint")
				}
				buf = buf[a:]
				ln, a = binary.Uvarint(buf)
				if a <= 0 {
					return k, fmt.Errorf("selection: bad varint")
				}
				buf = buf[a:]
			}
			if ln == 0 || k > 0 && gap == 0 || gap > n || ln > n || end+gap > n-ln {
				return k, fmt.Errorf("selection: range %d (gap %d, length %d) is empty, adjacent to the previous one or past the source's %d rows", k, gap, ln, n)
			}
			batch[b] = [2]uint64{end + gap, ln}
			end += gap + ln
			if b++; b == len(batch) {
				fn(batch[:])
				b = 0
			}
		}
	}
	fn(batch[:b])
	return k, nil
}

// setSelection sets s's selection from the plan's text (PLAN.md §11.7),
// or from its bytes before base64 when pieces is not nil
// (MixSource.SetSelectionUvarints, counted: the rows they hold), over its
// s.n rows: the digest, the selected row count as s.n, and the ids table
// when at most selDirectLimit rows are selected and every selected id is
// below 2^32, else the ranges, prefix counts and jump table. Errors say
// what is wrong with the text.
func (s *mixSrc) setSelection(text string, pieces [][]byte, counted uint64, idx *sourceIndex) error {
	buf := pieces
	if buf == nil {
		b, err := base64.StdEncoding.DecodeString(text)
		if err != nil {
			return fmt.Errorf("selection is not base64: %v", err)
		}
		buf, counted = [][]byte{b}, 0
	}
	rows := s.n
	// The digest (a SHA-256 over 16 bytes a range) is hashed on another
	// core from the start, while this one checks the ranges and builds the
	// table or the ranges; on a bad text its result is dropped.
	digest := make(chan string, 1)
	go func() {
		h := sha256.New()
		hb := make([]byte, 0, 16<<10) // hashed 1024 ranges at a time, not 16 bytes a call
		eachRange(buf, rows, func(rs [][2]uint64) {
			for _, r := range rs {
				hb = binary.LittleEndian.AppendUint64(hb, r[0])
				hb = binary.LittleEndian.AppendUint64(hb, r[1])
			}
			h.Write(hb)
			hb = hb[:0]
		})
		digest <- fmt.Sprintf("sha256:%x", h.Sum(nil))
	}()
	pt := &s.part
	if counted > 0 && counted <= selDirectLimit && len(pt.blocks) > 0 && s.idOf(idx, rows-1) < 1<<32 {
		// The rows are counted and every id fits: the table in one pass,
		// each range checked as it is read.
		t := sysmem.MakeHuge[uint32](int(counted), int(counted))
		k, err := s.fillTable(t, buf, rows, idx)
		if err != nil {
			return err
		}
		if uint64(k) != counted {
			if uint64(k) > counted {
				return fmt.Errorf("selection: holds more than the %d rows counted", counted)
			}
			return fmt.Errorf("selection: holds %d rows, not the %d counted", k, counted)
		}
		s.n, s.selRow, s.digest = counted, t, <-digest
		return nil
	}
	var total, lastRow uint64
	ranges, err := eachRange(buf, rows, func(rs [][2]uint64) {
		for _, r := range rs {
			total += r[1]
		}
		if len(rs) > 0 {
			lastRow = rs[len(rs)-1][0] + rs[len(rs)-1][1] - 1
		}
	})
	if err != nil {
		return err
	}
	defer func() { s.digest = <-digest }()
	s.n = total
	if total == 0 {
		return nil
	}
	if total <= selDirectLimit && len(pt.blocks) > 0 && s.idOf(idx, lastRow) < 1<<32 {
		t := sysmem.MakeHuge[uint32](int(total), int(total))
		s.fillTable(t, buf, rows, idx) // checked above: fills t exactly
		s.selRow = t
		return nil
	}
	s.sel, s.selPrefix = make([][2]uint64, 0, ranges), make([]uint64, 1, ranges+1)
	eachRange(buf, rows, func(rs [][2]uint64) {
		for _, r := range rs {
			s.sel = append(s.sel, r)
			s.selPrefix = append(s.selPrefix, s.selPrefix[len(s.selPrefix)-1]+r[1])
		}
	})
	for j, k := 0, uint64(0); k < total; k += selJumpRows {
		for s.selPrefix[j+1] <= k {
			j++
		}
		s.selJump = append(s.selJump, j)
	}
	return nil
}

// fillTable writes the sample ids of the selected rows of buf (a
// selection's bytes in pieces, over the source's rows) into t, a row group's run of each range at
// a time, and returns how many rows the selection holds: len(t) + 1 when
// it holds more than t has room for (t is then full). Errors are
// eachRange's.
func (s *mixSrc) fillTable(t []uint32, buf [][]byte, rows uint64, idx *sourceIndex) (int, error) {
	pt := &s.part
	k, j := 0, 0
	_, err := eachRange(buf, rows, func(rs [][2]uint64) {
		for _, r := range rs {
			if k > len(t) || uint64(len(t)-k) < r[1] {
				k = len(t) + 1
				return
			}
			for x, end := r[0], r[0]+r[1]; x < end; {
				for pt.prefix[j+1] <= x {
					j++
				}
				id := idx.blocks[pt.blocks[j]].start + (x - pt.prefix[j])
				run := min(end, pt.prefix[j+1]) - x
				for y := range run {
					t[k] = uint32(id + y)
					k++
				}
				x += run
			}
		}
	})
	return k, err
}

// idOf returns the sample id of the source's row x (before selection).
func (s *mixSrc) idOf(idx *sourceIndex, x uint64) uint64 {
	pt := &s.part
	j := firstAbove(pt.prefix[1:], x)
	return idx.blocks[pt.blocks[j]].start + (x - pt.prefix[j])
}

// selectedIndex returns the index among the source's selected rows of its
// row local (before selection), and false when that row is not selected.
func (s *mixSrc) selectedIndex(idx *sourceIndex, local uint64) (uint64, bool) {
	if s.selRow != nil { // ascending ids: search the table for the row's id
		id := s.idOf(idx, local)
		lo, hi := 0, len(s.selRow)
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if uint64(s.selRow[m]) < id {
				lo = m + 1
			} else {
				hi = m
			}
		}
		return uint64(lo), lo < len(s.selRow) && uint64(s.selRow[lo]) == id
	}
	lo, hi := 0, len(s.sel)
	for lo < hi { // the first range ending after local
		m := int(uint(lo+hi) >> 1)
		if s.sel[m][0]+s.sel[m][1] > local {
			hi = m
		} else {
			lo = m + 1
		}
	}
	if lo == len(s.sel) || local < s.sel[lo][0] {
		return 0, false
	}
	return s.selPrefix[lo] + (local - s.sel[lo][0]), true
}

// selectionKey is how a selection set to "-" appears in the indented plan
// file. Inside a JSON string every quote is escaped, so these bytes occur
// only as the mixture sources' selection members, in source order.
const selectionKey = `"selection": "-"`

// marshalIndent returns json.MarshalIndent(p, "", "  ") as the pieces
// that joined make it (marshalParts).
func marshalIndent(p *Plan) ([]byte, error) {
	parts, err := marshalParts(p)
	if err != nil {
		return nil, err
	}
	return bytes.Join(parts, nil), nil
}

// marshalParts returns json.MarshalIndent(p, "", "  ") as pieces whose
// concatenation is those bytes, without running the JSON encoder and
// indenter over the selections, the bulk of a filtered plan's bytes: they
// are marshalled as "-" and their text spliced in as pieces of its own,
// each being base64 text, which JSON writes as it is. A selection's piece
// shares the string's memory (no copy of megabytes of text): callers only
// read the pieces. A selection holding any other byte (a plan edited by
// hand) takes the plain path, one piece.
func marshalParts(p *Plan) ([][]byte, error) {
	plain := func() ([][]byte, error) {
		b, err := json.MarshalIndent(p, "", "  ")
		return [][]byte{b}, err
	}
	if p.Mixture == nil {
		return plain()
	}
	var sels []string
	for _, s := range p.Mixture.Sources {
		if s.Selection == "" {
			continue
		}
		if !isBase64Text(s.Selection) {
			return plain()
		}
		sels = append(sels, s.Selection)
	}
	if len(sels) == 0 {
		return plain()
	}
	q, m := *p, *p.Mixture
	m.Sources = slices.Clone(m.Sources)
	for i := range m.Sources {
		if m.Sources[i].Selection != "" {
			m.Sources[i].Selection = "-"
		}
	}
	q.Mixture = &m
	b, err := json.MarshalIndent(&q, "", "  ")
	if err != nil {
		return nil, err
	}
	parts := make([][]byte, 0, 2*len(sels)+1)
	for _, s := range sels {
		i := bytes.Index(b, []byte(selectionKey))
		if i < 0 {
			return nil, fmt.Errorf("plan: marshalling: selection member not found")
		}
		// The key and the opening quote; the text; the closing quote
		// starts the next piece.
		parts = append(parts, b[:i+len(selectionKey)-2], unsafe.Slice(unsafe.StringData(s), len(s)))
		b = b[i+len(selectionKey)-1:]
	}
	return append(parts, b), nil
}

// isBase64Text reports whether s holds only bytes of the standard base64
// alphabet and its padding, none of which JSON escapes.
func isBase64Text(s string) bool {
	var bad uint8
	for i := 0; i < len(s); i++ {
		bad |= notBase64[s[i]] // no branch per byte
	}
	return bad == 0
}

// notBase64[c] is 0 for the bytes of the standard base64 alphabet and its
// padding '=', 1 for every other byte.
var notBase64 = func() (t [256]uint8) {
	for i := range t {
		t[i] = 1
	}
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") {
		t[c] = 0
	}
	return t
}()
