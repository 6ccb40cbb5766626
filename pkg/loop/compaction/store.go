package compaction

import (
	"container/list"
	"context"
	"fmt"
	"sync"
)

// ResultStore archives offloaded tool outputs under their content digest
// ([Digest]), so recall_tool_result can return a full output the view only
// previews — from any worker when the store is shared. Keys are digests,
// so a store shared by many sessions never serves one session's output for
// another's reused call id. Put of a present key replaces its content (the
// same content, by construction). Get reports ok=false for an absent key;
// an error means the store could not answer (recall then reads the
// transcript). There is no delete: a store may evict. Implementations are
// safe for concurrent use and honour ctx.
type ResultStore interface {
	Put(ctx context.Context, key string, content string) error
	Get(ctx context.Context, key string) (content string, ok bool, err error)
}

// DefaultMemoryStoreKeys bounds a MemoryStore built with 0 keys.
const DefaultMemoryStoreKeys = 1024

// MemoryStore is an in-process [ResultStore] that keeps the most recently
// used keys, evicting the least recently used beyond its bound. It is safe
// for concurrent use; the zero value is not usable, call [NewMemoryStore].
type MemoryStore struct {
	mu    sync.Mutex
	max   int
	order *list.List // front: most recently used; values are *memItem
	items map[string]*list.Element
}

type memItem struct {
	key, content string
}

var _ ResultStore = (*MemoryStore)(nil)

// NewMemoryStore returns an empty store bounded at maxKeys keys (0:
// DefaultMemoryStoreKeys).
func NewMemoryStore(maxKeys int) *MemoryStore {
	if maxKeys <= 0 {
		maxKeys = DefaultMemoryStoreKeys
	}
	return &MemoryStore{max: maxKeys, order: list.New(), items: make(map[string]*list.Element)}
}

// Put stores content under key, evicting the least recently used key when
// the store is full.
func (s *MemoryStore) Put(ctx context.Context, key, content string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("compaction: result store put %s: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.items[key]; ok {
		el.Value.(*memItem).content = content
		s.order.MoveToFront(el)
		return nil
	}
	s.items[key] = s.order.PushFront(&memItem{key: key, content: content})
	for s.order.Len() > s.max {
		old := s.order.Back()
		s.order.Remove(old)
		delete(s.items, old.Value.(*memItem).key)
	}
	return nil
}

// Get returns the content stored under key and marks it recently used.
func (s *MemoryStore) Get(ctx context.Context, key string) (string, bool, error) {
	if err := ctx.Err(); err != nil {
		return "", false, fmt.Errorf("compaction: result store get %s: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.items[key]
	if !ok {
		return "", false, nil
	}
	s.order.MoveToFront(el)
	return el.Value.(*memItem).content, true, nil
}

// Len returns the number of keys held.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order.Len()
}
