package manifests_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

var helloWorlds = schema.GroupVersionResource{Group: "example.metactl.io", Version: "v1", Resource: "helloworlds"}

// helloWorldHook is the sync hook of examples/python/hello-world, in Go:
// one ConfigMap with a greeting for spec.who, and the greeting in status.
func helloWorldHook(w http.ResponseWriter, r *http.Request) {
	var request struct {
		Parent struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				Who string `json:"who"`
			} `json:"spec"`
		} `json:"parent"`
	}
	if r.URL.Path != "/sync" {
		http.NotFound(w, r)
		return
	}
	if err := json.NewDecoder(r.Body).Decode(&request); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	who := request.Parent.Spec.Who
	if who == "" {
		who = "World"
	}
	greeting := "Hello, " + who + "!"
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"status": map[string]any{"greeting": greeting},
		"children": []any{map[string]any{
			"apiVersion": "v1",
			"kind":       "ConfigMap",
			"metadata":   map[string]any{"name": request.Parent.Metadata.Name + "-greeting"},
			"data":       map[string]any{"greeting": greeting},
		}},
	})
}

// deploymentArgs returns the arguments of the container of the Deployment
// among install (what render or renderSharded return), with the metrics
// and health addresses moved to free loopback ports.
func deploymentArgs(t *testing.T, install []*unstructured.Unstructured) (args []string, metricsAddr, healthAddr string) {
	t.Helper()
	d := &appsv1.Deployment{}
	convert(t, find(t, install, "Deployment", namespace, "metactl"), d)
	metricsAddr = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	healthAddr = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
		switch {
		case strings.HasPrefix(arg, "--metrics-addr="):
			arg = "--metrics-addr=" + metricsAddr
		case strings.HasPrefix(arg, "--health-addr="):
			arg = "--health-addr=" + healthAddr
		}
		args = append(args, arg)
	}
	return args, metricsAddr, healthAddr
}

// httpGet returns the status code and body of a GET.
func httpGet(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// runHelloWorld runs the metactl binary with the arguments of the
// Deployment of install (render, or renderSharded: --shard-buckets too),
// leader election in metactl-system included, as the metactl
// ServiceAccount, whose RBAC, with the hello-world ClusterRole aggregated,
// is in place; and checks that it runs the hello-world controller: the
// Lease taken (sharded, its member Lease and a bucket's too), the
// ConfigMap child made, the parent's and the CompositeController's status
// written, an Event recorded, and nothing forbidden on the way.
func runHelloWorld(t *testing.T, install []*unstructured.Unstructured) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	hook := httptest.NewServer(http.HandlerFunc(helloWorldHook))
	t.Cleanup(hook.Close)
	data, err := os.ReadFile(repo(t, "examples", "python", "hello-world", "controller.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cc := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &cc.Object); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedMap(cc.Object, map[string]any{"url": hook.URL + "/sync"}, "spec", "hooks", "sync", "webhook"); err != nil {
		t.Fatal(err)
	}
	ccs := env.Dynamic.Resource(v1alpha1.CompositeControllerResource)
	if cc, err = ccs.Create(ctx, cc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ccs.Delete(ctx, cc.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting CompositeController %s: %v", cc.GetName(), err)
		}
	})

	args, metricsAddr, healthAddr := deploymentArgs(t, install)
	sharded := slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--shard-buckets=") })
	// The test's hook listens on this machine's loopback (in a cluster, a
	// Service), which metactl run refuses by default.
	args = append(args, "--allow-loopback-hooks", "--kubeconfig="+env.ImpersonatingKubeconfig(t, saUser))
	metactl := testenv.StartProcess(t, testenv.BuildMetactl(t), args...)
	// running fails the test at once if metactl has exited: nothing
	// waited for can happen then.
	running := func() error {
		if exited, err := metactl.Exited(); exited {
			t.Fatalf("metactl exited: %v\n%s", err, testenv.LastLines(metactl.Output(), 40))
		}
		return nil
	}

	ns := env.CreateNamespace(t)
	parent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.metactl.io/v1",
		"kind":       "HelloWorld",
		"metadata":   map[string]any{"name": "your-name", "namespace": ns},
		"spec":       map[string]any{"who": "metactl"},
	}}
	if parent, err = env.Dynamic.Resource(helloWorlds).Namespace(ns).Create(ctx, parent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	testenv.Eventually(t, 90*time.Second, "the Lease "+namespace+"/metactl held", func(ctx context.Context) (bool, error) {
		if err := running(); err != nil {
			return false, err
		}
		lease, err := env.Kube.CoordinationV1().Leases(namespace).Get(ctx, "metactl", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "", nil
	})
	if sharded {
		testenv.Eventually(t, 90*time.Second, "a member Lease and a held bucket Lease in "+namespace, func(ctx context.Context) (bool, error) {
			if err := running(); err != nil {
				return false, err
			}
			leases, err := env.Kube.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			member, bucket := false, false
			for _, l := range leases.Items {
				held := l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != ""
				member = member || strings.HasPrefix(l.Name, "metactl-member-")
				bucket = bucket || (strings.HasPrefix(l.Name, "metactl-bucket-") && held)
			}
			return member && bucket, nil
		})
	}
	testenv.Eventually(t, 90*time.Second, "the ConfigMap child of the HelloWorld", func(ctx context.Context) (bool, error) {
		if err := running(); err != nil {
			return false, err
		}
		cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "your-name-greeting", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		owner := metav1.GetControllerOf(cm)
		return owner != nil && owner.UID == parent.GetUID() && cm.Data["greeting"] == "Hello, metactl!", nil
	})
	testenv.Eventually(t, 30*time.Second, "the HelloWorld's status", func(ctx context.Context) (bool, error) {
		got, err := env.Dynamic.Resource(helloWorlds).Namespace(ns).Get(ctx, parent.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		greeting, _, _ := unstructured.NestedString(got.Object, "status", "greeting")
		return greeting == "Hello, metactl!", nil
	})
	testenv.Eventually(t, 30*time.Second, "the CompositeController Ready", func(ctx context.Context) (bool, error) {
		got, err := ccs.Get(ctx, cc.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conditions, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conditions {
			if c, ok := c.(map[string]any); ok && c["type"] == v1alpha1.ConditionReady {
				return c["status"] == string(metav1.ConditionTrue), nil
			}
		}
		return false, nil
	})
	// The CompositeController is cluster-scoped: its Events go to default.
	testenv.Eventually(t, 30*time.Second, "the Started Event of the CompositeController", func(ctx context.Context) (bool, error) {
		events, err := env.Kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.kind": "CompositeController",
			"involvedObject.name": cc.GetName(),
			"reason":              "Started",
		}.String()})
		if err != nil {
			return false, err
		}
		return len(events.Items) > 0, nil
	})
	testenv.Eventually(t, 30*time.Second, "/readyz, /healthz and /metrics served", func(ctx context.Context) (bool, error) {
		for _, url := range []string{"http://" + healthAddr + "/readyz", "http://" + healthAddr + "/healthz", "http://" + metricsAddr + "/metrics"} {
			code, body, err := httpGet(ctx, url)
			if err != nil {
				return false, err
			}
			if code != http.StatusOK {
				return false, fmt.Errorf("GET %s: %d %s", url, code, body)
			}
			if strings.HasSuffix(url, "/metrics") && !strings.Contains(body, "\nmetactl_leader 1\n") {
				return false, fmt.Errorf("GET %s: no metactl_leader 1", url)
			}
		}
		return true, nil
	})

	if err := running(); err != nil {
		t.Fatal(err)
	}
	metactl.Stop(t, syscall.SIGTERM, 30*time.Second)
	for _, line := range strings.Split(metactl.Output(), "\n") {
		// A namespace another test is deleting refuses new objects with a
		// 403 too (NamespaceLifecycle); that is no refusal of the
		// ServiceAccount's permissions.
		if l := strings.ToLower(line); strings.Contains(l, "forbidden") && !strings.Contains(l, "because it is being terminated") {
			t.Errorf("metactl was refused something under the ServiceAccount's permissions:\n%s", metactl.Output())
			break
		}
	}
}

// TestHookCredentialsByName checks the README's advice for hooks'
// Secrets: a Role granting get, list and watch of one Secret by name lets
// the ServiceAccount list and watch it as metactl does (a metadata.name
// field selector), and nothing else.
func TestHookCredentialsByName(t *testing.T) {
	client := impersonatingClient(t)
	applyRBAC(t, client)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := env.CreateNamespace(t)

	var role *rbacv1.Role
	for _, block := range yamlBlocks(t, repo(t, "manifests", "README.md")) {
		r := &rbacv1.Role{}
		if err := yaml.UnmarshalStrict([]byte(block), r); err == nil && r.Kind == "Role" {
			role = r
		}
	}
	if role == nil || len(role.Rules) != 1 || len(role.Rules[0].ResourceNames) != 1 {
		t.Fatalf("manifests/README.md has no Role granting one Secret by name: %+v", role)
	}
	token := role.Rules[0].ResourceNames[0]
	role.Namespace = ns
	if _, err := env.Kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: saName, Namespace: namespace}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{token, "other"} {
		if _, err := env.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			StringData: map[string]string{"token": "secret"},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	secrets := client.CoreV1().Secrets(ns)
	byName := func(name string) metav1.ListOptions {
		return metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}
	}
	testenv.Eventually(t, 30*time.Second, "the ServiceAccount listing Secret "+token+" by name", func(ctx context.Context) (bool, error) {
		list, err := secrets.List(ctx, byName(token))
		if err != nil {
			return false, err
		}
		return len(list.Items) == 1 && list.Items[0].Name == token, nil
	})
	w, err := secrets.Watch(ctx, byName(token))
	if err != nil {
		t.Errorf("watching Secret %s by name: %v", token, err)
	} else {
		w.Stop()
	}
	if _, err := secrets.Get(ctx, token, metav1.GetOptions{}); err != nil {
		t.Errorf("getting Secret %s: %v", token, err)
	}

	for what, try := range map[string]func() error{
		"listing every Secret of the namespace": func() error { _, err := secrets.List(ctx, metav1.ListOptions{}); return err },
		"listing Secret other by name":          func() error { _, err := secrets.List(ctx, byName("other")); return err },
		"getting Secret other":                  func() error { _, err := secrets.Get(ctx, "other", metav1.GetOptions{}); return err },
		"getting Secret " + token + " in metactl-system": func() error {
			_, err := client.CoreV1().Secrets(namespace).Get(ctx, token, metav1.GetOptions{})
			return err
		},
	} {
		if err := try(); !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want Forbidden", what, err)
		}
	}
}
