//go:build !unix

package verify

// fileLimit reports no open-file limit: maxOpenShards uses its bound.
func fileLimit() (uint64, bool) { return 0, false }
