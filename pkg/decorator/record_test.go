//go:build integration

package decorator_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/controllertest"
	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/hookrecord"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/decorator"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// TestRecordingOfADecoratorOfSecrets: a DecoratorController of Secrets
// annotated metactl.io/record records its calls under the decorated
// object's resource, namespace and name, with the Secret it is sent (the
// object itself) digested.
func TestRecordingOfADecoratorOfSecrets(t *testing.T) {
	const secret = "decorated-s3cret"
	ns := env.CreateNamespace(t)
	name := testName(t)
	h := newHook(t, func(req *request) any { return map[string]any{"labels": map[string]any{"decorated": "yes"}} })
	shared := controllertest.Get(t, env)
	rec := hookrecord.NewRecorder(hookrecord.RecorderOptions{})
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1",
		"kind":       "DecoratorController",
		"metadata":   map[string]any{"name": name, "annotations": map[string]any{engine.RecordAnnotation: "true"}},
		"spec": map[string]any{
			"resources": []any{map[string]any{"apiVersion": "v1", "resource": "secrets", "labelSelector": map[string]any{"matchLabels": map[string]any{"test": name}}}},
			"hooks":     syncHook(h),
		},
	}}
	c, err := decorator.New(ctx(t), obj, decorator.Options{Client: env.Dynamic, Objects: shared.Objects, Resources: shared.Resources, Informers: shared.Informers,
		Hooks: hookclient.NewClient(hookclient.Options{Tap: rec}), Record: rec, Recorder: shared.Recorder, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	s := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "s", "namespace": ns, "labels": map[string]any{"test": name}},
		"stringData": map[string]any{"password": secret}}}
	if _, err := env.Dynamic.Resource(secretsGVR).Namespace(ns).Create(ctx(t), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var calls []hookrecord.Call
	testenv.Eventually(t, 30*time.Second, "a recorded call", func(context.Context) (bool, error) {
		calls, _ = rec.Calls("decoratorcontroller/" + name)
		return len(calls) > 0, nil
	})
	if c := calls[0]; c.Object != "secrets/"+ns+"/s" || c.Hook != "sync" || c.Code != 200 {
		t.Errorf("call recorded as %s %s %s, code %d", c.Controller, c.Hook, c.Object, c.Code)
	}
	all, _ := json.Marshal(calls)
	if strings.Contains(string(all), secret) || strings.Contains(string(all), base64.StdEncoding.EncodeToString([]byte(secret))) {
		t.Errorf("the decorated Secret's value is recorded:\n%s", all)
	}
	if !strings.Contains(string(all), `"password":"hmac-sha256:`) {
		t.Errorf("the decorated Secret's data is not recorded as digests:\n%s", all)
	}
}
