//go:build !linux

package sysmem

// AnonSupported reports that MapAnon can succeed on this platform.
const AnonSupported = false

// MapAnon reports that anonymous staging is not available on this
// platform; staging always goes to a file.
func MapAnon(size int64) (data, whole []byte, ok bool) { return nil, nil, false }

// UnmapAnon is never called where MapAnon fails.
func UnmapAnon(whole []byte) {}

// adviseHuge does nothing where there is no madvise(2).
func adviseHuge(b []byte) {}
