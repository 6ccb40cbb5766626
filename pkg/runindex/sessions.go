package runindex

import (
	"slices"
	"strings"

	"github.com/lovia-fleet/lovia/pkg/store"
)

// Session is one session of a listing: how many of its runs the index
// holds, and the newest of them (with its status).
type Session struct {
	SessionID string
	Runs      int
	Last      store.RunRecord
}

// SessionPage is one page of sessions, the one with the newest run first.
type SessionPage struct {
	Sessions []Session
	// Next is the cursor of the next page, "" on the last.
	Next string
}

// Sessions lists the sessions of the runs the index holds, the one whose
// newest run was created last first, limit a page (at least 1), from the
// page after cursor (a SessionPage's Next) when it is not "". Agent, when
// set, keeps the sessions whose newest run is of that agent.
func (x *Index) Sessions(agent string, limit int, cursor string) (SessionPage, error) {
	var after key
	if cursor != "" {
		k, err := decodeCursor(cursor)
		if err != nil {
			return SessionPage{}, err
		}
		after = k
	}
	limit = max(limit, 1)
	x.mu.RLock()
	defer x.mu.RUnlock()
	type last struct {
		id string
		e  *entry
		n  int
	}
	all := make([]last, 0, len(x.sessions))
	for id, s := range x.sessions {
		es := s.list()
		if len(es) == 0 {
			continue
		}
		e := es[len(es)-1]
		if agent != "" && e.rec.Agent != agent {
			continue
		}
		if cursor != "" && !e.key.less(after) {
			continue
		}
		all = append(all, last{id: id, e: e, n: len(es)})
	}
	slices.SortFunc(all, func(a, b last) int {
		if a.e.key == b.e.key {
			return strings.Compare(a.id, b.id)
		}
		if b.e.key.less(a.e.key) {
			return -1
		}
		return 1
	})
	var page SessionPage
	for i, l := range all {
		if i == limit {
			page.Next = encodeCursor(all[i-1].e.key)
			break
		}
		page.Sessions = append(page.Sessions, Session{SessionID: l.id, Runs: l.n, Last: l.e.rec})
	}
	return page, nil
}
