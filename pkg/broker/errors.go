package broker

import (
	"errors"
	"fmt"
)

// ErrInvalidConfig is wrapped by the errors of [StartEmbedded] and
// [StartCluster] when a config field is out of range; the message names
// the field.
var ErrInvalidConfig = errors.New("broker: invalid config")

// configError names a bad configuration field.
func configError(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}
