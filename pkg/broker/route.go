package broker

import (
	"fmt"
	"net/url"
)

func parseRoute(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("broker: route %q: want nats-route://host:port", s)
	}
	return u, nil
}
