package bus

import "bytes"

// fieldsPlainJSON reports whether a run request body, valid JSON, has only
// known top-level fields and no input given as an empty or blank string:
// what checkFields refuses, decided by one scan that allocates nothing.
// It is false too when the scan cannot tell (a key or input string with an
// escape, a body that is not a plain object), and checkFields then decodes
// the body's keys to decide and name what is wrong.
func fieldsPlainJSON(body []byte) bool {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return false
	}
	i = skipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		return true
	}
	emptyInput := false
	for i < len(body) {
		key, next, ok := plainString(body, i)
		if !ok || !isRunRequestField(key) {
			return false
		}
		i = skipSpace(body, next)
		if i >= len(body) || body[i] != ':' {
			return false
		}
		i = skipSpace(body, i+1)
		end, ok := skipValue(body, i)
		if !ok {
			return false
		}
		if string(key) == "input" { // the last one counts, as in a decode
			// A decode into a string gives "" for null too.
			emptyInput = bytes.HasPrefix(body[i:end], []byte("null"))
			if body[i] == '"' {
				s, _, ok := plainString(body, i)
				if !ok {
					return false
				}
				emptyInput = len(bytes.TrimSpace(s)) == 0
			}
		}
		i = skipSpace(body, end)
		if i >= len(body) {
			return false
		}
		switch body[i] {
		case ',':
			i = skipSpace(body, i+1)
		case '}':
			return !emptyInput && skipSpace(body, i+1) == len(body)
		default:
			return false
		}
	}
	return false
}

// isRunRequestField reports whether k is one of runRequestFields.
func isRunRequestField(k []byte) bool {
	switch string(k) {
	case "agent", "budget", "encoding", "extra_instructions", "if_run_exists", "input",
		"max_turns", "metadata", "on_busy", "output_schema", "run_id", "session_id":
		return true
	}
	return false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// plainString returns the contents of the JSON string at b[i] and the
// index after it; ok is false when there is none or it has an escape.
func plainString(b []byte, i int) (s []byte, next int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '"':
			return b[i+1 : j], j + 1, true
		case '\\':
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// skipValue returns the index after the JSON value at b[i] of a valid
// document.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	depth := 0
	for j := i; j < len(b); j++ {
		switch c := b[j]; c {
		case '"':
			j++
			for j < len(b) && b[j] != '"' {
				if b[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(b) {
				return 0, false
			}
			if depth == 0 {
				return j + 1, true
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return j, true // the end of the enclosing object
			}
			depth--
			if depth == 0 {
				return j + 1, true
			}
		case ',', ' ', '\t', '\r', '\n', ':':
			if depth == 0 {
				return j, true
			}
		}
	}
	if depth == 0 {
		return len(b), true
	}
	return 0, false
}
