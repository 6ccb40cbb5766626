package gateway

import (
	"net/http"

	"github.com/lovia-fleet/lovia/pkg/console"
)

// withConsole serves the fleet console (package console) at "/" and its
// assets under console.AssetsPrefix, before next. The bundle holds no run
// data, so it needs no token: the page asks for one and sends it on every
// API call.
func withConsole(next http.Handler) http.Handler {
	c := console.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if console.Serves(r) {
			c.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
