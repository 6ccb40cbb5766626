//go:build !race

package bus

// raceEnabled: see race_on_test.go.
const raceEnabled = false
