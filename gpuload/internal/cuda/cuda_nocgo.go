//go:build !cgo

package cuda

import (
	"fmt"
	"unsafe"
)

// errNoCgo is what every entry point returns in a build without cgo.
var errNoCgo = fmt.Errorf("%w: built without cgo (CGO_ENABLED=0)", ErrUnavailable)

// Load reports that the driver cannot be loaded without cgo.
func Load() error { return errNoCgo }

// FakeOutstanding reports ok=false: no driver is ever loaded without cgo.
func FakeOutstanding() (n int, ok bool) { return 0, false }

// FakeThreadsCurrent reports ok=false: no driver is ever loaded without cgo.
func FakeThreadsCurrent() (n int, ok bool) { return 0, false }

// FakeHtoDBytes reports ok=false: no driver is ever loaded without cgo.
func FakeHtoDBytes() (n int64, ok bool) { return 0, false }

// DriverVersion returns an error wrapping ErrUnavailable.
func DriverVersion() (int, error) { return 0, errNoCgo }

// Context is never created without cgo.
type Context struct{}

// Open returns an error wrapping ErrUnavailable.
func Open(ordinal int) (*Context, error) { return nil, errNoCgo }

// Name returns "".
func (c *Context) Name() string { return "" }

// Do returns an error wrapping ErrUnavailable.
func (c *Context) Do(f func(cur *Current) error) error { return errNoCgo }

// Bind returns an error wrapping ErrUnavailable.
func (c *Context) Bind() (cur *Current, unbind func(), err error) { return nil, nil, errNoCgo }

// Close does nothing.
func (c *Context) Close() error { return nil }

// Current is never handed out without cgo; its methods return errors
// wrapping ErrUnavailable.
type Current struct{}

// MemAlloc returns an error wrapping ErrUnavailable.
func (*Current) MemAlloc(bytes uint64) (DevicePtr, error) { return 0, errNoCgo }

// MemFree returns an error wrapping ErrUnavailable.
func (*Current) MemFree(p DevicePtr) error { return errNoCgo }

// MemHostAlloc returns an error wrapping ErrUnavailable.
func (*Current) MemHostAlloc(bytes uint64) (unsafe.Pointer, error) { return nil, errNoCgo }

// MemFreeHost returns an error wrapping ErrUnavailable.
func (*Current) MemFreeHost(p unsafe.Pointer) error { return errNoCgo }

// MemHostRegister returns an error wrapping ErrUnavailable.
func (*Current) MemHostRegister(p unsafe.Pointer, bytes uint64, flags uint) error { return errNoCgo }

// MemHostUnregister returns an error wrapping ErrUnavailable.
func (*Current) MemHostUnregister(p unsafe.Pointer) error { return errNoCgo }

// MemcpyHtoD returns an error wrapping ErrUnavailable.
func (*Current) MemcpyHtoD(dst DevicePtr, src unsafe.Pointer, bytes uint64) error { return errNoCgo }

// MemcpyHtoDAsync returns an error wrapping ErrUnavailable.
func (*Current) MemcpyHtoDAsync(dst DevicePtr, src unsafe.Pointer, bytes uint64, s Stream) error {
	return errNoCgo
}

// MemcpyDtoH returns an error wrapping ErrUnavailable.
func (*Current) MemcpyDtoH(dst []byte, src DevicePtr) error { return errNoCgo }

// StreamCreate returns an error wrapping ErrUnavailable.
func (*Current) StreamCreate(flags uint) (Stream, error) { return Stream{}, errNoCgo }

// StreamSynchronize returns an error wrapping ErrUnavailable.
func (*Current) StreamSynchronize(s Stream) error { return errNoCgo }

// StreamDestroy returns an error wrapping ErrUnavailable.
func (*Current) StreamDestroy(s Stream) error { return errNoCgo }

// EventCreate returns an error wrapping ErrUnavailable.
func (*Current) EventCreate(flags uint) (Event, error) { return Event{}, errNoCgo }

// EventRecord returns an error wrapping ErrUnavailable.
func (*Current) EventRecord(e Event, s Stream) error { return errNoCgo }

// EventSynchronize returns an error wrapping ErrUnavailable.
func (*Current) EventSynchronize(e Event) error { return errNoCgo }

// EventQuery returns an error wrapping ErrUnavailable.
func (*Current) EventQuery(e Event) (bool, error) { return false, errNoCgo }

// EventDestroy returns an error wrapping ErrUnavailable.
func (*Current) EventDestroy(e Event) error { return errNoCgo }

// LoadCuFile returns an error wrapping ErrGDSUnavailable.
func LoadCuFile() error {
	return fmt.Errorf("%w: built without cgo (CGO_ENABLED=0)", ErrGDSUnavailable)
}

// FileDriverOpen returns an error wrapping ErrGDSUnavailable.
func (*Current) FileDriverOpen() error { return LoadCuFile() }

// FileDriverClose returns an error wrapping ErrGDSUnavailable.
func (*Current) FileDriverClose() error { return LoadCuFile() }

// FileHandleRegister returns an error wrapping ErrGDSUnavailable.
func (*Current) FileHandleRegister(fd int) (FileHandle, error) { return FileHandle{}, LoadCuFile() }

// FileHandleDeregister does nothing.
func (*Current) FileHandleDeregister(h FileHandle) {}

// FileRead returns an error wrapping ErrGDSUnavailable.
func (*Current) FileRead(h FileHandle, dst DevicePtr, n uint64, off int64) (int, error) {
	return 0, LoadCuFile()
}
