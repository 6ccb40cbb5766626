package gateway_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// The agents registry over HTTP: apply an agents file, list, read a
// revision and the history, remove; an invalid file is a 400 naming the
// problem, and nothing is written.
func TestRegistryRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	apply := func(file string) (*http.Response, []byte) {
		body, err := json.Marshal(bus.RegistryApplyRequest{File: file})
		require.NoError(t, err)
		return b.do(t, http.MethodPut, "/v1/registry/agents", string(body))
	}
	resp, data := apply("agents:\n  - name: greeter\n    model: scripted\n    script:\n      - text: one\n")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
	var rep bus.RegistryApplyReply
	require.NoError(t, json.Unmarshal(data, &rep))
	require.Equal(t, []string{"greeter"}, rep.Created)
	require.Equal(t, []string{"greeter"}, rep.Unserved, "no live worker serves it: the fleet's workers serve their file")
	first := rep.Revision

	resp, data = apply("agents:\n  - name: greeter\n    model: scripted\n    script:\n      - text: two\n")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
	resp, data = apply("agents:\n  - name: broken\n    model: scripted\n    handoffs: [nobody]\n    script:\n      - text: x\n")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(data))
	_, msg, hint := apiError(t, data)
	require.Contains(t, msg, `handoff to unknown agent "nobody"`)
	require.Contains(t, hint, "nothing was written")

	resp, data = b.do(t, http.MethodGet, "/v1/registry/agents", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
	var list bus.RegistryAgentsReply
	require.NoError(t, json.Unmarshal(data, &list))
	require.Len(t, list.Agents, 1)
	require.Equal(t, "greeter", list.Agents[0].Name)
	require.Contains(t, string(list.Agents[0].Spec), "two")

	resp, data = b.do(t, http.MethodGet, "/v1/registry/agents/greeter?revision="+itoa(int(first)), "")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
	require.Contains(t, string(data), "one")
	resp, data = b.do(t, http.MethodGet, "/v1/registry/agents/greeter/history", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
	require.NoError(t, json.Unmarshal(data, &list))
	require.Len(t, list.Agents, 2)

	resp, data = b.do(t, http.MethodDelete, "/v1/registry/agents/greeter", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
	resp, data = b.do(t, http.MethodGet, "/v1/registry/agents/greeter", "")
	require.Equal(t, http.StatusNotFound, resp.StatusCode, string(data))
	_, _, hint = apiError(t, data)
	require.Contains(t, hint, "lovia agents ls")
}
