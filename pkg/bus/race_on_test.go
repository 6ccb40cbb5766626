//go:build race

package bus

// raceEnabled: the race detector drops pooled values at random, so
// allocation counts are bounds, not exact.
const raceEnabled = true
