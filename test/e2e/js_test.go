package e2e

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// TestStatefulSetLikeJS: a CatSet (RollingRecreate over child Pods, status
// check Ready=True) gets its Pods <set>-0..2; after a change of the Pod
// template the rollout moves one Pod at a time to the new template, and
// only once every Pod already moved is Ready (the test plays the kubelet
// and sets Ready through pods/status); the parent's condition Updated is
// False while it runs and True at the end. A watch checks throughout that
// no more than one Pod is ever unavailable. Deleting the CatSet deletes
// its Pods.
func TestStatefulSetLikeJS(t *testing.T) {
	ex := startExample(t, "js", "statefulset-like")
	waitControllerReady(t, "compositecontrollers", "catset")
	ns := env.CreateNamespace(t)
	ex.applySample(t, ns)
	catsets := exampleGVR("catsets")
	uid := string(get(t, catsets, ns, "nginx").GetUID())
	const replicas, oldImage, newImage = 3, "nginx:1.27", "nginx:1.28"
	selector := "example.metactl.io/catset=nginx"

	pods := waitList(t, settle, podsGVR, ns, selector, "nginx-0..2", func(items []unstructured.Unstructured) bool {
		if len(items) != replicas {
			return false
		}
		for _, p := range items {
			if !ownedBy(&p, uid) || podImage(&p) != oldImage || p.GetDeletionTimestamp() != nil {
				return false
			}
		}
		return true
	})
	t.Logf("pods: %v", names(pods))
	for i := range replicas {
		setPodReady(t, ns, fmt.Sprintf("nginx-%d", i), true)
	}
	catsetStatus := func(ready, updated int64) func(*unstructured.Unstructured) bool {
		return func(o *unstructured.Unstructured) bool {
			return o != nil && nestedInt(o, "status", "observedGeneration") == o.GetGeneration() &&
				nestedInt(o, "status", "readyReplicas") == ready && nestedInt(o, "status", "updatedReplicas") == updated
		}
	}
	waitFor(t, settle, catsets, ns, "nginx", "status: 3 ready", catsetStatus(replicas, replicas))
	original := podUIDs(waitList(t, settle, podsGVR, ns, selector, "3 ready pods", func(items []unstructured.Unstructured) bool { return len(items) == replicas }))

	// From here on, a watch checks that at most one Pod is unavailable at
	// any time: an original Pod (old template, same UID) or a Pod on the
	// new template that is Ready counts as available.
	inv := watchAvailability(t, ns, selector, original, oldImage, newImage, replicas)

	kubectl(t, "patch", "-n", ns, "catset", "nginx", "--type", "json", "-p",
		fmt.Sprintf(`[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":%q}]`, newImage))
	for moved := 1; moved <= replicas; moved++ {
		// Exactly `moved` Pods on the new template, the newest not Ready,
		// the others untouched; the controller has seen that state (the
		// hook's counts in status) and reports the rollout as not done.
		var fresh string
		what := fmt.Sprintf("rollout step %d: %d pods on %s, %d original pods on %s", moved, moved, newImage, replicas-moved, oldImage)
		waitList(t, settle, podsGVR, ns, selector, what, func(items []unstructured.Unstructured) bool {
			newPods, oldPods := 0, 0
			fresh = ""
			for _, p := range items {
				switch {
				case p.GetDeletionTimestamp() != nil:
					return false
				case podImage(&p) == newImage:
					newPods++
					if !podReady(&p) {
						fresh = p.GetName()
					}
				case podImage(&p) == oldImage && original[p.GetName()] == string(p.GetUID()):
					oldPods++
				}
			}
			return newPods == moved && oldPods == replicas-moved && fresh != ""
		})
		// While Pods remain to move the condition must say the rollout is not
		// done. After the last move both readings are defensible (metactl
		// waits for the last Pod's checks; metacontroller reports True once
		// every child belongs to the latest revision), so it is not checked.
		waitFor(t, settle, catsets, ns, "nginx", fmt.Sprintf("step %d: status %d ready, %d updated, condition Updated False while pods remain", moved, replicas-1, moved), func(o *unstructured.Unstructured) bool {
			c := condition(o, "Updated")
			return catsetStatus(replicas-1, int64(moved))(o) && c != nil && (moved == replicas || c["status"] == "False")
		})
		if c := condition(get(t, catsets, ns, "nginx"), "Updated"); c != nil {
			t.Logf("step %d: moved %s; Updated=%v %v: %v", moved, fresh, c["status"], c["reason"], c["message"])
		}
		if violation := inv.violation(); violation != "" {
			t.Fatalf("step %d: %s", moved, violation)
		}
		setPodReady(t, ns, fresh, true)
	}
	waitFor(t, settle, catsets, ns, "nginx", "rollout done: 3 ready, 3 updated, condition Updated True", func(o *unstructured.Unstructured) bool {
		c := condition(o, "Updated")
		return catsetStatus(replicas, replicas)(o) && c != nil && c["status"] == "True"
	})
	inv.stop()
	if violation := inv.violation(); violation != "" {
		t.Fatal(violation)
	}

	kubectl(t, "delete", "-n", ns, "catset", "nginx", "--wait=false")
	waitList(t, settle, podsGVR, ns, selector, "no pods after deleting the CatSet", func(items []unstructured.Unstructured) bool { return len(items) == 0 })
	ex.metactl.Stop(t, syscall.SIGTERM, 30*time.Second)
}

// availability watches Pods and records the first moment more than one of
// them is unavailable.
type availability struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	first string
}

func watchAvailability(t *testing.T, ns, selector string, original map[string]string, oldImage, newImage string, replicas int) *availability {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a := &availability{cancel: cancel, done: make(chan struct{})}
	list, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	w, err := env.Kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: list.ResourceVersion})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	pods := map[string]*corev1.Pod{}
	for i := range list.Items {
		pods[list.Items[i].Name] = &list.Items[i]
	}
	go func() {
		defer close(a.done)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					if ctx.Err() == nil {
						a.record("the watch of pods ended early")
					}
					return
				}
				pod, isPod := ev.Object.(*corev1.Pod)
				if !isPod {
					continue
				}
				if ev.Type == watch.Deleted {
					delete(pods, pod.Name)
				} else {
					pods[pod.Name] = pod
				}
				available, states := 0, map[string]string{}
				for name, p := range pods {
					ready := false
					for _, c := range p.Status.Conditions {
						ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
					}
					image := p.Spec.Containers[0].Image
					ok := p.DeletionTimestamp == nil &&
						((image == oldImage && types.UID(original[name]) == p.UID) || (image == newImage && ready))
					if ok {
						available++
					}
					states[name] = fmt.Sprintf("%s ready=%v available=%v", image, ready, ok)
				}
				if replicas-available > 1 {
					a.record(fmt.Sprintf("%d of %d pods unavailable at once (after %s %s): %v", replicas-available, replicas, ev.Type, pod.Name, states))
				}
			}
		}
	}()
	t.Cleanup(a.stop)
	return a
}

func (a *availability) record(s string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.first == "" {
		a.first = s
	}
}

func (a *availability) violation() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.first
}

func (a *availability) stop() {
	a.cancel()
	<-a.done
}

// TestBlueGreenJS: a BlueGreenDeployment starts blue, with its Service
// selecting the blue Pods; a change of the Pod template brings up green
// Pods next to the blue ones, and the Service switches to green only once
// every green Pod is Ready, after which the blue Pods are deleted.
// Deleting the parent deletes the Pods and the Service.
func TestBlueGreenJS(t *testing.T) {
	ex := startExample(t, "js", "blue-green")
	waitControllerReady(t, "compositecontrollers", "blue-green")
	ns := env.CreateNamespace(t)
	ex.applySample(t, ns)
	deployments := exampleGVR("bluegreendeployments")
	uid := string(get(t, deployments, ns, "web").GetUID())
	const replicas = 2

	colorPods := func(color, image string, ready int) func([]unstructured.Unstructured) bool {
		return func(items []unstructured.Unstructured) bool {
			n, r := 0, 0
			for _, p := range items {
				if p.GetLabels()["example.metactl.io/color"] != color {
					continue
				}
				if !ownedBy(&p, uid) || podImage(&p) != image || p.GetDeletionTimestamp() != nil {
					return false
				}
				n++
				if podReady(&p) {
					r++
				}
			}
			return n == replicas && r == ready
		}
	}
	serviceSelects := func(color string) func(*unstructured.Unstructured) bool {
		return func(o *unstructured.Unstructured) bool {
			if o == nil || !ownedBy(o, uid) {
				return false
			}
			selector, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector")
			return selector["example.metactl.io/color"] == color && selector["example.metactl.io/bluegreen"] == "web"
		}
	}
	activeStatus := func(active string, readyOf map[string]int64) func(*unstructured.Unstructured) bool {
		return func(o *unstructured.Unstructured) bool {
			if o == nil || nestedString(o, "status", "active") != active || nestedInt(o, "status", "observedGeneration") != o.GetGeneration() {
				return false
			}
			colors, _, _ := unstructured.NestedMap(o.Object, "status", "colors")
			if len(colors) != len(readyOf) {
				return false
			}
			for color, ready := range readyOf {
				if nestedInt(o, "status", "colors", color, "ready") != ready {
					return false
				}
			}
			return true
		}
	}

	waitList(t, settle, podsGVR, ns, "", "2 blue pods", colorPods("blue", "nginx:1.26", 0))
	waitFor(t, settle, servicesGVR, ns, "web", "selects blue", serviceSelects("blue"))
	waitFor(t, settle, deployments, ns, "web", "status: blue active", activeStatus("blue", map[string]int64{"blue": 0}))

	kubectl(t, "patch", "-n", ns, "bluegreendeployment", "web", "--type", "json", "-p",
		`[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:1.27"}]`)
	waitList(t, settle, podsGVR, ns, "", "2 green pods next to 2 blue ones", func(items []unstructured.Unstructured) bool {
		return colorPods("green", "nginx:1.27", 0)(items) && colorPods("blue", "nginx:1.26", 0)(items)
	})
	waitFor(t, settle, deployments, ns, "web", "status: blue active, green rolling out", activeStatus("blue", map[string]int64{"blue": 0, "green": 0}))
	if !serviceSelects("blue")(get(t, servicesGVR, ns, "web")) {
		t.Fatal("the Service left blue before any green pod was Ready")
	}

	setPodReady(t, ns, "web-green-0", true)
	waitFor(t, settle, deployments, ns, "web", "status: 1 green pod ready, still blue", activeStatus("blue", map[string]int64{"blue": 0, "green": 1}))
	if !serviceSelects("blue")(get(t, servicesGVR, ns, "web")) {
		t.Fatal("the Service left blue with one green pod not Ready")
	}

	setPodReady(t, ns, "web-green-1", true)
	waitFor(t, settle, servicesGVR, ns, "web", "switched to green", serviceSelects("green"))
	waitFor(t, settle, deployments, ns, "web", "status: green active", activeStatus("green", map[string]int64{"green": 2}))
	waitList(t, settle, podsGVR, ns, "", "blue pods gone, green ones kept", func(items []unstructured.Unstructured) bool {
		return len(items) == replicas && colorPods("green", "nginx:1.27", replicas)(items)
	})

	kubectl(t, "delete", "-n", ns, "bluegreendeployment", "web", "--wait=false")
	waitList(t, settle, podsGVR, ns, "", "no pods after deleting the parent", func(items []unstructured.Unstructured) bool { return len(items) == 0 })
	waitGone(t, settle, servicesGVR, ns, "web")
	ex.metactl.Stop(t, syscall.SIGTERM, 30*time.Second)
}
