package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/metactl/metactl/internal/explain"
	"github.com/metactl/metactl/internal/hookrecord"
	"github.com/metactl/metactl/internal/testenv"
)

var env *testenv.Environment

func TestMain(m *testing.M) {
	// The examples' CRDs are installed with the control plane, before
	// kube-controller-manager starts, as well as applied by each test:
	// its garbage collector notices new resources only on a 30-second
	// discovery cycle, and would otherwise take that long to delete the
	// children of a parent that a test deletes shortly after creating
	// its CRD.
	root, err := testenv.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	crds, err := filepath.Glob(filepath.Join(root, "examples", "*", "*", "crd.yaml"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testenv.Main(m, testenv.Options{GarbageCollector: true, ExtraCRDPaths: crds}, &env)
}

var (
	podsGVR       = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	servicesGVR   = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	configmapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// settle bounds each wait for metactl, a hook or the garbage collector to
// react (they take well under a second when the machine is idle).
const settle = 30 * time.Second

func exampleGVR(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "example.metactl.io", Version: "v1", Resource: resource}
}

func repo(t *testing.T, parts ...string) string {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root}, parts...)...)
}

// kubectl runs the control plane's kubectl and fails the test on error.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := env.Kubectl(ctx, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return out
}

// applyExample applies an example's YAML file, with every webhook pointed
// at hookURL, as `metactl dev` does, and returns the file it applied.
func applyExample(t *testing.T, file, hookURL string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for _, doc := range strings.Split(string(data), "\n---") {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		if len(obj) == 0 {
			continue
		}
		if kind := obj["kind"]; kind == "CompositeController" || kind == "DecoratorController" {
			hooks, _, _ := unstructured.NestedMap(obj, "spec", "hooks")
			for name, h := range hooks {
				webhook := h.(map[string]any)["webhook"].(map[string]any)
				path, _ := webhook["path"].(string)
				if path == "" {
					path = "/" + name
				}
				delete(webhook, "service")
				delete(webhook, "path")
				webhook["url"] = hookURL + path
			}
			_ = unstructured.SetNestedMap(obj, hooks, "spec", "hooks")
		}
		out, _ := yaml.Marshal(obj)
		docs = append(docs, string(out))
	}
	edited := filepath.Join(t.TempDir(), filepath.Base(file))
	if err := os.WriteFile(edited, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(t, "apply", "-f", edited)
	return edited
}

// deleteOnCleanup deletes the objects of a YAML file when the test ends.
// Cleanups run last-registered first, so register it after starting the
// processes that should still run while the objects go.
func deleteOnCleanup(t *testing.T, file string, args ...string) {
	// A CRD is waited for: the next test applying it again while it is
	// still terminating would find it deleted after all.
	wait := "--wait=false"
	if data, err := os.ReadFile(file); err == nil && strings.Contains(string(data), "kind: CustomResourceDefinition") {
		wait = "--wait=true"
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		args := append([]string{"delete", "--ignore-not-found", wait, "-f", file}, args...)
		if out, err := env.Kubectl(ctx, args...); err != nil {
			t.Errorf("cleanup: %v\n%s", err, out)
		}
	})
}

// example is one example's hook and a metactl run process for a test, with
// the example's CRD and controller applied.
type example struct {
	dir     string
	hookURL string
	hook    *testenv.Process
	metactl *testenv.Process
}

// startExample runs lang/name's hook (python3 hook.py or node hook.js) on
// a free port and `metactl run` as processes, and applies the example's
// crd.yaml (when it has one) and controller.yaml, with its webhooks
// pointed at the hook. The controller and CRD are deleted when the test
// ends, before the processes are stopped, so that the next test's metactl
// does not run them.
func startExample(t *testing.T, lang, name string) *example {
	t.Helper()
	metactl := testenv.BuildMetactl(t)
	e := &example{dir: repo(t, "examples", lang, name)}
	e.hook, e.hookURL = startHook(t, lang, e.dir)
	e.metactl = testenv.StartProcess(t, metactl, "run", "--allow-loopback-hooks", "--kubeconfig", env.KubeconfigPath,
		"--metrics-addr", "127.0.0.1:0", "--health-addr", "127.0.0.1:0", "--workers", "4", "--discovery-interval", "2s")

	if crd := filepath.Join(e.dir, "crd.yaml"); fileExists(crd) {
		deleteOnCleanup(t, applyExample(t, crd, ""))
	}
	deleteOnCleanup(t, applyExample(t, filepath.Join(e.dir, "controller.yaml"), e.hookURL))
	return e
}

// startHook runs the hook of the example in dir, in language lang
// (python3 hook.py or node hook.js), on a free port, waits until it
// listens and returns it with its URL (no path).
func startHook(t *testing.T, lang, dir string) (*testenv.Process, string) {
	t.Helper()
	interpreter, hookFile := "python3", "hook.py"
	if lang == "js" {
		interpreter, hookFile = "node", "hook.js"
	}
	port := testenv.FreePort(t)
	hook := testenv.StartProcess(t, interpreter, filepath.Join(dir, hookFile), "--port", fmt.Sprint(port))
	waitListening(t, hook, port)
	return hook, fmt.Sprintf("http://127.0.0.1:%d", port)
}

// applySample applies the example's sample.yaml, in namespace ns unless ns
// is empty (then as written), and deletes it when the test ends.
func (e *example) applySample(t *testing.T, ns string) {
	t.Helper()
	file := filepath.Join(e.dir, "sample.yaml")
	args := []string{"apply", "-f", file}
	if ns != "" {
		args = append(args, "-n", ns)
	}
	kubectl(t, args...)
	if ns != "" {
		deleteOnCleanup(t, file, "-n", ns)
	} else {
		deleteOnCleanup(t, file)
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// waitListening waits until p accepts connections on port, failing at once
// if p exits.
func waitListening(t *testing.T, p *testenv.Process, port int) {
	t.Helper()
	var exitErr error
	exited := false
	name := filepath.Base(p.Cmd.Path)
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("%s listening on port %d", name, port), func(ctx context.Context) (bool, error) {
		if exited, exitErr = p.Exited(); exited {
			return true, nil
		}
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err != nil {
			return false, err
		}
		conn.Close()
		return true, nil
	})
	if exited {
		t.Fatalf("%s exited before listening: %v\n%s", name, exitErr, p.Output())
	}
}

func waitFor(t *testing.T, timeout time.Duration, gvr schema.GroupVersionResource, ns, name, what string, check func(*unstructured.Unstructured) bool) {
	t.Helper()
	var last *unstructured.Unstructured
	done := false
	defer func() {
		if !done { // Eventually failed the test
			t.Logf("last seen of %s %s/%s:\n%s", gvr.Resource, ns, name, describe(last))
		}
	}()
	testenv.Eventually(t, timeout, fmt.Sprintf("%s %s/%s: %s", gvr.Resource, ns, name, what), func(ctx context.Context) (bool, error) {
		obj, err := env.Dynamic.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		last = obj
		if apierrors.IsNotFound(err) {
			return check(nil), nil
		}
		if err != nil {
			return false, ignoreDeadline(ctx, err)
		}
		return check(obj), nil
	})
	done = true
}

// describe renders an object for a failure message, without its managed
// fields and last-applied annotation.
func describe(o *unstructured.Unstructured) string {
	if o == nil {
		return "(none)"
	}
	o = o.DeepCopy()
	o.SetManagedFields(nil)
	if a := o.GetAnnotations(); a != nil {
		delete(a, "metacontroller.k8s.io/last-applied-configuration")
		delete(a, "kubectl.kubernetes.io/last-applied-configuration")
		o.SetAnnotations(a)
	}
	out, err := yaml.Marshal(o.Object)
	if err != nil {
		return err.Error()
	}
	return testenv.LastLines(string(out), 80)
}

// ignoreDeadline drops the error of a request cut short by the end of a
// wait, so that the failure reports the last real state instead.
func ignoreDeadline(ctx context.Context, err error) error {
	if ctx.Err() != nil || strings.Contains(err.Error(), "would exceed context deadline") {
		return nil
	}
	return err
}

// waitGone waits until an object no longer exists.
func waitGone(t *testing.T, timeout time.Duration, gvr schema.GroupVersionResource, ns, name string) {
	t.Helper()
	waitFor(t, timeout, gvr, ns, name, "deleted", func(o *unstructured.Unstructured) bool { return o == nil })
}

// waitList waits until the objects of gvr in ns matching selector satisfy
// check, and returns them.
func waitList(t *testing.T, timeout time.Duration, gvr schema.GroupVersionResource, ns, selector, what string, check func([]unstructured.Unstructured) bool) []unstructured.Unstructured {
	t.Helper()
	var items []unstructured.Unstructured
	done := false
	defer func() {
		if !done { // Eventually failed the test
			var lines []string
			for _, o := range items {
				lines = append(lines, fmt.Sprintf("%s uid=%s labels=%v deleting=%v", o.GetName(), o.GetUID(), o.GetLabels(), o.GetDeletionTimestamp() != nil))
			}
			t.Logf("last seen %s in %q (%s):\n%s", gvr.Resource, ns, selector, strings.Join(lines, "\n"))
		}
	}()
	testenv.Eventually(t, timeout, fmt.Sprintf("%s in %q (%s): %s", gvr.Resource, ns, selector, what), func(ctx context.Context) (bool, error) {
		list, err := env.Dynamic.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, ignoreDeadline(ctx, err)
		}
		items = list.Items
		return check(items), nil
	})
	done = true
	return items
}

func names(items []unstructured.Unstructured) []string {
	out := make([]string, 0, len(items))
	for _, o := range items {
		out = append(out, o.GetName())
	}
	return out
}

// get fetches one object and fails the test if it cannot.
func get(t *testing.T, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	obj, err := env.Dynamic.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

func nestedString(o *unstructured.Unstructured, fields ...string) string {
	if o == nil {
		return ""
	}
	s, _, _ := unstructured.NestedString(o.Object, fields...)
	return s
}

func nestedInt(o *unstructured.Unstructured, fields ...string) int64 {
	if o == nil {
		return -1
	}
	v, found, err := unstructured.NestedFieldNoCopy(o.Object, fields...)
	if !found || err != nil {
		return -1
	}
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	}
	return -1
}

// condition returns the status condition of type typ (nil if none).
func condition(o *unstructured.Unstructured, typ string) map[string]any {
	if o == nil {
		return nil
	}
	conditions, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}

// waitControllerReady waits until a CompositeController or
// DecoratorController reports Ready True.
func waitControllerReady(t *testing.T, resource, name string) {
	t.Helper()
	gvr := schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: resource}
	waitFor(t, time.Minute, gvr, "", name, "Ready True", func(o *unstructured.Unstructured) bool {
		c := condition(o, "Ready")
		return c != nil && c["status"] == "True"
	})
}

// setPodReady sets a Pod's Ready condition through the pods/status
// subresource, as a kubelet would.
func setPodReady(t *testing.T, ns, name string, ready bool) {
	t.Helper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("setting pod %s/%s Ready=%s", ns, name, status), func(ctx context.Context) (bool, error) {
		pod, err := env.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond := corev1.PodCondition{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}
		replaced := false
		for i := range pod.Status.Conditions {
			if pod.Status.Conditions[i].Type == corev1.PodReady {
				pod.Status.Conditions[i], replaced = cond, true
			}
		}
		if !replaced {
			pod.Status.Conditions = append(pod.Status.Conditions, cond)
		}
		_, err = env.Kube.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err == nil, err
	})
}

func podReady(o *unstructured.Unstructured) bool {
	c := condition(o, "Ready")
	return c != nil && c["status"] == "True"
}

func podImage(o *unstructured.Unstructured) string {
	containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "containers")
	if len(containers) == 0 {
		return ""
	}
	image, _ := containers[0].(map[string]any)["image"].(string)
	return image
}

// ownedBy reports whether o has a controller ownerReference to uid.
func ownedBy(o *unstructured.Unstructured, uid string) bool {
	for _, ref := range o.GetOwnerReferences() {
		if string(ref.UID) == uid && ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}

// metactlPod creates, in a namespace of its own, a Pod object labelled as
// the metactl Deployment's Pods are (explain.PodSelector), Running and
// Ready, whose IP is this machine's (podIP): asked for metactl in that
// namespace, the commands find this Pod, and the API server's Pod proxy
// dials this machine. It returns the namespace and the Pod's name. When
// this machine has no address but loopback ones it skips the rest of the
// test (t.Skip), saying the Pod proxy path is not tested; a check that
// failed before still fails the test.
func metactlPod(t *testing.T) (namespace, name string) {
	t.Helper()
	ip := podIP()
	if ip == "" {
		t.Skip("no non-loopback address: the Pod proxy path is not tested")
	}
	namespace = env.CreateNamespace(t)
	selector, err := metav1.ParseToLabelSelector(explain.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pod, err := env.Kube.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "metactl-0", Namespace: namespace, Labels: selector.MatchLabels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "metactl", Image: "metactl"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if _, err := env.Kube.CoreV1().Pods(namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return namespace, pod.Name
}

// helloWorldController describes a CompositeController of the
// hello-world example's HelloWorlds labelled test=<label>, whose sync hook
// is <hookURL>/sync.
type helloWorldController struct {
	name, label, hookURL string
	// record sets the metactl.io/record annotation (hookrecord.Annotation).
	record bool
	// children is the resource of its v1 children: configmaps when empty.
	children string
	// inPlace gives the children the InPlace update strategy.
	inPlace bool
}

// yaml is the controller's manifest.
func (c helloWorldController) yaml() string {
	annotations := "{}"
	if c.record {
		annotations = fmt.Sprintf("{%s: \"true\"}", hookrecord.Annotation)
	}
	children := c.children
	if children == "" {
		children = "configmaps"
	}
	strategy := ""
	if c.inPlace {
		strategy = "\n    updateStrategy:\n      method: InPlace"
	}
	return fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: %s
  annotations: %s
spec:
  generateSelector: true
  parentResource:
    apiVersion: example.metactl.io/v1
    resource: helloworlds
    labelSelector:
      matchLabels:
        test: %s
  childResources:
  - apiVersion: v1
    resource: %s%s
  hooks:
    sync:
      webhook:
        url: %s/sync
`, c.name, annotations, c.label, children, strategy, c.hookURL)
}

// writeManifests writes the manifests, as one multi-document YAML file in
// a temporary folder, and returns its path.
func writeManifests(t *testing.T, docs ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "manifests.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
