package runindex

import "errors"

var (
	// ErrBadCursor is a cursor no listing returned.
	ErrBadCursor = errors.New("runindex: bad cursor: pass the next_cursor of the previous page as it is, or none for the first page")
	// ErrNotReady is a query of a feed that has not replayed the run
	// index yet (within the caller's deadline).
	ErrNotReady = errors.New("runindex: the run index is still loading")
)
