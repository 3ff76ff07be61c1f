//go:build !linux

package convert

// anonSupported reports that mapAnon can succeed on this platform.
const anonSupported = false

// mapAnon reports that anonymous staging is not available on this
// platform; staging always goes to a file.
func mapAnon(size int64) (data, whole []byte, ok bool) { return nil, nil, false }

// unmapAnon is never called where mapAnon fails.
func unmapAnon(whole []byte) {}
