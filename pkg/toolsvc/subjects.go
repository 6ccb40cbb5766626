package toolsvc

import (
	"fmt"
	"regexp"
)

// Headers a caller sets on every call, so a service can log and
// deduplicate.
const (
	HeaderRunID  = "Lovia-Run-Id"
	HeaderCallID = "Lovia-Call-Id"
	HeaderAgent  = "Lovia-Agent"
)

// Endpoint metadata keys: what a tool tells the model.
const (
	MetaDescription = "description"
	MetaSchema      = "schema"
)

// Separator joins a service's name and its tool's name in the tool name
// agents use: "<service>__<tool>".
const Separator = "__"

var tokenRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Subject is the subject of a tool's endpoint: <prefix>.tools.<service>.<tool>.
// Every token must be 1-64 characters of [A-Za-z0-9_-].
func Subject(prefix, service, tool string) (string, error) {
	for _, tok := range []struct{ what, v string }{{"prefix", prefix}, {"service", service}, {"tool", tool}} {
		if !tokenRE.MatchString(tok.v) {
			return "", fmt.Errorf("toolsvc: %s %q must be 1-64 characters of [A-Za-z0-9_-]", tok.what, tok.v)
		}
	}
	return prefix + ".tools." + service + "." + tool, nil
}

// SubjectPrefix is the subject prefix every tool endpoint of a fleet
// shares: <prefix>.tools.
func SubjectPrefix(prefix string) string { return prefix + ".tools." }
