package workspace

import "errors"

// Sentinels of the errors the operations return; every error a caller can
// cause is an *[Error] that matches one of them with errors.Is and says
// what to do next.
var (
	// ErrInvalidPath: the path is empty, absolute, climbs out of the tree
	// (..), holds a control character or a backslash, or is too long.
	ErrInvalidPath = errors.New("workspace: invalid path")
	// ErrNotFound: no such file (or, for list_dir, no such folder).
	ErrNotFound = errors.New("workspace: not found")
	// ErrTooLarge: the file is larger than the workspace's file limit.
	ErrTooLarge = errors.New("workspace: file too large")
	// ErrQuota: the change would take the workspace past its size quota or
	// its file count.
	ErrQuota = errors.New("workspace: quota exceeded")
	// ErrNoMatch: edit's old text is not in the file.
	ErrNoMatch = errors.New("workspace: text not found")
	// ErrAmbiguous: edit's old text is in the file more than once.
	ErrAmbiguous = errors.New("workspace: text is ambiguous")
	// ErrDenied: the workspace policy denies the path.
	ErrDenied = errors.New("workspace: path denied by policy")
	// ErrSymlink: an imported folder holds a symlink that leaves it.
	ErrSymlink = errors.New("workspace: symlink leaves the tree")
	// ErrConflict: the manifest kept changing under a write (other writers
	// won every compare-and-set); the change was not made.
	ErrConflict = errors.New("workspace: too many concurrent writers")
	// ErrInvalidScope: the scope's kind or id is not usable as a key.
	ErrInvalidScope = errors.New("workspace: invalid scope")
)

// Error is an operation's refusal: what was refused (Op, Path), why
// (Message) and what to do instead (Hint). It matches its Kind sentinel.
type Error struct {
	Op      string
	Path    string
	Kind    error
	Message string
	Hint    string
}

// Error returns the message and the hint.
func (e *Error) Error() string {
	s := e.Op + ": " + e.Message
	if e.Hint != "" {
		s += ": " + e.Hint
	}
	return s
}

// Unwrap returns the Kind sentinel.
func (e *Error) Unwrap() error { return e.Kind }

func refuse(op, p string, kind error, msg, hint string) *Error {
	return &Error{Op: op, Path: p, Kind: kind, Message: msg, Hint: hint}
}
