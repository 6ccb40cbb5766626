package otlp

import "errors"

// ErrConfig is matched (errors.Is) by every error New returns for an
// OTEL_* variable it cannot use; the message names the variable and the
// values it takes.
var ErrConfig = errors.New("otlp: bad OpenTelemetry configuration")
