//go:build integration

package manager_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/manager"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// TestManifestsWithEveryFieldRun applies, with kubectl, the manifests
// that set every field of metacontroller's CRDs (pkg/apis testdata; the
// API server keeps every field, as the tests there check), and runs them:
// each controller starts (Ready=True, Running), then is deleted cleanly.
// The credentials the hooks name exist (the DecoratorController decorates
// every namespace: its customize hook is called, and a missing credential
// would be a HookAuthError); the hooks' host does not.
func TestManifestsWithEveryFieldRun(t *testing.T) {
	createCRD(t, "ctl.example.com", "things", "Thing")
	createHookCredentials(t, "things")
	runManager(t, manager.Options{Config: env.Config, Workers: 2, DiscoveryInterval: 500 * time.Millisecond, CredentialNamespaces: []string{"things"}})
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	testdata := filepath.Join(root, "pkg", "apis", "metacontroller", "v1alpha1", "testdata")
	for _, c := range []struct {
		file string
		gvr  schema.GroupVersionResource
	}{
		{"compositecontroller-full.yaml", v1alpha1.CompositeControllerResource},
		{"decoratorcontroller-full.yaml", v1alpha1.DecoratorControllerResource},
	} {
		path := filepath.Join(testdata, c.file)
		// Read here too, so that a changed manifest is not passed over by
		// go test's cache (kubectl reads it in another process).
		if _, err := os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
		if out, err := env.Kubectl(ctx, "apply", "--validate=strict", "-f", path); err != nil {
			t.Fatalf("kubectl apply %s: %v: %s", c.file, err, out)
		}
		client := env.Dynamic.Resource(c.gvr)
		t.Cleanup(func() {
			if err := client.Delete(context.Background(), "every-field", metav1.DeleteOptions{}); err != nil {
				t.Errorf("deleting %s: %v", c.file, err)
				return
			}
			waitGone(t, client, "every-field", 30*time.Second)
		})
		testenv.Eventually(t, 60*time.Second, c.file+" Ready=True (Running)", func(ctx context.Context) (bool, error) {
			obj, err := client.Get(ctx, "every-field", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			var status v1alpha1.ControllerStatus
			if raw, ok := obj.Object["status"].(map[string]any); ok {
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &status); err != nil {
					return false, err
				}
			}
			ready := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionReady)
			if ready != nil && ready.Status != metav1.ConditionTrue {
				t.Logf("%s: Ready=%s %s: %s", c.file, ready.Status, ready.Reason, ready.Message)
			}
			return status.ObservedGeneration == obj.GetGeneration() && ready != nil &&
				ready.Status == metav1.ConditionTrue && ready.Reason == v1alpha1.ReasonRunning, nil
		})
	}
}

// createHookCredentials creates, in namespace (created, and deleted when
// the test ends), the credentials the full manifests' hooks name: a CA
// bundle (ConfigMap and Secret hook-ca), a client certificate (Secret
// hook-client), a token (hook-token) and basic auth (hook-basic).
func createHookCredentials(t *testing.T, namespace string) {
	t.Helper()
	ctx := context.Background()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hooks.example.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))

	namespaces := env.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"})
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": namespace}}}
	if _, err := namespaces.Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = namespaces.Delete(context.Background(), namespace, metav1.DeleteOptions{}) })
	for _, obj := range []struct {
		resource, kind, name string
		data                 map[string]any
	}{
		{"configmaps", "ConfigMap", "hook-ca", map[string]any{"bundle.pem": certPEM}},
		{"secrets", "Secret", "hook-ca", map[string]any{"ca.crt": certPEM}},
		{"secrets", "Secret", "hook-client", map[string]any{"tls.crt": certPEM, "tls.key": keyPEM}},
		{"secrets", "Secret", "hook-token", map[string]any{"token": "t0ken"}},
		{"secrets", "Secret", "hook-basic", map[string]any{"user": "u", "pass": "p"}},
	} {
		field := "data"
		if obj.kind == "Secret" {
			field = "stringData"
		}
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": obj.kind,
			"metadata": map[string]any{"name": obj.name, "namespace": namespace}, field: obj.data}}
		if _, err := env.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: obj.resource}).Namespace(namespace).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}
