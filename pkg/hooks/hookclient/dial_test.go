/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hookclient

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/metactl/metactl/pkg/hooks"
)

// TestDialRuleCheck checks which addresses each rule refuses, as dialed
// (after DNS): link-local and metadata addresses unless AllowLinkLocal,
// loopback and unspecified ones unless AllowLoopback, in either IP family,
// IPv4-mapped and through NAT64; every other address allowed.
func TestDialRuleCheck(t *testing.T) {
	for _, tc := range []struct {
		address  string
		class    string // refused by the zero rule as this; "" allowed
		loopback bool   // allowed by AllowLoopback
	}{
		{address: "169.254.169.254:80", class: "link-local"},
		{address: "169.254.0.1:443", class: "link-local"},
		{address: "[::ffff:169.254.169.254]:80", class: "link-local"},
		{address: "[fe80::1%eth0]:80", class: "link-local"},
		{address: "[64:ff9b::a9fe:a9fe]:80", class: "link-local"},
		{address: "[64:ff9b::7f00:1]:80", class: "loopback", loopback: true},
		{address: "[64:ff9b::a00:1]:80"},
		{address: "[fd00:ec2::254]:80", class: "a cloud metadata address"},
		{address: "100.100.100.200:80", class: "a cloud metadata address"},
		{address: "127.0.0.1:8080", class: "loopback", loopback: true},
		{address: "127.1.2.3:8080", class: "loopback", loopback: true},
		{address: "[::1]:8080", class: "loopback", loopback: true},
		{address: "[::ffff:127.0.0.1]:8080", class: "loopback", loopback: true},
		{address: "0.0.0.0:8080", class: "loopback", loopback: true},
		{address: "[::]:8080", class: "loopback", loopback: true},
		{address: "10.96.0.1:443"},
		{address: "192.168.1.10:80"},
		{address: "100.100.100.201:80"},
		{address: "[fd00:ec2::253]:80"},
		{address: "8.8.8.8:443"},
	} {
		err := DialRule{}.Check(tc.address)
		var refused *RefusedAddressError
		switch {
		case tc.class == "" && err != nil:
			t.Errorf("zero rule, %s: %v, want allowed", tc.address, err)
		case tc.class != "" && (!errors.As(err, &refused) || refused.Class != tc.class):
			t.Errorf("zero rule, %s: %v, want refused as %s", tc.address, err, tc.class)
		}
		if err := (DialRule{AllowLoopback: true}).Check(tc.address); (err == nil) != (tc.class == "" || tc.loopback) {
			t.Errorf("AllowLoopback, %s: %v", tc.address, err)
		}
		if err := (DialRule{AllowLinkLocal: true}).Check(tc.address); (err == nil) != !tc.loopback {
			t.Errorf("AllowLinkLocal, %s: %v", tc.address, err)
		}
	}
	// The message says which flag allows the address.
	if err := (DialRule{}).Check("127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "--allow-loopback-hooks") {
		t.Errorf("loopback refused: %v, want naming --allow-loopback-hooks", err)
	}
	if err := (DialRule{}).Check("169.254.169.254:80"); err == nil || !strings.Contains(err.Error(), "--allow-link-local-hooks") {
		t.Errorf("metadata refused: %v, want naming --allow-link-local-hooks", err)
	}
	if err := (DialRule{LoopbackHint: "set X"}).Check("[::1]:1"); err == nil || !strings.HasSuffix(err.Error(), ": set X") {
		t.Errorf("loopback refused with a hint: %v, want ending with it", err)
	}
}

// TestCallRefusesDialByRule checks that a Client with Options.Dial checks
// the address a hook's host resolves to when it dials: a hook at
// localhost (a name, resolved to loopback) is refused before any request
// reaches it, with a *RefusedAddressError in the chain; allowed with
// AllowLoopback; and a Client without a rule calls it as before.
func TestCallRefusesDialByRule(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		_, _ = w.Write([]byte(`{"status":{},"children":[]}`))
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	url := "http://localhost:" + port + "/sync"
	call := func(opts Options) error {
		// Each its own transport: no connection kept from another call.
		opts.HTTPClient = NewHTTPClient(NewTransport())
		return NewClient(opts).Call(context.Background(), "c", "sync", urlHook(url), &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{})
	}

	err := call(Options{Dial: &DialRule{}})
	var refused *RefusedAddressError
	if !errors.As(err, &refused) || refused.Class != "loopback" {
		t.Fatalf("calling %s with the zero rule: %v, want a RefusedAddressError for loopback", url, err)
	}
	var unreachable *UnreachableError
	if !errors.As(err, &unreachable) {
		t.Errorf("calling %s with the zero rule: %T, want an UnreachableError", url, err)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the refused hook was called %d times, want 0", n)
	}
	if err := call(Options{Dial: &DialRule{AllowLoopback: true}}); err != nil {
		t.Errorf("calling %s with AllowLoopback: %v", url, err)
	}
	if err := call(Options{}); err != nil {
		t.Errorf("calling %s without a rule: %v", url, err)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("the hook was called %d times, want 2", n)
	}
}
