package store

import (
	"fmt"
	"strings"

	"github.com/oklog/ulid/v2"
)

// Key layout. Every key of a run or session starts with its id, so one
// subject purge ($KV.<bucket>.<id>.>) removes all of it, chunks and
// orphans included.
//
//	checkpoints  <run>.c.<n>                 append n: the head after it, its entries and their base (CAS on <run>.c.*)
//	             <run>.head, <run>.b.<seq>.<nonce>  earlier releases' layout: head (CAS) and one batch per append; read and continued
//	sessions     <session>.s.<run>           one segment (Create: first write wins)
//	mailbox      <run>.m.<token>             one queued message (Create; Delete by revision); a keyed one (token k-<hex>) is left spent, not deleted
//	runs         <run>.rec                   the run's index record (CAS)
//	             hold.<worker>               the deliveries a worker holds, for takeover (holdings.go; not a run's key)
//	             hold.<worker>.<run>         one delivery a worker holds, for takeover (holdings.go)
//	any bucket   <id>.x.<nonce>.<i>          chunk i of a value too large for one message

// validID reports whether id is 1–128 characters of [A-Za-z0-9_-], the
// identifier rule of docs/protocol.md, which also makes it one KV key token.
func validID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func checkID(op, kind, id string) error {
	if validID(id) {
		return nil
	}
	return fmt.Errorf("store: %s %q: %w: the %s must be 1-128 characters of [A-Za-z0-9_-]", op, id, ErrInvalidID, kind)
}

// newToken returns a lowercase ULID: unique, and sorting by creation time.
func newToken() string { return strings.ToLower(ulid.Make().String()) }

func chunkPrefix(id string) string { return id + ".x" }
