package decorator

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/inmemory"
	"github.com/metactl/metactl/internal/ruletest"
	"github.com/metactl/metactl/pkg/dynamic/children"
)

// More fast twins (no API server) of this package's tagged tests, in the
// style of sync_rules_test.go; each names the tagged test it mirrors.

var ruleClusterThings = schema.GroupVersionResource{Group: "test.metactl.io", Version: "v1", Resource: "clusterthings"}

// clusterThing is the ClusterThing t, labelled decorate=yes.
func clusterThing() *unstructured.Unstructured {
	return inmemory.Object("test.metactl.io/v1", "ClusterThing", "", "t", map[string]string{"decorate": "yes"}, nil)
}

// syncStored is c.SyncOnce of the object of gvr ns/name as the store has
// it now, failing t on an error.
func syncStored(t *testing.T, c *Controller, cluster *ruletest.Cluster, gvr schema.GroupVersionResource, ns, name string) {
	t.Helper()
	obj, _ := cluster.Objects.Get(gvr, ns, name)
	if _, err := c.SyncOnce(t.Context(), obj); err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
}

// TestDecoratorOwnLabelsConvergeInOneSync: a hook that moves a label step
// from none to one to two, and asks for an attachment until it sees step
// two, is given the labels it asked for in the rounds of one sync: the
// label ends at two, the attachment is created and deleted again. Twin of
// TestHookActingOnItsOwnLabelsConverges (fixedpoint_test.go).
func TestDecoratorOwnLabelsConvergeInOneSync(t *testing.T) {
	obj := decorated("target")
	h := ruletest.NewHook(t, func(req map[string]any) any {
		labels, _ := req["object"].(map[string]any)["metadata"].(map[string]any)["labels"].(map[string]any)
		step, _ := labels["step"].(string)
		answer := map[string]any{"labels": map[string]any{"step": map[string]string{"": "one", "one": "two", "two": "two"}[step]}, "attachments": []any{}}
		if step != "two" {
			answer["attachments"] = []any{answerSecret("target-pending")}
		}
		return answer
	})
	c, cluster := syncDecorator(t, h, nil, obj)
	syncStored(t, c, cluster, ruleConfigMaps, "ns", "target")
	if got, _ := cluster.Objects.Get(ruleConfigMaps, "ns", "target"); got.GetLabels()["step"] != "two" {
		t.Errorf("labels %v, want step two", got.GetLabels())
	}
	if n := len(h.Requests()); n != 4 {
		t.Errorf("hook calls = %d, want 4 (one, two, two: the attachment deleted, two again)", n)
	}
	writes := cluster.Writes()
	if !slices.Contains(writes, "create secrets ns/target-pending") || !slices.Contains(writes, "delete secrets ns/target-pending") {
		t.Errorf("writes %v, want the attachment created and deleted again", writes)
	}
}

// TestDecoratorStatusSettlesUnlessIgnored: a hook that moves its status
// step from none to one to two settles in one sync (three calls); with
// ignoreStatusChanges a status alone calls for no other round: one call,
// step one. Twin of TestDecoratorStatusSettlesUnlessIgnored
// (fixedpoint_test.go).
func TestDecoratorStatusSettlesUnlessIgnoredWithoutAServer(t *testing.T) {
	for _, tc := range []struct {
		ignore bool
		calls  int
		step   string
	}{{false, 3, "two"}, {true, 1, "one"}} {
		t.Run(map[bool]string{false: "watched", true: "ignored"}[tc.ignore], func(t *testing.T) {
			h := ruletest.NewHook(t, func(req map[string]any) any {
				st, _ := req["object"].(map[string]any)["status"].(map[string]any)
				step, _ := st["step"].(string)
				return map[string]any{"status": map[string]any{"step": map[string]string{"": "one", "one": "two", "two": "two"}[step]}}
			})
			c, cluster := syncDecorator(t, h, func(dc *unstructured.Unstructured) {
				decorating("test.metactl.io/v1", "clusterthings")(dc)
				dc.Object["spec"].(map[string]any)["resources"].([]any)[0].(map[string]any)["ignoreStatusChanges"] = tc.ignore
			}, clusterThing())
			syncStored(t, c, cluster, ruleClusterThings, "", "t")
			if n := len(h.Requests()); n != tc.calls {
				t.Errorf("hook calls = %d, want %d", n, tc.calls)
			}
			got, _ := cluster.Objects.Get(ruleClusterThings, "", "t")
			if step, _, _ := unstructured.NestedString(got.Object, "status", "step"); step != tc.step {
				t.Errorf("status step %q, want %q", step, tc.step)
			}
		})
	}
}

// TestDecoratorSyncedConditionFirstWriterOwnsIt: of two
// DecoratorControllers that both write the Synced condition on one object,
// one whose hook succeeds and one whose hook fails, the first to write it
// owns it: the other's syncs leave it as it is, naming the first. Twin of
// TestSyncedConditionOfTwoControllers (synced_test.go).
func TestDecoratorSyncedConditionFirstWriterOwnsIt(t *testing.T) {
	cluster := ruletest.NewCluster(ruleServed(t), nil, clusterThing())
	optIn := func(dc *unstructured.Unstructured) {
		decorating("test.metactl.io/v1", "clusterthings")(dc)
		dc.SetAnnotations(map[string]string{engine.SyncedConditionAnnotation: "true"})
	}
	a := startDecorator(t, cluster, "a", ruletest.NewHook(t, func(map[string]any) any { return map[string]any{} }), optIn)
	b := startDecorator(t, cluster, "b", ruletest.NewHook(t, func(map[string]any) any { return "not JSON" }), optIn)
	syncStored(t, a, cluster, ruleClusterThings, "", "t")
	writes := len(cluster.Writes())
	for range 2 {
		obj, _ := cluster.Objects.Get(ruleClusterThings, "", "t")
		if _, err := b.SyncOnce(t.Context(), obj); err == nil {
			t.Fatal("SyncOnce of b's failing hook succeeded")
		}
	}
	if w := cluster.Writes()[writes:]; len(w) != 0 {
		t.Errorf("b's failing syncs wrote %v, want nothing: the condition is a's", w)
	}
	got, _ := cluster.Objects.Get(ruleClusterThings, "", "t")
	conditions, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
	if len(conditions) != 1 || conditions[0].(map[string]any)["status"] != "True" ||
		conditions[0].(map[string]any)["message"] != "synced by decoratorcontroller a" {
		t.Errorf("conditions %v, want a's Synced True alone", conditions)
	}
}

// TestDecoratorInvalidEventRefusesTheWholeAnswer: an answer with an
// invalid Event (a reason with white space) is refused whole: its labels
// are not written, and the sync fails with what is wrong. Twin of
// TestDecoratorInvalidEventRefusesTheAnswer (hookevents_test.go).
func TestDecoratorInvalidEventRefusesTheWholeAnswer(t *testing.T) {
	obj := decorated("target")
	h := ruletest.NewHook(t, func(map[string]any) any {
		return map[string]any{"labels": map[string]any{"decorated": "yes"},
			"events": []any{map[string]any{"type": "Warning", "reason": "Two words"}}}
	})
	c, cluster := syncDecorator(t, h, nil, obj)
	_, err := c.SyncOnce(t.Context(), obj)
	cluster.Refused(t, err, `events[0].reason "Two words": must have no white space`)
}

// TestDecoratorForgedAttachmentInAnotherNamespace: a Secret of another
// namespace that carries this controller's attachment annotation and a
// controller reference to the decorated ConfigMap is not its attachment:
// the hook is not given it, and the sync neither deletes nor updates it.
// Twin of TestForgedAttachmentInAnotherNamespace (scope_test.go).
func TestDecoratorForgedAttachmentInAnotherNamespace(t *testing.T) {
	obj := decorated("target")
	forged := attachment("target-secret", obj)
	forged.SetNamespace("other")
	h := ruletest.NewHook(t, func(map[string]any) any {
		return map[string]any{"attachments": []any{answerSecret("target-secret")}}
	})
	c, cluster := syncDecorator(t, h, nil, obj, forged)
	syncStored(t, c, cluster, ruleConfigMaps, "ns", "target")
	given, _ := h.Requests()[0]["attachments"].(map[string]any)["Secret.v1"].(map[string]any)
	if len(given) != 0 {
		t.Errorf("the hook was given attachments %v, want none", given)
	}
	if got, _ := cluster.Objects.Get(ruleSecrets, "other", "target-secret"); got == nil || got.GetResourceVersion() != forged.GetResourceVersion() {
		t.Errorf("the forged Secret is %v, want it untouched; writes %v", got, cluster.Writes())
	}
	if got, _ := cluster.Objects.Get(ruleSecrets, "ns", "target-secret"); got == nil || metav1.GetControllerOf(got) == nil {
		t.Errorf("the attachment in the object's namespace is %v, want it created", got)
	}
}

// TestDecoratorOnDeleteAttachmentDriftIsReported: an OnDelete attachment
// that differs from the answer is left as it is and reported on the
// object, a Normal ChildNotUpdated Event naming it. Twin of the drift
// part of TestAttachmentWarningsAndOnDeleteDrift (childfeedback_test.go).
func TestDecoratorOnDeleteAttachmentDriftIsReported(t *testing.T) {
	obj := decorated("target")
	h := ruletest.NewHook(t, func(map[string]any) any { return map[string]any{"attachments": []any{answerSecret("kept")}} })
	c, cluster := syncDecorator(t, h, func(dc *unstructured.Unstructured) {
		dc.Object["spec"].(map[string]any)["attachments"] = []any{map[string]any{"apiVersion": "v1", "resource": "secrets", "updateStrategy": map[string]any{"method": "OnDelete"}}}
	}, obj, attachment("kept", obj))
	syncStored(t, c, cluster, ruleConfigMaps, "ns", "target")
	if got, _ := cluster.Objects.Get(ruleSecrets, "ns", "kept"); got == nil || got.GetResourceVersion() != "1" {
		t.Errorf("attachment kept is %v, want it untouched", got)
	}
	events := cluster.Events()
	if len(events) != 1 || !strings.HasPrefix(events[0], "Normal "+children.ReasonChildNotUpdated+" ") || !strings.Contains(events[0], "Secret kept") {
		t.Errorf("events %q, want one Normal %s naming Secret kept", events, children.ReasonChildNotUpdated)
	}
}
