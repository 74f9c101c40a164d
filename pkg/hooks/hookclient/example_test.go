/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hookclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

func ExampleClient_Call() {
	// A sync hook that wants one ConfigMap per parent, named after it.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req hooks.CompositeSyncRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		observed := len(req.Children["ConfigMap.v1"])
		fmt.Fprintf(w, `{"status":{"observedChildren":%d},"children":[`+
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q},"data":{"replicas":"%v"}}]}`,
			observed, req.Parent.GetName()+"-config", req.Parent.Object["spec"].(map[string]any)["replicas"])
	}))
	defer srv.Close()

	parent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ctl.example.com/v1",
		"kind":       "Thing",
		"metadata":   map[string]any{"name": "demo", "namespace": "default"},
		"spec":       map[string]any{"replicas": int64(3)},
	}}
	children := hooks.NewObjectMap()
	children.EnsureKey("v1", "ConfigMap") // declared, none observed yet: sent as {}

	hook := &v1alpha1.Hook{
		Version: ptr.To(v1alpha1.HookVersionV2),
		Webhook: &v1alpha1.Webhook{URL: ptr.To(srv.URL + "/sync")},
	}
	client := hookclient.NewClient(hookclient.Options{})
	var resp hooks.CompositeSyncResponse
	err := client.Call(context.Background(), "things", "sync", hook,
		&hooks.CompositeSyncRequest{Parent: parent, Children: children, Related: hooks.NewObjectMap()}, &resp, hookclient.CallOptions{})
	if err != nil {
		fmt.Println("sync failed:", err)
		return
	}
	fmt.Println("status:", resp.Status)
	for _, child := range resp.Children {
		fmt.Println("child:", child.GetKind(), child.GetName())
	}
	// Output:
	// status: map[observedChildren:0]
	// child: ConfigMap demo-config
}
