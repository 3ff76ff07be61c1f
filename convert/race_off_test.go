//go:build !race

package convert

// raceEnabled reports that the tests run under the race detector.
const raceEnabled = false
