package memory

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// ErrNotFound is a memory that does not exist.
var ErrNotFound = errors.New("memory: not found")

// ErrExists is a Create of a record that exists.
var ErrExists = errors.New("memory: exists")

// Kind says what a record is.
type Kind string

// Record kinds.
const (
	// KindNote is a note the model keeps (remember); the newest are the
	// hot notes of the system prompt.
	KindNote Kind = "note"
	// KindArchive is a completed run's last input and output.
	KindArchive Kind = "archive"
	// KindRetired is a note a dream replaced, kept for recall.
	KindRetired Kind = "retired"
	// KindDream records one dream (its id is its epoch) and its outcome.
	KindDream Kind = "dream"
)

// Record is one memory.
type Record struct {
	ID    string `json:"id"`
	Kind  Kind   `json:"kind"`
	Text  string `json:"text"`
	RunID string `json:"run_id,omitempty"`
	// Input and Output are an archived run's last input and its output.
	Input     string    `json:"input,omitempty"`
	Output    string    `json:"output,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// Store keeps the records of each scope. Implementations are safe for
// concurrent use; Put replaces a record with the same kind and id.
type Store interface {
	Put(ctx context.Context, scope string, r Record) error
	// Create writes a record that does not exist yet; one that exists is
	// ErrExists. Of concurrent Creates of one record, exactly one wins.
	Create(ctx context.Context, scope string, r Record) error
	// Delete removes a record; a missing one is ErrNotFound.
	Delete(ctx context.Context, scope string, kind Kind, id string) error
	// List returns a scope's records of kind (every kind when ""),
	// oldest first.
	List(ctx context.Context, scope string, kind Kind) ([]Record, error)
}

// MemoryStore is a Store in process memory (tests, single-process use).
type MemoryStore struct {
	mu sync.Mutex
	m  map[string]map[string]Record
}

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore { return &MemoryStore{m: map[string]map[string]Record{}} }

// Put implements Store.
func (s *MemoryStore) Put(_ context.Context, scope string, r Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[scope] == nil {
		s.m[scope] = map[string]Record{}
	}
	s.m[scope][string(r.Kind)+"/"+r.ID] = r
	return nil
}

// Create implements Store.
func (s *MemoryStore) Create(_ context.Context, scope string, r Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[scope] == nil {
		s.m[scope] = map[string]Record{}
	}
	k := string(r.Kind) + "/" + r.ID
	if _, ok := s.m[scope][k]; ok {
		return fmt.Errorf("%w: %s %s", ErrExists, r.Kind, r.ID)
	}
	s.m[scope][k] = r
	return nil
}

// Delete implements Store.
func (s *MemoryStore) Delete(_ context.Context, scope string, kind Kind, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := string(kind) + "/" + id
	if _, ok := s.m[scope][k]; !ok {
		return fmt.Errorf("%w: %s %s", ErrNotFound, kind, id)
	}
	delete(s.m[scope], k)
	return nil
}

// List implements Store.
func (s *MemoryStore) List(_ context.Context, scope string, kind Kind) ([]Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Record, 0, len(s.m[scope]))
	for _, r := range s.m[scope] {
		if kind == "" || r.Kind == kind {
			out = append(out, r)
		}
	}
	sortRecords(out)
	return out, nil
}

func sortRecords(rs []Record) {
	sort.SliceStable(rs, func(i, j int) bool {
		if !rs[i].CreatedAt.Equal(rs[j].CreatedAt) {
			return rs[i].CreatedAt.Before(rs[j].CreatedAt)
		}
		return rs[i].ID < rs[j].ID
	})
}

// ScopeToken is the key token of a scope: the scope itself when it is made
// of [A-Za-z0-9_-], else "=" and its unpadded base64url form.
func ScopeToken(scope string) string {
	for i := 0; i < len(scope); i++ {
		c := scope[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return "=" + base64.RawURLEncoding.EncodeToString([]byte(scope))
		}
	}
	return scope
}
