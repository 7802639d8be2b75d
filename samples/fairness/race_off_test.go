//go:build !race

package main

// raceEnabled reports that the test binary runs under the race detector.
const raceEnabled = false
