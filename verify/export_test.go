package verify

// PackedSourceStats returns, for the deep source of a packed plan's shard
// (FeatureSource), the most bytes of documents it held at once and the
// groups of documents it decoded; ok is false for any other source. For
// the tests of featuresource_packed.go (export_test.go: the Go idiom for
// what only the package's external tests see).
func PackedSourceStats(s SampleSource) (peak int64, decodes int, ok bool) {
	ps, ok := s.(*packedDeepSource)
	if !ok {
		return 0, 0, false
	}
	return ps.peak, ps.decodes, true
}
