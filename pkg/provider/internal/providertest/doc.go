// Package providertest holds the test doubles of the adapters' tests: an
// httptest server that replays recorded wire responses in order and records
// the requests it received, and a recorder of the deltas a provider emits.
// Only tests import it.
package providertest
