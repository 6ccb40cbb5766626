package schedule

import (
	"errors"
	"fmt"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// Sentinels. Every error a Manager returns for bad input or a missing or
// existing schedule also carries a *bus.APIError with a hint (the next
// thing to try), which the API service and the gateway reply with.
var (
	// ErrInvalid: the schedule definition is not valid.
	ErrInvalid = errors.New("schedule: invalid")
	// ErrNotFound: no schedule has that name.
	ErrNotFound = errors.New("schedule: not found")
	// ErrExists: a schedule already has that name.
	ErrExists = errors.New("schedule: already exists")
	// ErrReconnected: CatchUp's connection reconnected while it looked
	// (the server may just have restarted); it fired nothing: look again
	// a grace later.
	ErrReconnected = errors.New("schedule: the connection reconnected during the catch-up")
)

func invalid(field, reason, hint string) error {
	return fmt.Errorf("%w: %w", ErrInvalid, &bus.APIError{Type: bus.TypeInvalidRequest, Message: field + ": " + reason, Hint: hint})
}

func notFound(name string) error {
	return fmt.Errorf("%w: %w", ErrNotFound, &bus.APIError{Type: bus.TypeNotFound,
		Message: "no schedule named " + quote(name), Hint: "list the schedules with `lovia schedule ls`"})
}

func exists(name string) error {
	return fmt.Errorf("%w: %w", ErrExists, &bus.APIError{Type: bus.TypeInvalidRequest,
		Message: "a schedule named " + quote(name) + " already exists",
		Hint:    "remove it first (`lovia schedule rm " + name + "`) or pick another name"})
}

func quote(s string) string { return fmt.Sprintf("%q", s) }
