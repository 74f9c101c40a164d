package operations

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/internal/testenv"
)

// apfUser is the user metactl acts as in TestSlowsDownOnTheServersTooManyRequests:
// its requests fall in a priority level of its own.
const apfUser = "metactl-apf-test"

// TestSlowsDownOnTheServersTooManyRequests runs metactl with default flags
// as a user whose requests API Priority and Fairness puts in a priority
// level of 3 seats and a queue of 6 that rejects what it cannot hold (429
// with Retry-After). metactl must slow down to the server's pace: every parent
// converges, the server did reject some of its requests, metactl capped
// its requests in flight, and no sync failed (client-go waits the
// Retry-After and sends again; metactl never overruns that).
func TestSlowsDownOnTheServersTooManyRequests(t *testing.T) {
	ns := env.CreateNamespace(t)
	limitUser(t, apfUser, 1, 6)
	hook, _ := hookServer(t, func(parent *unstructured.Unstructured) map[string]any {
		answer := map[string]any{"children": []any{}}
		for i := range 3 {
			answer["children"] = append(answer["children"].([]any), map[string]any{"apiVersion": "v1", "kind": "Secret",
				"metadata": map[string]any{"name": fmt.Sprintf("%s-%d", parent.GetName(), i)}, "stringData": map[string]any{"from": parent.GetName()}})
		}
		answer["status"] = map[string]any{"children": 3}
		return answer
	})
	createControllerOver(t, "apf", hook.URL, thingsGVR, "secrets")
	const parents = 150
	for i := range parents {
		thing := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "test.metactl.io/v1", "kind": "Thing",
			"metadata": map[string]any{"name": fmt.Sprintf("p%03d", i), "namespace": ns, "labels": map[string]any{"parent": "apf"}}}}
		if _, err := env.Dynamic.Resource(thingsGVR).Namespace(ns).Create(ctx(t), thing, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rejectedBefore := rejectedRequests(t, apfUser)
	// Default flags but for --workers: as many syncs at once as the
	// default's Active, so that metactl has more requests to send than
	// the priority level serves.
	p, metrics, _ := metactlRun(t, "--kubeconfig", env.ImpersonatingKubeconfig(t, apfUser), "--workers", "32")
	testenv.Eventually(t, 3*time.Minute, "every parent's status", func(ctx context.Context) (bool, error) {
		list, err := env.Dynamic.Resource(thingsGVR).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: "parent=apf"})
		if err != nil {
			return false, err
		}
		done := 0
		for _, p := range list.Items {
			if v, _, _ := unstructured.NestedInt64(p.Object, "status", "children"); v == 3 {
				done++
			}
		}
		return done == parents, nil
	})
	samples := mustScrape(t, metrics)
	rejected := rejectedRequests(t, apfUser) - rejectedBefore
	t.Logf("the server rejected %v requests; metactl saw %v 429s in %v requests, cap now %v",
		rejected, sum(samples, "metactl_api_requests_total", `code="429"`), sum(samples, "metactl_api_requests_total"),
		sum(samples, "metactl_api_requests_in_flight_cap"))
	if rejected == 0 {
		t.Fatal("the priority level rejected none of metactl's requests: the test did not test anything")
	}
	if sum(samples, "metactl_api_requests_total", `code="429"`) == 0 {
		t.Error("metactl counted no 429 though the server rejected its requests")
	}
	// A good citizen's bound: 3 to 14 % of its requests were rejected in
	// runs of this test, where a reject-only level of the same seats
	// rejected 30 % of metactl's requests without the cap (and its wave
	// took ten times longer, as the server's Retry-After grows with its
	// rejections).
	if total := sum(samples, "metactl_api_requests_total"); rejected > 0.25*total {
		t.Errorf("the server rejected %v of metactl's %v requests: it did not slow down", rejected, total)
	}
	if c := sum(samples, "metactl_api_requests_in_flight_cap"); c <= 0 {
		t.Errorf("metactl_api_requests_in_flight_cap is %v after 429s, want a cap", c)
	}
	if failed := sum(samples, "metactl_syncs_total", `result="error"`); failed > 0 {
		t.Errorf("%v syncs failed: the server's 429s surfaced as errors\n%s", failed, testenv.LastLines(p.Output(), 40))
	}
	if out := p.Output(); strings.Contains(out, "Sync failed") || strings.Contains(out, "TooManyRequests") {
		t.Errorf("metactl logged a failure for the server's 429s:\n%s", testenv.LastLines(out, 40))
	}
	list, err := env.Dynamic.Resource(secretsGVR).Namespace(ns).List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 3*parents {
		t.Errorf("%d children, want %d", len(list.Items), 3*parents)
	}
}

// limitUser gives user every right, and puts its requests in a priority
// level of its own of the given nominal concurrency shares (the server's
// 600 seats shared with its default levels': 1 share is 3 seats), that
// neither lends nor borrows and rejects at once what it cannot serve.
func limitUser(t *testing.T, user string, shares, queued int32) {
	t.Helper()
	c := ctx(t)
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := env.Kube.RbacV1().ClusterRoleBindings().Create(c, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pl := &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: ptr.To(shares),
				LendablePercent:          ptr.To[int32](0),
				BorrowingLimitPercent:    ptr.To[int32](0),
				LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue,
					Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 1, HandSize: 1, QueueLengthLimit: queued}},
			},
		},
	}
	if _, err := env.Kube.FlowcontrolV1().PriorityLevelConfigurations().Create(c, pl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fs := &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: user},
			MatchingPrecedence:         500,
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: user}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
					Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}, ClusterScope: true, Namespaces: []string{"*"},
				}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
			}},
		},
	}
	if _, err := env.Kube.FlowcontrolV1().FlowSchemas().Create(c, fs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c := context.Background()
		_ = env.Kube.FlowcontrolV1().FlowSchemas().Delete(c, user, metav1.DeleteOptions{})
		_ = env.Kube.FlowcontrolV1().PriorityLevelConfigurations().Delete(c, user, metav1.DeleteOptions{})
		_ = env.Kube.RbacV1().ClusterRoleBindings().Delete(c, user, metav1.DeleteOptions{})
	})
	// The server applies them within moments: wait until it classifies
	// the user's requests in the new level.
	testenv.Eventually(t, 30*time.Second, "the FlowSchema in effect", func(ctx context.Context) (bool, error) {
		fs, err := env.Kube.FlowcontrolV1().FlowSchemas().Get(ctx, user, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range fs.Status.Conditions {
			if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
				return c.Status == flowcontrolv1.ConditionFalse, nil
			}
		}
		return false, nil
	})
}

// rejectedRequests reads from the API server's metrics how many requests
// of user's priority level it rejected.
func rejectedRequests(t *testing.T, user string) float64 {
	t.Helper()
	data, err := env.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for line := range strings.SplitSeq(string(data), "\n") {
		if !strings.HasPrefix(line, "apiserver_flowcontrol_rejected_requests_total{") || !strings.Contains(line, `priority_level="`+user+`"`) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
			total += v
		}
	}
	return total
}
