//go:build !race

package feature

// raceEnabled reports that the tests run under the race detector.
const raceEnabled = false
