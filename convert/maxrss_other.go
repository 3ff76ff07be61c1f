//go:build !darwin

package convert

// maxrssUnit is the unit of getrusage's ru_maxrss in bytes: Linux and the
// BSDs report KiB (getrusage(2)).
const maxrssUnit = 1024
