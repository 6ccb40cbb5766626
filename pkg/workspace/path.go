package workspace

import (
	"fmt"
	"path"
	"strings"
)

// MaxPathLen caps a path's length in bytes.
const MaxPathLen = 512

// Clean normalizes a path relative to the tree's root: it refuses an empty
// or absolute path, a ".." element, control characters and backslashes,
// and returns the path with "." elements and duplicate slashes removed.
// dir allows the root itself ("" or "."), returned as "".
func Clean(op, p string, dir bool) (string, error) {
	if p == "" || p == "." || p == "./" {
		if dir {
			return "", nil
		}
		return "", refuse(op, p, ErrInvalidPath, "path is empty", "give a file path relative to the workspace root, e.g. notes/todo.md")
	}
	if len(p) > MaxPathLen {
		return "", refuse(op, p, ErrInvalidPath, fmt.Sprintf("path is %d bytes long", len(p)), fmt.Sprintf("use a path of at most %d bytes", MaxPathLen))
	}
	if strings.HasPrefix(p, "/") || (len(p) > 1 && p[1] == ':') {
		return "", refuse(op, p, ErrInvalidPath, fmt.Sprintf("path %q is absolute", p), "give a path relative to the workspace root, e.g. "+strings.TrimLeft(p, "/"))
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return "", refuse(op, p, ErrInvalidPath, fmt.Sprintf("path %q holds a control character", p), "use printable characters")
		}
		if r == '\\' {
			return "", refuse(op, p, ErrInvalidPath, fmt.Sprintf("path %q holds a backslash", p), "separate folders with /")
		}
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return "", refuse(op, p, ErrInvalidPath, fmt.Sprintf("path %q climbs out of its folder (..)", p), "give the path from the workspace root without .., e.g. src/main.go")
		}
	}
	c := path.Clean(p)
	if c == "." {
		if dir {
			return "", nil
		}
		return "", refuse(op, p, ErrInvalidPath, "path names the workspace root, not a file", "give a file path, e.g. notes/todo.md")
	}
	return c, nil
}

// under reports whether file p is in folder dir ("" is the root).
func under(p, dir string) bool {
	return dir == "" || strings.HasPrefix(p, dir+"/")
}
