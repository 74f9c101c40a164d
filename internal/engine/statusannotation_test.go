package engine

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/pkg/dynamic/discovery"
)

func TestStatusInAnnotation(t *testing.T) {
	for _, c := range []struct {
		apiVersion, kind string
		want             bool
	}{
		{"v1", "Namespace", true},
		{"v1", "ConfigMap", true},
		{"v1", "Service", true},
		{"apps/v1", "Deployment", true},
		{"networking.k8s.io/v1", "NetworkPolicy", true},
		{"example.com/v1", "Thing", false},
		{"metacontroller.k8s.io/v1alpha1", "CompositeController", false},
	} {
		res := &Watched{Resource: &discovery.Resource{APIVersion: c.apiVersion, Kind: c.kind}}
		if got := StatusInAnnotation(res); got != c.want {
			t.Errorf("StatusInAnnotation(%s %s) = %v, want %v", c.apiVersion, c.kind, got, c.want)
		}
	}
}

func TestStatusView(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "x", "annotations": map[string]any{StatusAnnotation: `{"step":"one","n":2}`}},
		"status":   map[string]any{"phase": "Active"},
	}}
	view, err := statusView(obj)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := view.Object["status"].(map[string]any)
	if st["step"] != "one" || st["n"] != int64(2) || st["phase"] != nil {
		t.Errorf("view status = %v, want the annotation's, numbers as the API server's (int64)", st)
	}
	if obj.Object["status"].(map[string]any)["phase"] != "Active" {
		t.Errorf("statusView changed its argument")
	}

	obj.SetAnnotations(map[string]string{StatusAnnotation: "not json"})
	view, err = statusView(obj)
	if err == nil || !strings.Contains(err.Error(), StatusAnnotation) {
		t.Errorf("a bad annotation: err = %v, want one naming the annotation", err)
	}
	if _, ok := view.Object["status"]; ok {
		t.Errorf("a bad annotation gave a status: %v", view.Object["status"])
	}

	obj.SetAnnotations(nil)
	if view, _ = statusView(obj); view.Object["status"] != nil {
		t.Errorf("no annotation gave the real status: %v", view.Object["status"])
	}
}

// TestAccessOfBuiltinObjects: a controller of built-in objects needs no
// right on their status subresource (it never writes it); one of a custom
// resource with a status subresource does.
func TestAccessOfBuiltinObjects(t *testing.T) {
	for _, c := range []struct {
		res        *discovery.Resource
		wantStatus bool
	}{
		{&discovery.Resource{APIVersion: "apps/v1", Name: "deployments", Kind: "Deployment", HasStatus: true}, false},
		{&discovery.Resource{APIVersion: "example.com/v1", Name: "things", Kind: "Thing", HasStatus: true}, true},
	} {
		e := &Engine{controller: &watchingController{watched: []*Watched{{Resource: c.res}}}}
		gotStatus := false
		for _, a := range e.Access() {
			gotStatus = gotStatus || a.Subresource == "status"
		}
		if gotStatus != c.wantStatus {
			t.Errorf("%s: asks for the status subresource: %v, want %v", c.res.Name, gotStatus, c.wantStatus)
		}
	}
}

// watchingController is fakeController syncing the resources of watched.
type watchingController struct {
	fakeController
	watched []*Watched
}

func (k *watchingController) Resources() []*Watched { return k.watched }
