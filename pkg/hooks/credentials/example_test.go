/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package credentials_test

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/hooks/credentials"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// A Client whose hooks may use caBundle, clientTLS, authorization and
// basicAuth read from Secrets and ConfigMaps, each watched so that a
// rotation takes effect on the next call.
func ExampleNewSecureTransport() {
	kube := fake.NewClientset() // kubernetes.NewForConfigOrDie(cfg) in a program
	source := credentials.NewWatchingCredentialSource(kube)
	defer source.Stop()
	source.OnChange(func(namespace, name string) {
		// Sync again the controllers whose hooks use namespace/name.
	})
	// Credentials may come from the namespace "hooks" only, and are never
	// sent over plain http.
	st := credentials.NewSecureTransport(source, credentials.CredentialPolicy{Namespaces: []string{"hooks"}})
	client := hookclient.NewClient(hookclient.Options{Transport: st, PrepareRequest: st})

	hook := &v1alpha1.Hook{Webhook: &v1alpha1.Webhook{
		URL: ptr.To("https://hooks.example/sync"),
		Authorization: &v1alpha1.AuthorizationConfig{Type: v1alpha1.AuthorizationBearer,
			SecretRef: v1alpha1.KeyReference{Namespace: "hooks", Name: "hook-token"}},
	}}
	err := client.Call(context.Background(), "things", "sync", hook, &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, hookclient.CallOptions{})
	var ce *credentials.CredentialError
	if errors.As(err, &ce) {
		fmt.Println(ce.Setting, ce.Reference, ce.Reason)
	}
	// Output:
	// authorization Secret hooks/hook-token key "token" Secret not found
}
