package credentials

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

func TestCredentialHealth(t *testing.T) {
	var h CredentialHealth
	if h.Err() != nil {
		t.Fatal("a new CredentialHealth reports an error")
	}
	credErr := &CredentialError{Setting: "authorization", Reference: CredentialReference{Kind: "Secret", Namespace: "ns", Name: "tok", Key: "token"}, Reason: "not found"}
	if !h.Record(credErr) || h.Err() == nil {
		t.Fatal("a credential error was not remembered as a change")
	}
	if h.Record(credErr) {
		t.Error("the same state reported as a change")
	}
	keyErr := &CredentialError{Setting: "authorization", Reference: credErr.Reference, Reason: "key not found"}
	if !h.Record(keyErr) || h.Err() != keyErr {
		t.Error("another credential error was not reported as a change")
	}
	if !h.Record(errors.New("connection refused")) || h.Err() != nil {
		t.Error("an unrelated outcome did not clear the credential error")
	}

	// A server whose certificate no configured CA verifies.
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer server.Close()
	url := server.URL
	err := hookclient.NewClient(hookclient.Options{}).Call(context.Background(), "c", "sync", &v1alpha1.Hook{Webhook: &v1alpha1.Webhook{URL: &url}}, map[string]any{}, nil, hookclient.CallOptions{})
	if err == nil {
		t.Fatal("an unverifiable certificate was accepted")
	}
	if !h.Record(err) || h.Err() == nil {
		t.Errorf("a certificate verification failure is not a credential problem: %v", err)
	}
}
