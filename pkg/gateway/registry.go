package gateway

import (
	"net/http"
	"strconv"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// The agents registry over HTTP.
//
//	PUT    /v1/registry/agents                 {file, prune?} → {created, updated, unchanged, deleted, revision, unserved}
//	GET    /v1/registry/agents                 → {agents: [{name, revision, created, spec, workers}]}
//	GET    /v1/registry/agents/{name}          [?revision=N] → {name, revision, created, spec}
//	GET    /v1/registry/agents/{name}/history  → {agents: [...]}, oldest first
//	DELETE /v1/registry/agents/{name}

const exampleApply = `{"file": "agents:\n  - name: support\n    model: openai:gpt-4.1-mini\n", "prune": false}`

func (g *Gateway) registryApply(w http.ResponseWriter, r *http.Request) {
	var req bus.RegistryApplyRequest
	if herr := g.decode(w, r, &req, "registry apply request", exampleApply); herr != nil {
		g.fail(w, r, herr)
		return
	}
	rep, err := g.cfg.API.RegistryApply(r.Context(), &req)
	g.reply(w, r, http.StatusOK, rep, err)
}

func (g *Gateway) registryList(w http.ResponseWriter, r *http.Request) {
	rep, err := g.cfg.API.RegistryList(r.Context())
	g.reply(w, r, http.StatusOK, rep, err)
}

func (g *Gateway) registryGet(w http.ResponseWriter, r *http.Request) {
	req := &bus.RegistryGetRequest{Name: r.PathValue("name")}
	if s := r.URL.Query().Get("revision"); s != "" {
		rev, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			g.fail(w, r, &bus.FieldError{Field: "revision", Reason: "must be a positive integer (a revision lovia agents history lists)"})
			return
		}
		req.Revision = rev
	}
	rep, err := g.cfg.API.RegistryGet(r.Context(), req)
	g.reply(w, r, http.StatusOK, rep, err)
}

func (g *Gateway) registryHistory(w http.ResponseWriter, r *http.Request) {
	rep, err := g.cfg.API.RegistryHistory(r.Context(), &bus.RegistryGetRequest{Name: r.PathValue("name")})
	g.reply(w, r, http.StatusOK, rep, err)
}

func (g *Gateway) registryRemove(w http.ResponseWriter, r *http.Request) {
	rep, err := g.cfg.API.RegistryRemove(r.Context(), &bus.RegistryGetRequest{Name: r.PathValue("name")})
	g.reply(w, r, http.StatusOK, rep, err)
}
