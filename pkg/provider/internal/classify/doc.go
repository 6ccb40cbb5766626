// Package classify translates the failures of a model call into the loop's
// errors: a *loop.ProviderError whose Retryable and RetryAfter feed the
// loop's retry policy, a *loop.ContextOverflowError carrying the window the
// endpoint named, and hints that say what to fix. It is shared by the
// adapters so that every endpoint fails the same way.
package classify
