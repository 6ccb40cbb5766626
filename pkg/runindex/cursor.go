package runindex

import (
	"encoding/base64"
	"strconv"
	"strings"
)

// A cursor is the key of the last run of a page, opaque to clients: the
// next page starts after it, whatever runs were added or changed
// meanwhile.
func encodeCursor(k key) string {
	return base64.RawURLEncoding.EncodeToString([]byte("v1." + strconv.FormatInt(k.created, 36) + "." + k.id))
}

func decodeCursor(s string) (key, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return key{}, ErrBadCursor
	}
	parts := strings.SplitN(string(b), ".", 3)
	if len(parts) != 3 || parts[0] != "v1" || parts[2] == "" {
		return key{}, ErrBadCursor
	}
	n, err := strconv.ParseInt(parts[1], 36, 64)
	if err != nil {
		return key{}, ErrBadCursor
	}
	return key{created: n, id: parts[2]}, nil
}
