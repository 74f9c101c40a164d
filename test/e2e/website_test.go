package e2e

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/testenv"
)

var deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// TestWebsitePython runs the website example of docs/first-controller.md:
// a Website (generateSelector) gets a Deployment and a Service, labelled
// with its UID and owned by it; its status reports the observed
// Deployment's readyReplicas; a change of the spec reaches both children
// (InPlace), and the status follows; deleting the Website deletes them.
func TestWebsitePython(t *testing.T) {
	ex := startExample(t, "python", "website")
	waitControllerReady(t, "compositecontrollers", "website")
	ns := env.CreateNamespace(t)
	ex.applySample(t, ns)
	websites := exampleGVR("websites")
	uid := string(get(t, websites, ns, "my-site").GetUID())
	const siteLabel = "example.metactl.io/website"

	ours := func(o *unstructured.Unstructured) bool {
		return o != nil && o.GetDeletionTimestamp() == nil && ownedBy(o, uid) && o.GetLabels()["controller-uid"] == uid
	}
	deployment := func(replicas int64, image string, port int64) func(*unstructured.Unstructured) bool {
		return func(o *unstructured.Unstructured) bool {
			if !ours(o) || nestedInt(o, "spec", "replicas") != replicas || podImage(templateOf(o)) != image {
				return false
			}
			selector, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector", "matchLabels")
			podLabels, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
			return selector[siteLabel] == "my-site" && podLabels[siteLabel] == "my-site" &&
				containerPort(o) == port
		}
	}
	service := func(port int64) func(*unstructured.Unstructured) bool {
		return func(o *unstructured.Unstructured) bool {
			if !ours(o) {
				return false
			}
			selector, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector")
			ports, _, _ := unstructured.NestedSlice(o.Object, "spec", "ports")
			if selector[siteLabel] != "my-site" || len(ports) != 1 {
				return false
			}
			p := &unstructured.Unstructured{Object: ports[0].(map[string]any)}
			return nestedInt(p, "port") == port && nestedInt(p, "targetPort") == port
		}
	}
	status := func(replicas, ready int64, url string) func(*unstructured.Unstructured) bool {
		return func(o *unstructured.Unstructured) bool {
			return o != nil &&
				nestedInt(o, "status", "observedGeneration") == o.GetGeneration() &&
				nestedInt(o, "status", "replicas") == replicas &&
				(ready < 0 || nestedInt(o, "status", "readyReplicas") == ready) &&
				nestedString(o, "status", "url") == url
		}
	}

	waitFor(t, settle, deploymentsGVR, ns, "my-site", "2 replicas of nginx:1.27 on port 80", deployment(2, "nginx:1.27", 80))
	waitFor(t, settle, servicesGVR, ns, "my-site", "port 80 to the site's Pods", service(80))
	url := fmt.Sprintf("http://my-site.%s.svc:80", ns)
	waitFor(t, settle, websites, ns, "my-site", "status: 2 replicas and the URL", status(2, -1, url))

	// The hook reads readyReplicas from the Deployment. When no Deployment
	// controller has touched it (the test's control plane runs only the
	// garbage collector), play that controller and report two ready
	// replicas; on a control plane that runs Pods, they become ready.
	if _, found, _ := unstructured.NestedInt64(get(t, deploymentsGVR, ns, "my-site").Object, "status", "observedGeneration"); !found {
		setReadyReplicas(t, ns, "my-site", 2)
	}
	waitFor(t, settle, websites, ns, "my-site", "status: 2 of 2 ready", status(2, 2, url))

	kubectl(t, "patch", "-n", ns, "website", "my-site", "--type", "merge", "-p",
		`{"spec":{"replicas":3,"image":"nginx:1.28","port":8080}}`)
	waitFor(t, settle, deploymentsGVR, ns, "my-site", "updated in place to 3 replicas of nginx:1.28 on 8080", deployment(3, "nginx:1.28", 8080))
	waitFor(t, settle, servicesGVR, ns, "my-site", "updated in place to port 8080", service(8080))
	waitFor(t, settle, websites, ns, "my-site", "status: 3 replicas, port 8080",
		status(3, -1, fmt.Sprintf("http://my-site.%s.svc:8080", ns)))
	waitReadyMirrored(t, ns, "my-site")

	kubectl(t, "delete", "-n", ns, "website", "my-site", "--wait=false")
	waitGone(t, settle, deploymentsGVR, ns, "my-site")
	waitGone(t, settle, servicesGVR, ns, "my-site")
	ex.metactl.Stop(t, syscall.SIGTERM, 30*time.Second)
}

// waitReadyMirrored waits until the Website's status.readyReplicas is the
// Deployment's (0 when it has none), both read in the same poll.
func waitReadyMirrored(t *testing.T, ns, name string) {
	t.Helper()
	testenv.Eventually(t, settle, fmt.Sprintf("website %s/%s: readyReplicas of its Deployment", ns, name), func(ctx context.Context) (bool, error) {
		site, err := env.Dynamic.Resource(exampleGVR("websites")).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, ignoreDeadline(ctx, err)
		}
		dep, err := env.Dynamic.Resource(deploymentsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, ignoreDeadline(ctx, err)
		}
		want, _, _ := unstructured.NestedInt64(dep.Object, "status", "readyReplicas")
		if got := nestedInt(site, "status", "readyReplicas"); got != want {
			return false, fmt.Errorf("the Website says %d, its Deployment %d", got, want)
		}
		return true, nil
	})
}

// templateOf returns a Deployment's Pod template as an object, for
// podImage.
func templateOf(o *unstructured.Unstructured) *unstructured.Unstructured {
	template, _, _ := unstructured.NestedMap(o.Object, "spec", "template")
	return &unstructured.Unstructured{Object: template}
}

// containerPort returns the first containerPort of a Deployment's first
// container, or -1.
func containerPort(o *unstructured.Unstructured) int64 {
	containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	if len(containers) == 0 {
		return -1
	}
	ports, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "ports")
	if len(ports) == 0 {
		return -1
	}
	return nestedInt(&unstructured.Unstructured{Object: ports[0].(map[string]any)}, "containerPort")
}

// setReadyReplicas sets a Deployment's status.readyReplicas through the
// deployments/status subresource, as the Deployment controller would.
func setReadyReplicas(t *testing.T, ns, name string, ready int64) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"status":{"replicas":%d,"readyReplicas":%d,"availableReplicas":%d}}`, ready, ready, ready)
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("setting deployment %s/%s readyReplicas=%d", ns, name, ready), func(ctx context.Context) (bool, error) {
		_, err := env.Dynamic.Resource(deploymentsGVR).Namespace(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
		return err == nil, err
	})
}
