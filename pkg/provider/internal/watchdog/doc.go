// Package watchdog bounds one streamed model call in time: a deadline for the
// whole call (applied only when the caller set none) and an idle limit on the
// wait for each next stream event. It starts no goroutine of its own; the idle
// limit is a runtime timer that cancels the call's context.
package watchdog
