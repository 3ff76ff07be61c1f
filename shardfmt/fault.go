package shardfmt

import (
	"os"
	"runtime/debug"
	"unsafe"
)

// Faults on the mapping. A mapped shard (Open) cut short by someone else
// after it was validated faults (SIGBUS) on the first access past its new
// end. Open checks the size again once the file is mapped; after that,
// Open's own reads of the mapping and the Reader's accesses run under
// faultGuard, which turns such a fault into an error wrapping ErrSize.

// mappedHook, when set, is called with each file Open maps, before its size
// is checked again (tests).
var mappedHook func(f *os.File)

// mappedCheckedHook, when set, is called with each file Open maps once its
// size has been checked again, before the footer is read (tests).
var mappedCheckedHook func(f *os.File)

// faultGuard makes a memory fault on the mapping (the file was truncated
// after it was opened and validated) an error wrapping ErrSize instead of a
// crash, for the Reader's own accesses: use as
// defer r.faultGuard(section, k, &err)(). The error's offset is that of
// the page of the file that could not be read, and its section the one
// holding that offset (section when none does). Other panics propagate.
func (r *Reader) faultGuard(section string, k int, err *error) func() {
	if r.data == nil {
		return func() {}
	}
	data := r.data
	old := debug.SetPanicOnFault(true)
	return func() {
		debug.SetPanicOnFault(old)
		if p := recover(); p != nil {
			fault, ok := p.(interface{ Addr() uintptr })
			if !ok {
				panic(p)
			}
			off, sec := r.faultAt(data, fault.Addr(), section)
			*err = ferr(r.path, sec, off, k, ErrSize, "memory fault reading the mapping (file cut short after open?)")
		}
	}
}

// faultAt returns the file offset of the page holding addr, a faulting
// address in data (the mapping), and the section holding addr; -1 and
// section when addr is outside the mapping.
func (r *Reader) faultAt(data []byte, addr uintptr, section string) (int64, string) {
	base := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	if addr < base || addr-base >= uintptr(len(data)) {
		return -1, section
	}
	at := uint64(addr - base)
	page := uint64(os.Getpagesize())
	h := &r.h
	switch off := at; {
	case off >= h.idsOff && off < h.idsOff+h.idsLen:
		section = "sample ids"
	case off >= h.btOff && off < h.btOff+h.btLen:
		section = "batch table"
	case off >= h.footerOff:
		section = "footer"
	case off >= h.dataOff:
		section = "block"
	}
	return int64(at / page * page), section
}
