package workspace

import (
	"fmt"
	"path"
	"strings"
)

// Access is what a [Policy] rule lets a tool do with the paths it matches.
type Access string

// The accesses of a rule.
const (
	// Allow lets the call run.
	Allow Access = "allow"
	// Ask makes the call wait for an approval (the fleet's approval gate).
	Ask Access = "ask"
	// Deny refuses the call; list_dir and grep leave the path out.
	Deny Access = "deny"
)

// Rule is one entry of a [Policy]: a path glob and its access. The glob
// is matched against the path and each of its parent folders, element by
// element: * and ? stay within one element, ** matches any number of
// elements; so `secrets` and `secrets/**` both cover secrets/key.txt.
type Rule struct {
	Path   string `yaml:"path" json:"path"`
	Access Access `yaml:"access" json:"access"`
}

// Policy is an ordered list of rules: the first rule that matches a path
// decides; a path no rule matches is allowed.
type Policy []Rule

// Validate names the first bad rule.
func (p Policy) Validate() error {
	for i, r := range p {
		switch r.Access {
		case Allow, Ask, Deny:
		default:
			return fmt.Errorf("policy[%d]: access %q: use allow, ask or deny", i, r.Access)
		}
		if r.Path == "" {
			return fmt.Errorf("policy[%d]: path is empty: give a glob such as docs/** or *.md", i)
		}
		if strings.HasPrefix(r.Path, "/") {
			return fmt.Errorf("policy[%d]: path %q is absolute: globs are relative to the workspace root", i, r.Path)
		}
		for _, el := range strings.Split(r.Path, "/") {
			if _, err := path.Match(el, ""); err != nil {
				return fmt.Errorf("policy[%d]: path %q: %w", i, r.Path, err)
			}
		}
	}
	return nil
}

// Decide returns the access of a clean path (see [Clean]).
func (p Policy) Decide(clean string) Access {
	for _, r := range p {
		if MatchGlob(r.Path, clean) {
			return r.Access
		}
	}
	return Allow
}

// MatchGlob reports whether glob matches the clean path or one of its parent
// folders (see [Rule]).
func MatchGlob(glob, clean string) bool {
	g := strings.Split(strings.Trim(glob, "/"), "/")
	el := strings.Split(clean, "/")
	for n := len(el); n >= 1; n-- {
		if matchElems(g, el[:n]) {
			return true
		}
	}
	return false
}

func matchElems(g, el []string) bool {
	for len(g) > 0 {
		if g[0] == "**" {
			rest := g[1:]
			for i := 0; i <= len(el); i++ {
				if matchElems(rest, el[i:]) {
					return true
				}
			}
			return false
		}
		if len(el) == 0 {
			return false
		}
		if ok, _ := path.Match(g[0], el[0]); !ok {
			return false
		}
		g, el = g[1:], el[1:]
	}
	return len(el) == 0
}
