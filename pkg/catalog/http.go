package catalog

import (
	"fmt"
	"maps"
	"time"

	"github.com/lovia-fleet/lovia/pkg/tools"
)

// HTTPSpec is an agent's `http:` section: what its http_request and
// read_page tools may reach.
//
//	tools: [http_request, read_page]
//	http:
//	  allow_hosts: [api.example.com, "*.example.org", 127.0.0.1]
//	  max_bytes: 1048576
//	  timeout: 20s
type HTTPSpec struct {
	// AllowHosts are host names, *.domain patterns, IP addresses or CIDR
	// ranges (empty: any public host). Private and local addresses need
	// an explicit entry or AllowPrivate.
	AllowHosts   []string `yaml:"allow_hosts" json:"allow_hosts,omitempty"`
	AllowPrivate bool     `yaml:"allow_private" json:"allow_private,omitempty"`
	MaxBytes     int64    `yaml:"max_bytes" json:"max_bytes,omitempty"`
	Timeout      Duration `yaml:"timeout" json:"timeout,omitempty"`
}

// withHTTPTools adds the agent's http_request and read_page, built with
// its http settings, to the tools it picks from.
func withHTTPTools(ts tools.Set, s Spec) (tools.Set, error) {
	var p tools.HTTPPolicy
	if h := s.HTTP; h != nil {
		if h.MaxBytes < 0 {
			return nil, fmt.Errorf("http.max_bytes %d is negative", h.MaxBytes)
		}
		p = tools.HTTPPolicy{AllowHosts: h.AllowHosts, AllowPrivate: h.AllowPrivate, MaxBytes: h.MaxBytes, Timeout: time.Duration(h.Timeout)}
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("http: %w", err)
		}
		if !contains(s.Tools, tools.HTTPRequestName) && !contains(s.Tools, tools.ReadPageName) {
			return nil, fmt.Errorf("http settings apply to the tools %s and %s, and the agent's tools name neither: add them to tools or remove http", tools.HTTPRequestName, tools.ReadPageName)
		}
	}
	out := make(tools.Set, len(ts)+2)
	maps.Copy(out, ts)
	out[tools.HTTPRequestName] = tools.HTTPRequest(p)
	out[tools.ReadPageName] = tools.ReadPage(p)
	return out, nil
}
