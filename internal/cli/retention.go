package cli

import (
	"fmt"
	"time"
)

// storeRetention is store.Config.Retention for the --retention flag: 0 or
// negative keeps ended runs for ever (the store's negative), a positive
// age is itself.
func storeRetention(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// checkRetention refuses a --retention the server cannot apply.
func checkRetention(d time.Duration) error {
	if d > 0 && d < time.Second {
		return fmt.Errorf("--retention %s: use at least 1s (or 0 to keep ended runs for ever)", d)
	}
	return nil
}
