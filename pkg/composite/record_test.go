//go:build integration

package composite_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/hookrecord"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/composite"
	"github.com/metactl/metactl/pkg/dynamic/secretdigest"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// TestRecordingOptIn: a controller annotated metactl.io/record has its
// hook calls recorded, request and answer, with its Secret child's data
// (stringData in the answer, data in the next request) replaced by
// digests; a controller without the annotation, on the same hook client,
// records nothing.
func TestRecordingOptIn(t *testing.T) {
	const secret = "hunter2-recorded"
	ns := env.CreateNamespace(t)
	h := newTestHook(t, func(req *syncRequest) any {
		return map[string]any{
			"status": map[string]any{"secrets": len(req.Children["Secret.v1"])},
			"children": []any{map[string]any{"apiVersion": "v1", "kind": "Secret",
				"metadata":   map[string]any{"name": req.Parent.GetName() + "-s", "labels": map[string]any{"parent": req.Parent.GetName()}},
				"stringData": map[string]any{"password": secret}}},
		}
	})
	withSecrets := func(spec map[string]any) {
		spec["childResources"] = []any{map[string]any{"apiVersion": "v1", "resource": "secrets", "updateStrategy": map[string]any{"method": "InPlace"}}}
	}
	rec := hookrecord.NewRecorder(hookrecord.RecorderOptions{})
	client := hookclient.NewClient(hookclient.Options{Tap: rec})
	useRecorder := func(o *composite.Options) { o.Hooks, o.Record = client, rec }

	recorded := compositeController(t, h, thingsGVR, withSecrets)
	recorded.SetAnnotations(map[string]string{engine.RecordAnnotation: "true"})
	startController(t, recorded, useRecorder)
	plain := compositeController(t, h, thingsGVR, withSecrets)
	plain.SetName(plain.GetName() + "-plain")
	plain.SetUID(plain.GetUID() + "-plain")
	plain.Object["spec"].(map[string]any)["parentResource"].(map[string]any)["labelSelector"] =
		map[string]any{"matchLabels": map[string]any{"test": testLabel(t) + "-plain"}}
	startController(t, plain, useRecorder)

	newThing(t, thingsGVR, ns, "a", nil)
	plainParent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": thingsGVR.GroupVersion().String(), "kind": "Thing",
		"metadata": map[string]any{"name": "b", "namespace": ns, "labels": map[string]any{"test": testLabel(t) + "-plain"}},
		"spec":     map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"parent": "b"}}}}}
	if _, err := env.Dynamic.Resource(thingsGVR).Namespace(ns).Create(ctx(t), plainParent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Both hooks have seen their Secret child.
	waitFor(t, thingsGVR, ns, "a", "status.secrets 1", func(o *unstructured.Unstructured) bool { return o != nil && statusField(o, "secrets") == int64(1) })
	waitFor(t, thingsGVR, ns, "b", "status.secrets 1", func(o *unstructured.Unstructured) bool { return o != nil && statusField(o, "secrets") == int64(1) })

	id := "compositecontroller/" + recorded.GetName()
	var calls []hookrecord.Call
	testenv.Eventually(t, 30*time.Second, "a recorded call whose request holds the Secret child", func(context.Context) (bool, error) {
		calls, _ = rec.Calls(id)
		for _, c := range calls {
			if strings.Contains(string(c.Request), `"Secret.v1":{"`) {
				return true, nil
			}
		}
		return false, nil
	})
	all, err := json.Marshal(calls)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(all); strings.Contains(s, secret) || strings.Contains(s, base64.StdEncoding.EncodeToString([]byte(secret))) {
		t.Fatalf("a Secret value survives in the recording:\n%s", s)
	}
	if !strings.Contains(string(all), `"password":"`+secretdigest.Salted(secret)) {
		t.Errorf("the answer's stringData is not recorded as its digest:\n%s", all)
	}
	if !strings.Contains(string(all), `"password":"`+secretdigest.Salted(base64.StdEncoding.EncodeToString([]byte(secret)))) {
		t.Errorf("the request's Secret data is not recorded as its digest:\n%s", all)
	}
	c := calls[0]
	if c.Controller != id || c.Hook != "sync" || c.Object != ns+"/a" || c.Code != 200 || len(c.Response) == 0 || c.Time.IsZero() || c.Error != "" {
		t.Errorf("first call recorded as %+v", c)
	}
	if !strings.Contains(string(c.Request), `"name":"a"`) || !strings.Contains(string(c.Response), `"secrets":0`) {
		t.Errorf("first call's request or answer is not the hook's:\n%s\n%s", c.Request, c.Response)
	}
	if got, ok := rec.Calls("compositecontroller/" + plain.GetName()); ok || len(got) > 0 {
		t.Errorf("the controller without %s recorded %d calls", engine.RecordAnnotation, len(got))
	}
	for _, c := range calls {
		if c.Object != ns+"/a" {
			t.Errorf("a call about %s recorded for %s", c.Object, id)
		}
	}
}
