package manager

import (
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// TestClientRateLimit: a Config without QPS (--client-qps 0, the chart's
// run.clientQPS: 0) gives the clients no fixed rate limit, not client-go's
// default of 5 requests a second; a positive QPS one limiter shared by
// every client.
func TestClientRateLimit(t *testing.T) {
	c, err := newClients(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if c.config.QPS >= 0 || c.config.RateLimiter != nil {
		t.Errorf("QPS 0: the clients' QPS %v, rate limiter %v; want no limit (QPS < 0, no limiter)", c.config.QPS, c.config.RateLimiter)
	}
	c, err = newClients(&rest.Config{Host: "http://127.0.0.1:1", QPS: 50, Burst: 100})
	if err != nil {
		t.Fatal(err)
	}
	if c.config.RateLimiter == nil || c.config.RateLimiter.QPS() != 50 {
		t.Errorf("QPS 50: rate limiter %v, want one of 50 a second", c.config.RateLimiter)
	}
}

// TestUserAgent: every User-Agent the manager sends starts with
// "metactl/", which the API server takes as the field manager.
func TestUserAgent(t *testing.T) {
	for ua, want := range map[string]string{
		"":                     "metactl/",
		"metactl/v1.2.3 (run)": "metactl/v1.2.3 (run)",
		"Go-http-client/1.1":   "metactl/Go-http-client/1.1",
		"metactl-dev/v0 (x/y)": "metactl/metactl-dev/v0 (x/y)",
	} {
		if got := userAgent(ua); !strings.HasPrefix(got, want) {
			t.Errorf("userAgent(%q) = %q, want %q", ua, got, want)
		}
	}
}
