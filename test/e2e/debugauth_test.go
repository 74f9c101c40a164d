package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/metactl/metactl/internal/explain"
	"github.com/metactl/metactl/internal/testenv"
)

// tokenKubeconfig creates the ServiceAccount namespace/name, bound to a
// Role in each namespace of rules (namespace → rules), and writes a copy
// of the control plane's kubeconfig whose users authenticate with a token
// of that account (no client certificate); it returns the path and the
// token.
func tokenKubeconfig(t *testing.T, namespace, name string, rules map[string][]rbacv1.PolicyRule) (string, string) {
	t.Helper()
	ctx := context.Background()
	if _, err := env.Kube.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for ns, rs := range rules {
		role := "debugauth-" + name
		if _, err := env.Kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: rs}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := env.Kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := env.Kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(env.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range cfg.AuthInfos {
		u.ClientCertificate, u.ClientCertificateData, u.ClientKey, u.ClientKeyData = "", nil, "", nil
		u.Impersonate, u.Token = "", tr.Status.Token
	}
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path, tr.Status.Token
}

// TestDebugEndpointsAuthenticated runs metactl run as shipped (the guard
// of its debug endpoints on) and checks, as a process: /metrics answers
// without credentials (as the ServiceMonitor scrapes it); /debug/explain
// and /debug/record answer 401 without a token and 403 to a user who may
// not read what they ask; and `metactl explain` through the API server's
// Pod proxy, with a kubeconfig holding only a token, gets its answer: the
// token reaches metactl past the proxy (debugauth.TokenHeader), is
// reviewed, and the user may get the object.
func TestDebugEndpointsAuthenticated(t *testing.T) {
	ns := env.CreateNamespace(t)
	metactl := testenv.BuildMetactl(t)
	if f, err := os.Open(metactl); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	port := testenv.FreePort(t)
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	p := testenv.StartProcess(t, metactl, "run", "--allow-loopback-hooks", "--kubeconfig", env.KubeconfigPath,
		"--metrics-addr", fmt.Sprintf(":%d", port), "--health-addr", "127.0.0.1:0", "--workers", "2", "--cache-resync", "0")
	waitListening(t, p, port)

	get := func(path, token string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, endpoint+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("/metrics", ""); code != http.StatusOK || !strings.Contains(body, "metactl_") {
		t.Errorf("/metrics without a token: %d, want 200 with metactl's metrics", code)
	}
	explainHealthy := explain.Path + "?group=example.metactl.io&version=v1&resource=helloworlds&namespace=" + ns + "&name=healthy"
	for path, what := range map[string]string{explainHealthy: "explain", "/debug/record?controller=compositecontroller/x": "record"} {
		if code, body := get(path, ""); code != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d %q, want 401", what, code, body)
		}
	}

	hook := explainHook(t)
	deleteOnCleanup(t, applyExample(t, repo(t, "examples", "python", "hello-world", "crd.yaml"), ""))
	controllerName := "debugauth-" + ns
	manifest := writeManifests(t, helloWorldController{name: controllerName, label: "debugauth", hookURL: hook.URL}.yaml())
	kubectl(t, "apply", "-f", manifest)
	deleteOnCleanup(t, manifest)
	parent := filepath.Join(t.TempDir(), "parent.yaml")
	if err := os.WriteFile(parent, []byte("apiVersion: example.metactl.io/v1\nkind: HelloWorld\nmetadata:\n  name: healthy\n  labels: {test: debugauth}\nspec:\n  who: debugauth\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, settle, "a HelloWorld created (the CRD served)", func(ctx context.Context) (bool, error) {
		_, err := env.Kubectl(ctx, "apply", "-n", ns, "-f", parent)
		return err == nil, err
	})
	deleteOnCleanup(t, parent, "-n", ns)
	waitFor(t, settle, configmapsGVR, ns, "healthy-greeting", "the parent's child", func(u *unstructured.Unstructured) bool { return u != nil })

	// Through the Pod proxy, as a user with a token who may get the
	// HelloWorld and reach metactl's Pods (the Role metactl-explain's
	// rights), and nothing else.
	podNS, _ := metactlPod(t)
	readerConfig, _ := tokenKubeconfig(t, ns, "reader", map[string][]rbacv1.PolicyRule{
		ns:    {{APIGroups: []string{"example.metactl.io"}, Resources: []string{"helloworlds"}, Verbs: []string{"get"}}},
		podNS: {{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}, {APIGroups: []string{""}, Resources: []string{"pods/proxy"}, Verbs: []string{"get"}}},
	})
	controllerLine := "Controller:   CompositeController " + controllerName + " (parent)"
	testenv.Eventually(t, settle, "metactl explain through the Pod proxy, with a token", func(context.Context) (bool, error) {
		out, err := explainRun(metactl, "explain", "helloworlds/healthy", "-n", ns, "--kubeconfig", readerConfig,
			"--metactl-namespace", podNS, "--metactl-port", fmt.Sprint(port))
		if err != nil {
			return false, fmt.Errorf("%w: %s", err, out)
		}
		return strings.Contains(out, controllerLine), nil
	})

	// A user whose token the API server authenticates, but who may read
	// neither the HelloWorld nor ConfigMaps everywhere.
	_, stranger := tokenKubeconfig(t, ns, "stranger", nil)
	if code, body := get(explainHealthy, stranger); code != http.StatusForbidden || !strings.Contains(body, "may not get example.metactl.io/helloworlds healthy in namespace "+ns) {
		t.Errorf("explain as a stranger: %d %q, want 403 naming what it may not do", code, body)
	}
	if code, body := get("/debug/record?controller=compositecontroller/"+controllerName, stranger); code != http.StatusForbidden || !strings.Contains(body, "may not list") {
		t.Errorf("record as a stranger: %d %q, want 403", code, body)
	}
}
