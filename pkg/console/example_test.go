package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/lovia-fleet/lovia/pkg/console"
)

// Serve the console next to an API: requests console.Serves names go to
// the console's handler, everything else to the API (the gateway does
// this at "/").
func ExampleHandler() {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "the API", http.StatusUnauthorized) })
	page := console.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if console.Serves(r) {
			page.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	}))
	defer srv.Close()

	for _, path := range []string{"/", "/console/js/app.js", "/v1/runs"} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			fmt.Println(err)
			return
		}
		res.Body.Close()
		fmt.Println(path, res.StatusCode, res.Header.Get("Content-Type"))
	}
	// Output:
	// / 200 text/html; charset=utf-8
	// /console/js/app.js 200 text/javascript; charset=utf-8
	// /v1/runs 401 text/plain; charset=utf-8
}
