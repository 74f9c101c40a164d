package e2e

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/testenv"
)

// TestIndexedJobPython: an IndexedJob (generateSelector) gets one Pod per
// index, named <job>-<index> with the index in a label, an annotation and
// JOB_COMPLETION_INDEX; the status counts them by phase; scaling down and
// up deletes and creates the right indexes and keeps the others; deleting
// the job deletes its Pods.
func TestIndexedJobPython(t *testing.T) {
	ex := startExample(t, "python", "indexed-job")
	waitControllerReady(t, "compositecontrollers", "indexed-job")
	ns := env.CreateNamespace(t)
	ex.applySample(t, ns)
	jobs := exampleGVR("indexedjobs")
	uid := string(get(t, jobs, ns, "print-index").GetUID())

	// indexedPods checks that the namespace holds exactly the Pods
	// print-index-0..n-1, each made for its index and owned by the job.
	indexedPods := func(n int) func([]unstructured.Unstructured) bool {
		return func(items []unstructured.Unstructured) bool {
			if len(items) != n {
				return false
			}
			for _, pod := range items {
				if pod.GetDeletionTimestamp() != nil {
					return false
				}
				var i int
				if _, err := fmt.Sscanf(pod.GetName(), "print-index-%d", &i); err != nil || i < 0 || i >= n {
					return false
				}
				index := strconv.Itoa(i)
				if pod.GetLabels()["example.metactl.io/job-index"] != index ||
					pod.GetAnnotations()["example.metactl.io/job-index"] != index ||
					pod.GetLabels()["controller-uid"] != uid || !ownedBy(&pod, uid) ||
					containerEnv(&pod, "JOB_COMPLETION_INDEX") != index {
					return false
				}
			}
			return true
		}
	}
	jobStatus := func(active, succeeded, completions int64) func(*unstructured.Unstructured) bool {
		return func(o *unstructured.Unstructured) bool {
			return o != nil &&
				nestedInt(o, "status", "observedGeneration") == o.GetGeneration() &&
				nestedInt(o, "status", "active") == active &&
				nestedInt(o, "status", "succeeded") == succeeded &&
				nestedInt(o, "status", "completions") == completions
		}
	}

	before := podUIDs(waitList(t, settle, podsGVR, ns, "", "print-index-0..2", indexedPods(3)))
	waitFor(t, settle, jobs, ns, "print-index", "status: 3 active of 3", jobStatus(3, 0, 3))

	// No kubelet runs here: play one, and let index 1 succeed.
	setPodPhase(t, ns, "print-index-1", corev1.PodSucceeded)
	waitFor(t, settle, jobs, ns, "print-index", "status: 2 active, 1 succeeded", jobStatus(2, 1, 3))

	kubectl(t, "patch", "-n", ns, "indexedjob", "print-index", "--type", "merge", "-p", `{"spec":{"completions":2}}`)
	after := podUIDs(waitList(t, settle, podsGVR, ns, "", "scaled down to print-index-0..1", indexedPods(2)))
	waitFor(t, settle, jobs, ns, "print-index", "status: 1 active, 1 succeeded of 2", jobStatus(1, 1, 2))
	for _, name := range []string{"print-index-0", "print-index-1"} {
		if after[name] != before[name] {
			t.Errorf("scaling down replaced %s (uid %s → %s), want it kept", name, before[name], after[name])
		}
	}

	kubectl(t, "patch", "-n", ns, "indexedjob", "print-index", "--type", "merge", "-p", `{"spec":{"completions":4}}`)
	after = podUIDs(waitList(t, settle, podsGVR, ns, "", "scaled up to print-index-0..3", indexedPods(4)))
	waitFor(t, settle, jobs, ns, "print-index", "status: 3 active, 1 succeeded of 4", jobStatus(3, 1, 4))
	if after["print-index-1"] != before["print-index-1"] {
		t.Errorf("scaling up replaced print-index-1, want it kept")
	}

	kubectl(t, "delete", "-n", ns, "indexedjob", "print-index", "--wait=false")
	waitList(t, settle, podsGVR, ns, "", "no pods after deleting the job", func(items []unstructured.Unstructured) bool { return len(items) == 0 })
	ex.metactl.Stop(t, syscall.SIGTERM, 30*time.Second)
}

func podUIDs(items []unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	for _, o := range items {
		out[o.GetName()] = string(o.GetUID())
	}
	return out
}

// containerEnv returns the value of variable name in every container of
// pod, or "" unless all containers agree.
func containerEnv(pod *unstructured.Unstructured, name string) string {
	containers, _, _ := unstructured.NestedSlice(pod.Object, "spec", "containers")
	value := ""
	for i, c := range containers {
		env, _, _ := unstructured.NestedSlice(c.(map[string]any), "env")
		found := ""
		for _, e := range env {
			if m := e.(map[string]any); m["name"] == name {
				found, _ = m["value"].(string)
			}
		}
		if found == "" || (i > 0 && found != value) {
			return ""
		}
		value = found
	}
	return value
}

// setPodPhase sets a Pod's phase through the pods/status subresource.
func setPodPhase(t *testing.T, ns, name string, phase corev1.PodPhase) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("setting pod %s/%s phase %s", ns, name, phase), func(ctx context.Context) (bool, error) {
		pod, err := env.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod.Status.Phase = phase
		_, err = env.Kube.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err == nil, err
	})
}

// TestPropagationPython: a cluster-scoped ConfigMapPropagation whose
// customize hook declares the source ConfigMap (namespace + names) and the
// labelled namespaces (labelSelector) as related objects copies the source
// into each selected namespace; a change of the source updates the copies;
// labelling a namespace gives it a copy and unlabelling one removes it;
// deleting the parent deletes the copies and leaves the source.
func TestPropagationPython(t *testing.T) {
	ex := startExample(t, "python", "propagation")
	waitControllerReady(t, "compositecontrollers", "configmap-propagation")
	ex.applySample(t, "")
	propagations := exampleGVR("configmappropagations")
	uid := string(get(t, propagations, "", "app-settings").GetUID())

	copyHas := func(data map[string]string) func(*unstructured.Unstructured) bool {
		return func(o *unstructured.Unstructured) bool {
			if o == nil || !ownedBy(o, uid) || o.GetAnnotations()["example.metactl.io/propagated-from"] != "default/app-settings" {
				return false
			}
			got, _, _ := unstructured.NestedStringMap(o.Object, "data")
			return reflect.DeepEqual(got, data)
		}
	}
	blue := map[string]string{"color": "blue", "log-level": "info"}
	for _, ns := range []string{"team-a", "team-b"} {
		waitFor(t, settle, configmapsGVR, ns, "app-settings", "a copy of default/app-settings", copyHas(blue))
	}
	waitFor(t, settle, propagations, "", "app-settings", "status: team-a, team-b", func(o *unstructured.Unstructured) bool {
		if o == nil {
			return false
		}
		targets, _, _ := unstructured.NestedStringSlice(o.Object, "status", "targetNamespaces")
		found, _, _ := unstructured.NestedBool(o.Object, "status", "sourceFound")
		return found && slices.Equal(targets, []string{"team-a", "team-b"}) && nestedInt(o, "status", "copies") == 2
	})
	// The hook has seen both namespaces and both copies: team-c, not
	// selected, has none.
	if _, err := env.Kube.CoreV1().ConfigMaps("team-c").Get(context.Background(), "app-settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("team-c is not selected but has a copy (err %v)", err)
	}

	// A change of the source (a related object) reaches every copy.
	kubectl(t, "patch", "configmap", "app-settings", "-n", "default", "--type", "merge", "-p", `{"data":{"color":"green"}}`)
	green := map[string]string{"color": "green", "log-level": "info"}
	for _, ns := range []string{"team-a", "team-b"} {
		waitFor(t, settle, configmapsGVR, ns, "app-settings", "the copy follows the source", copyHas(green))
	}

	// A newly labelled namespace (a related object too) gets a copy; an
	// unlabelled one loses it. Subtests, so that a failure here still
	// lets the deletion below be checked.
	fresh := env.CreateNamespace(t)
	t.Run("labelled namespace gets a copy", func(t *testing.T) {
		kubectl(t, "label", "namespace", fresh, "example.metactl.io/app-settings=true")
		waitFor(t, settle, configmapsGVR, fresh, "app-settings", "a copy in the newly labelled namespace", copyHas(green))
	})
	t.Run("unlabelled namespace loses its copy", func(t *testing.T) {
		kubectl(t, "label", "namespace", "team-b", "example.metactl.io/app-settings-")
		waitGone(t, settle, configmapsGVR, "team-b", "app-settings")
	})

	kubectl(t, "delete", "configmappropagation", "app-settings", "--wait=false")
	for _, ns := range []string{"team-a", fresh} {
		waitGone(t, settle, configmapsGVR, ns, "app-settings")
	}
	if get(t, configmapsGVR, "default", "app-settings") == nil {
		t.Error("the source is gone")
	}
	ex.metactl.Stop(t, syscall.SIGTERM, 30*time.Second)
}

// TestServicePerPodPython: a DecoratorController gives a labelled Pod a
// Service (an attachment owned by the Pod) that selects it through a label
// the hook sets on the Pod; a Pod without the label is left alone; a
// change of the Pod's port annotation updates the Service; deleting the
// Pod garbage-collects the Service.
func TestServicePerPodPython(t *testing.T) {
	ex := startExample(t, "python", "service-per-pod")
	waitControllerReady(t, "decoratorcontrollers", "service-per-pod")
	ns := env.CreateNamespace(t)

	// A Pod without the label, created first: it must stay undecorated.
	plain := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "plain", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
	}
	if _, err := env.Kube.CoreV1().Pods(ns).Create(context.Background(), plain, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ex.applySample(t, ns)
	uid := string(get(t, podsGVR, ns, "web-0").GetUID())

	servicePort := func(port int64) func(*unstructured.Unstructured) bool {
		return func(o *unstructured.Unstructured) bool {
			if o == nil || !ownedBy(o, uid) || o.GetAnnotations()["metacontroller.k8s.io/decorator-controller"] != "service-per-pod" {
				return false
			}
			selector, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector")
			ports, _, _ := unstructured.NestedSlice(o.Object, "spec", "ports")
			if !reflect.DeepEqual(selector, map[string]string{"service-per-pod/pod-name": "web-0"}) || len(ports) != 1 {
				return false
			}
			p := &unstructured.Unstructured{Object: ports[0].(map[string]any)}
			return nestedInt(p, "port") == port && nestedInt(p, "targetPort") == port
		}
	}
	waitFor(t, settle, servicesGVR, ns, "web-0", "a Service for web-0 on port 8080, owned by it", servicePort(8080))
	waitFor(t, settle, podsGVR, ns, "web-0", "labelled service-per-pod/pod-name=web-0", func(o *unstructured.Unstructured) bool {
		return o != nil && o.GetLabels()["service-per-pod/pod-name"] == "web-0" && o.GetLabels()["service-per-pod"] == "true"
	})
	if _, err := env.Kube.CoreV1().Services(ns).Get(context.Background(), "plain", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the unlabelled pod got a Service (err %v)", err)
	}
	if p := get(t, podsGVR, ns, "plain"); p.GetLabels()["service-per-pod/pod-name"] != "" {
		t.Errorf("the unlabelled pod was decorated: labels %v", p.GetLabels())
	}

	kubectl(t, "annotate", "-n", ns, "pod", "web-0", "service-per-pod/port=9090", "--overwrite")
	waitFor(t, settle, servicesGVR, ns, "web-0", "the Service follows the annotation to port 9090", servicePort(9090))

	kubectl(t, "delete", "-n", ns, "pod", "web-0", "--wait=false")
	waitGone(t, settle, servicesGVR, ns, "web-0")
	ex.metactl.Stop(t, syscall.SIGTERM, 30*time.Second)
}

// TestV2HookPython: a sync hook declaring version v2 is sent children
// keyed namespace/name even though its parent is namespaced (v1 would key
// them by name); the hook reports the keys it saw in status.childKeys and
// fails on any other shape. An update adds and removes children; deleting
// the parent deletes them.
func TestV2HookPython(t *testing.T) {
	ex := startExample(t, "python", "v2-hook")
	waitControllerReady(t, "compositecontrollers", "configmap-set")
	ns := env.CreateNamespace(t)
	ex.applySample(t, ns)
	sets := exampleGVR("configmapsets")
	uid := string(get(t, sets, ns, "settings").GetUID())

	hasData := func(data map[string]string) func(*unstructured.Unstructured) bool {
		return func(o *unstructured.Unstructured) bool {
			if o == nil || !ownedBy(o, uid) {
				return false
			}
			got, _, _ := unstructured.NestedStringMap(o.Object, "data")
			return reflect.DeepEqual(got, data)
		}
	}
	childKeys := func(keys ...string) func(*unstructured.Unstructured) bool {
		return func(o *unstructured.Unstructured) bool {
			if o == nil {
				return false
			}
			got, _, _ := unstructured.NestedStringSlice(o.Object, "status", "childKeys")
			return nestedInt(o, "status", "observedGeneration") == o.GetGeneration() && slices.Equal(got, keys)
		}
	}
	waitFor(t, settle, configmapsGVR, ns, "settings-frontend", "color blue", hasData(map[string]string{"color": "blue"}))
	waitFor(t, settle, configmapsGVR, ns, "settings-backend", "log-level info", hasData(map[string]string{"log-level": "info"}))
	waitFor(t, settle, sets, ns, "settings", "the hook saw v2 keys", childKeys(ns+"/settings-backend", ns+"/settings-frontend"))

	kubectl(t, "patch", "-n", ns, "configmapset", "settings", "--type", "merge", "-p", `{"spec":{"configMaps":{"backend":null,"cache":{"size":"1Gi"}}}}`)
	waitGone(t, settle, configmapsGVR, ns, "settings-backend")
	waitFor(t, settle, configmapsGVR, ns, "settings-cache", "size 1Gi", hasData(map[string]string{"size": "1Gi"}))
	waitFor(t, settle, sets, ns, "settings", "the hook saw the new v2 keys", childKeys(ns+"/settings-cache", ns+"/settings-frontend"))

	kubectl(t, "delete", "-n", ns, "configmapset", "settings", "--wait=false")
	waitGone(t, settle, configmapsGVR, ns, "settings-frontend")
	waitGone(t, settle, configmapsGVR, ns, "settings-cache")
	ex.metactl.Stop(t, syscall.SIGTERM, 30*time.Second)
}
