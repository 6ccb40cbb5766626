package jsonschema

import (
	"net/mail"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// formatChecker returns the check of a known format, or nil for formats
// that are annotations only.
func formatChecker(format string) func(string) bool {
	switch format {
	case "date-time":
		return layoutChecker(time.RFC3339)
	case "date":
		return layoutChecker(time.DateOnly)
	case "time":
		return layoutChecker("15:04:05Z07:00")
	case "email":
		return isEmail
	case "uuid":
		return isUUID
	case "uri":
		return isURI
	case "ipv4":
		return func(s string) bool {
			a, err := netip.ParseAddr(s)
			return err == nil && a.Is4()
		}
	case "ipv6":
		return func(s string) bool {
			a, err := netip.ParseAddr(s)
			return err == nil && a.Is6() && a.Zone() == ""
		}
	}
	return nil
}

func layoutChecker(layout string) func(string) bool {
	return func(s string) bool {
		_, err := time.Parse(layout, s)
		return err == nil
	}
}

// isEmail accepts a bare address (local@domain), not "Name <addr>".
func isEmail(s string) bool {
	a, err := mail.ParseAddress(s)
	return err == nil && a.Name == "" && a.Address == s
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// isURI accepts absolute URIs (with a scheme).
func isURI(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme != "" && !strings.ContainsAny(s, " \t\n")
}
