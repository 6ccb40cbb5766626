package runindex

import (
	"sort"
	"strings"
)

// key orders runs: by created_at, then run id. Sets hold runs in
// ascending key order, so a new run (created now) is appended at the end
// and a listing, newest first, walks a set backwards.
type key struct {
	created int64 // unix nanoseconds
	id      string
}

func (a key) less(b key) bool {
	if a.created != b.created {
		return a.created < b.created
	}
	return strings.Compare(a.id, b.id) < 0
}

// set is a sorted slice of runs: O(log n) search, O(n) insert and remove
// in the worst case, O(1) for a run created after every other (the usual
// case: a new run).
type set struct {
	es []*entry
}

// search returns the position of the first run whose key is not less than k.
func (s *set) search(k key) int {
	n := len(s.es)
	if n == 0 || s.es[n-1].key.less(k) {
		return n
	}
	return sort.Search(n, func(i int) bool { return !s.es[i].key.less(k) })
}

func (s *set) insert(e *entry) {
	i := s.search(e.key)
	if i < len(s.es) && s.es[i] == e {
		return
	}
	s.es = append(s.es, nil)
	copy(s.es[i+1:], s.es[i:])
	s.es[i] = e
}

func (s *set) remove(e *entry) {
	i := s.search(e.key)
	if i < len(s.es) && s.es[i] == e {
		copy(s.es[i:], s.es[i+1:])
		s.es[len(s.es)-1] = nil
		s.es = s.es[:len(s.es)-1]
	}
}

// list is the set's runs (nil for a nil set).
func (s *set) list() []*entry {
	if s == nil {
		return nil
	}
	return s.es
}

func (s *set) len() int {
	if s == nil {
		return 0
	}
	return len(s.es)
}

// postings are the sets of the runs with each value of one field.
type postings map[string]*set

func (p postings) add(v string, e *entry) {
	if v == "" {
		return
	}
	s := p[v]
	if s == nil {
		s = &set{}
		p[v] = s
	}
	s.insert(e)
}

func (p postings) drop(v string, e *entry) {
	if v == "" {
		return
	}
	if s := p[v]; s != nil {
		s.remove(e)
		if len(s.es) == 0 {
			delete(p, v)
		}
	}
}
