//go:build integration

package manager_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/manager"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// recordingHook is a hook server that answers every sync with nothing to
// do and records the Authorization of each request.
type recordingHook struct {
	*httptest.Server
	mu   sync.Mutex
	auth []string
}

func newRecordingHook(t *testing.T, tls bool) *recordingHook {
	h := &recordingHook{}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.auth = append(h.auth, r.Header.Get("Authorization"))
		h.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"children": []any{}, "attachments": []any{}})
	})
	if tls {
		h.Server = httptest.NewTLSServer(handler)
	} else {
		h.Server = httptest.NewServer(handler)
	}
	t.Cleanup(h.Close)
	return h
}

func (h *recordingHook) received() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.auth...)
}

// caPEM is the certificate of a TLS test server, as an inline caBundle.
func (h *recordingHook) caPEM() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: h.Certificate().Raw}))
}

// waitControllerReady waits until the controller object name of resource
// gvr has a Ready condition of status and reason for its generation, and
// returns it.
func waitControllerReady(t *testing.T, gvr schema.GroupVersionResource, name string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	t.Helper()
	var c *metav1.Condition
	testenv.Eventually(t, 60*time.Second, name+" Ready="+string(status)+" ("+reason+")", func(ctx context.Context) (bool, error) {
		obj, err := env.Dynamic.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		var cs v1alpha1.ControllerStatus
		if raw, ok := obj.Object["status"].(map[string]any); ok {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &cs); err != nil {
				return false, err
			}
		}
		c = meta.FindStatusCondition(cs.Conditions, v1alpha1.ConditionReady)
		return cs.ObservedGeneration == obj.GetGeneration() && c != nil && c.Status == status && c.Reason == reason, nil
	})
	return c
}

func createSecret(t *testing.T, ns, name string, data map[string]string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: data}
	if _, err := env.Kube.CoreV1().Secrets(ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createController(t *testing.T, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	created, err := env.Dynamic.Resource(gvr).Create(context.Background(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(gvr).Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{})
	})
	return created
}

// TestCredentialPolicyRefusesControllers: a controller whose hook names a
// Secret in a namespace metactl does not allow (in its webhook, or in the
// endpointConfigs entry of its host), or sends credentials over plain
// http, does not start: Ready=False CredentialNotAllowed or
// InsecureCredentials, a Warning Event, and its hook receives nothing,
// while a controller within the policy syncs the same objects. A manager
// whose options allow the namespace and http runs them all.
func TestCredentialPolicyRefusesControllers(t *testing.T) {
	ctx := context.Background()
	gvr := createCRD(t, "creds.metactl.io", "vaults", "Vault")
	allowedNS := env.CreateNamespace(t)
	otherNS := env.CreateNamespace(t) // another team's: not allowed
	createSecret(t, allowedNS, "hook-token", map[string]string{"token": "allowed-token"})
	createSecret(t, otherNS, "hook-token", map[string]string{"token": "other-teams-token"})
	createSecret(t, otherNS, "hook-basic", map[string]string{"username": "u", "password": "other-teams-password"})

	stop := runManager(t, manager.Options{Config: env.Config, Workers: 2, CredentialNamespaces: []string{allowedNS}})

	composite := func(name string, h *recordingHook, webhook map[string]any) *unstructured.Unstructured {
		webhook["url"] = h.URL + "/sync"
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"parentResource":   map[string]any{"apiVersion": gvr.GroupVersion().String(), "resource": gvr.Resource},
				"childResources":   []any{map[string]any{"apiVersion": "v1", "resource": "configmaps"}},
				"generateSelector": true,
				"hooks":            map[string]any{"sync": map[string]any{"webhook": webhook}},
			},
		}}
	}
	bearer := func(ns string) map[string]any {
		return map[string]any{"secretRef": map[string]any{"name": "hook-token", "namespace": ns}}
	}

	// Allowed: https, the token from an allowed namespace.
	allowedHook := newRecordingHook(t, true)
	createController(t, v1alpha1.CompositeControllerResource, composite("creds-allowed", allowedHook,
		map[string]any{"caBundle": map[string]any{"inline": allowedHook.caPEM()}, "authorization": bearer(allowedNS)}))
	// Refused: the token of another namespace.
	otherHook := newRecordingHook(t, true)
	other := createController(t, v1alpha1.CompositeControllerResource, composite("creds-other-namespace", otherHook,
		map[string]any{"caBundle": map[string]any{"inline": otherHook.caPEM()}, "authorization": bearer(otherNS)}))
	// Refused: a token over plain http.
	plainHook := newRecordingHook(t, false)
	createController(t, v1alpha1.CompositeControllerResource, composite("creds-http", plainHook,
		map[string]any{"authorization": bearer(allowedNS)}))
	// Refused: a DecoratorController whose sync hook takes basicAuth from
	// the endpointConfigs entry of its host, in another namespace.
	decoratorHook := newRecordingHook(t, true)
	createController(t, v1alpha1.DecoratorControllerResource, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
		"metadata": map[string]any{"name": "creds-endpoint-config"},
		"spec": map[string]any{
			"resources": []any{map[string]any{"apiVersion": gvr.GroupVersion().String(), "resource": gvr.Resource}},
			"hooks":     map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": decoratorHook.URL + "/sync"}}},
			"endpointConfigs": []any{map[string]any{"host": strings.TrimPrefix(decoratorHook.URL, "https://"),
				"caBundle":  map[string]any{"inline": decoratorHook.caPEM()},
				"basicAuth": map[string]any{"secretRef": map[string]any{"name": "hook-basic", "namespace": otherNS}}}},
		},
	}})

	c := waitControllerReady(t, v1alpha1.CompositeControllerResource, "creds-other-namespace", metav1.ConditionFalse, v1alpha1.ReasonCredentialNotAllowed)
	for _, want := range []string{"sync hook", "authorization", "Secret " + otherNS + "/hook-token", "add the namespace to --credential-namespaces"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("creds-other-namespace: message %q does not say %q", c.Message, want)
		}
	}
	c = waitControllerReady(t, v1alpha1.CompositeControllerResource, "creds-http", metav1.ConditionFalse, v1alpha1.ReasonInsecureCredentials)
	for _, want := range []string{"sync hook", "authorization", "plain http", "--allow-insecure-credentials"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("creds-http: message %q does not say %q", c.Message, want)
		}
	}
	c = waitControllerReady(t, v1alpha1.DecoratorControllerResource, "creds-endpoint-config", metav1.ConditionFalse, v1alpha1.ReasonCredentialNotAllowed)
	if !strings.Contains(c.Message, "basicAuth: Secret "+otherNS+"/hook-basic") {
		t.Errorf("creds-endpoint-config: message %q does not name the endpointConfigs Secret", c.Message)
	}
	testenv.Eventually(t, 30*time.Second, "a Warning Event CredentialNotAllowed on creds-other-namespace", func(ctx context.Context) (bool, error) {
		evs, err := events(ctx, other.GetUID())
		if err != nil {
			return false, err
		}
		for _, e := range evs {
			if e.Type == corev1.EventTypeWarning && e.Reason == v1alpha1.ReasonCredentialNotAllowed && strings.Contains(e.Message, otherNS+"/hook-token") {
				return true, nil
			}
		}
		return false, nil
	})

	// A parent: the allowed controller syncs it; by then the refused
	// ones, had they started, would have been called too.
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gvr.GroupVersion().String(), "kind": "Vault",
		"metadata": map[string]any{"name": "v1", "namespace": allowedNS}}}
	if _, err := env.Dynamic.Resource(gvr).Namespace(allowedNS).Create(ctx, parent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "the allowed controller's hook called with its token", func(context.Context) (bool, error) {
		got := allowedHook.received()
		return len(got) > 0 && got[0] == "Bearer allowed-token", nil
	})
	waitControllerReady(t, v1alpha1.CompositeControllerResource, "creds-allowed", metav1.ConditionTrue, v1alpha1.ReasonRunning)
	for name, h := range map[string]*recordingHook{"creds-other-namespace": otherHook, "creds-http": plainHook, "creds-endpoint-config": decoratorHook} {
		if got := h.received(); len(got) > 0 {
			t.Errorf("the hook of the refused %s received %d requests (Authorization %q)", name, len(got), got)
		}
	}

	// Another manager, whose options allow the other namespace and http:
	// every controller runs, and each hook gets its credentials.
	stop()
	runManager(t, manager.Options{Config: env.Config, Workers: 2, CredentialNamespaces: []string{allowedNS, otherNS}, AllowInsecureCredentials: true})
	waitControllerReady(t, v1alpha1.CompositeControllerResource, "creds-other-namespace", metav1.ConditionTrue, v1alpha1.ReasonRunning)
	waitControllerReady(t, v1alpha1.CompositeControllerResource, "creds-http", metav1.ConditionTrue, v1alpha1.ReasonRunning)
	waitControllerReady(t, v1alpha1.DecoratorControllerResource, "creds-endpoint-config", metav1.ConditionTrue, v1alpha1.ReasonRunning)
	for _, c := range []struct {
		h    *recordingHook
		want string
	}{{otherHook, "Bearer other-teams-token"}, {plainHook, "Bearer allowed-token"}, {decoratorHook, "Basic dTpvdGhlci10ZWFtcy1wYXNzd29yZA=="}} {
		testenv.Eventually(t, 60*time.Second, "a hook called with "+c.want, func(context.Context) (bool, error) {
			got := c.h.received()
			return len(got) > 0 && got[0] == c.want, nil
		})
	}
}
