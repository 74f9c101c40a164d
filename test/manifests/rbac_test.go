package manifests_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/metactl/metactl/internal/testenv"
)

// access is one question to the authorizer, and the answer wanted.
type access struct {
	verb, group, resource, subresource, namespace string
	// name is the object's name, for a rule with resourceNames; empty
	// asks about every object.
	name    string
	allowed bool
}

func (a access) String() string {
	r := a.resource
	if a.group != "" {
		r += "." + a.group
	}
	if a.subresource != "" {
		r += "/" + a.subresource
	}
	if a.name != "" {
		r += " " + a.name
	}
	where := "cluster-wide"
	if a.namespace != "" {
		where = "in " + a.namespace
	}
	return fmt.Sprintf("%s %s %s", a.verb, r, where)
}

// allowed asks the API server, through a SelfSubjectAccessReview made by
// client, whether client's user may do a.
func allowed(ctx context.Context, client kubernetes.Interface, a access) (bool, error) {
	review, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource, Namespace: a.namespace, Name: a.name,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	if review.Status.EvaluationError != "" {
		return false, fmt.Errorf("%s: %s", a, review.Status.EvaluationError)
	}
	return review.Status.Allowed, nil
}

// checkAccess checks every answer at once; RBAC changes already reached the
// authorizer.
func checkAccess(t *testing.T, client kubernetes.Interface, want []access) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, a := range want {
		got, err := allowed(ctx, client, a)
		if err != nil {
			t.Fatal(err)
		}
		if got != a.allowed {
			t.Errorf("the ServiceAccount may %s: %v, want %v", a, got, a.allowed)
		}
	}
}

// applyRBAC applies the namespace, the ServiceAccount and the RBAC, for
// real, and waits until the authorizer grants the ServiceAccount what the
// base ClusterRole does (RBAC reaches the authorizer through its informers).
func applyRBAC(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	for _, f := range []string{"namespace.yaml", "serviceaccount.yaml", "rbac.yaml"} {
		kubectl(t, "apply", "-f", repo(t, "manifests", "deploy", f))
	}
	for _, a := range []access{
		{verb: "watch", group: "metacontroller.k8s.io", resource: "compositecontrollers"},
		{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: namespace},
	} {
		testenv.Eventually(t, 30*time.Second, "the ServiceAccount may "+a.String(), func(ctx context.Context) (bool, error) {
			return allowed(ctx, client, a)
		})
	}
}

// helloWorldRole returns the example ClusterRole of manifests/README.md:
// the fenced YAML block that is a ClusterRole carrying the aggregation
// label.
func helloWorldRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	readme := repo(t, "manifests", "README.md")
	for _, block := range yamlBlocks(t, readme) {
		role := &rbacv1.ClusterRole{}
		if err := yaml.UnmarshalStrict([]byte(block), role); err != nil || role.Kind != "ClusterRole" {
			continue
		}
		if role.Labels[aggregationLabel] == "true" {
			return role
		}
	}
	t.Fatalf("%s has no YAML block with a ClusterRole labelled %s: \"true\"", readme, aggregationLabel)
	return nil
}

// aggregatedRules returns the rules of the ClusterRole name, as
// kube-controller-manager's clusterrole-aggregation controller wrote them.
func aggregatedRules(ctx context.Context, name string) ([]rbacv1.PolicyRule, error) {
	role, err := env.Kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if role.AggregationRule == nil {
		return nil, fmt.Errorf("ClusterRole %s has no aggregationRule", name)
	}
	return role.Rules, nil
}

// holdsRules reports whether every rule of want is among have.
func holdsRules(have, want []rbacv1.PolicyRule) bool {
	for _, rule := range want {
		if !slices.ContainsFunc(have, func(r rbacv1.PolicyRule) bool { return apiequality.Semantic.DeepEqual(r, rule) }) {
			return false
		}
	}
	return true
}

// TestServiceAccountPermissions applies the shipped RBAC and checks, as
// the metactl ServiceAccount, what it may and may not do: before a
// controller's ClusterRole is aggregated, after the README's hello-world
// ClusterRole is, and by running the metactl binary with the Deployment's
// arguments under those permissions.
func TestServiceAccountPermissions(t *testing.T) {
	client := impersonatingClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// Impersonation works, so that a denial below is the ServiceAccount's.
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := review.Status.UserInfo.Username; got != saUser {
		t.Fatalf("impersonating, the API server sees user %q, want %q", got, saUser)
	}

	applyRBAC(t, client)
	const elsewhere = "default"
	metactlItself := []access{
		{verb: "get", group: "metacontroller.k8s.io", resource: "compositecontrollers", allowed: true},
		{verb: "list", group: "metacontroller.k8s.io", resource: "compositecontrollers", allowed: true},
		{verb: "watch", group: "metacontroller.k8s.io", resource: "compositecontrollers", allowed: true},
		{verb: "patch", group: "metacontroller.k8s.io", resource: "compositecontrollers", allowed: true},
		{verb: "patch", group: "metacontroller.k8s.io", resource: "compositecontrollers", subresource: "status", allowed: true},
		{verb: "update", group: "metacontroller.k8s.io", resource: "compositecontrollers", subresource: "finalizers", allowed: true},
		{verb: "list", group: "metacontroller.k8s.io", resource: "decoratorcontrollers", allowed: true},
		{verb: "watch", group: "metacontroller.k8s.io", resource: "decoratorcontrollers", allowed: true},
		{verb: "patch", group: "metacontroller.k8s.io", resource: "decoratorcontrollers", subresource: "status", allowed: true},
		{verb: "create", group: "metacontroller.k8s.io", resource: "controllerrevisions", namespace: elsewhere, allowed: true},
		{verb: "delete", group: "metacontroller.k8s.io", resource: "controllerrevisions", namespace: elsewhere, allowed: true},
		{verb: "create", resource: "events", namespace: elsewhere, allowed: true},
		{verb: "patch", resource: "events", namespace: elsewhere, allowed: true},
		{verb: "create", group: "events.k8s.io", resource: "events", namespace: elsewhere, allowed: true},
		// The leader Lease, by its name; create, which RBAC cannot limit
		// by name.
		{verb: "get", group: "coordination.k8s.io", resource: "leases", namespace: namespace, name: "metactl", allowed: true},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: namespace, name: "metactl", allowed: true},
		{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: namespace, allowed: true},
		{verb: "watch", group: "apiextensions.k8s.io", resource: "customresourcedefinitions", allowed: true},
		{verb: "create", group: "authorization.k8s.io", resource: "subjectaccessreviews", allowed: true},
		// The guard of the debug endpoints (--debug-auth).
		{verb: "create", group: "authentication.k8s.io", resource: "tokenreviews", allowed: true},

		// Nothing more of its own objects...
		{verb: "create", group: "metacontroller.k8s.io", resource: "compositecontrollers", allowed: false},
		{verb: "delete", group: "metacontroller.k8s.io", resource: "compositecontrollers", allowed: false},
		{verb: "create", group: "apiextensions.k8s.io", resource: "customresourcedefinitions", allowed: false},
		// ...no other Lease of its namespace (without sharding: see
		// TestShardedLeaseRole)...
		{verb: "get", group: "coordination.k8s.io", resource: "leases", namespace: namespace, name: "other", allowed: false},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: namespace, name: "other", allowed: false},
		{verb: "patch", group: "coordination.k8s.io", resource: "leases", namespace: namespace, name: "metactl", allowed: false},
		{verb: "delete", group: "coordination.k8s.io", resource: "leases", namespace: namespace, name: "metactl", allowed: false},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: namespace, name: "metactl-bucket-3", allowed: false},
		{verb: "list", group: "coordination.k8s.io", resource: "leases", namespace: namespace, allowed: false},
		{verb: "watch", group: "coordination.k8s.io", resource: "leases", namespace: namespace, allowed: false},
		// ...Leases only in its namespace...
		{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system", allowed: false},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: elsewhere, allowed: false},
		{verb: "list", group: "coordination.k8s.io", resource: "leases", allowed: false},
		{verb: "delete", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system", allowed: false},
		// ...and nothing that only a controller's ClusterRole grants.
		{verb: "list", resource: "secrets", allowed: false},
		{verb: "get", resource: "secrets", namespace: namespace, allowed: false},
		{verb: "create", group: "apps", resource: "deployments", namespace: elsewhere, allowed: false},
		{verb: "create", resource: "pods", namespace: elsewhere, allowed: false},
		{verb: "escalate", group: "rbac.authorization.k8s.io", resource: "clusterroles", allowed: false},
		// No impersonation until a team binds metactl-service-accounts in
		// its namespace; never of users or groups.
		{verb: "impersonate", resource: "serviceaccounts", allowed: false},
		{verb: "impersonate", resource: "serviceaccounts", namespace: elsewhere, allowed: false},
		{verb: "impersonate", resource: "users", allowed: false},
		{verb: "impersonate", resource: "groups", allowed: false},
	}
	helloWorld := []access{
		{verb: "list", resource: "configmaps"},
		{verb: "watch", resource: "configmaps"},
		{verb: "create", resource: "configmaps", namespace: elsewhere},
		{verb: "update", resource: "configmaps", namespace: elsewhere},
		{verb: "patch", resource: "configmaps", namespace: elsewhere},
		{verb: "delete", resource: "configmaps", namespace: elsewhere},
		{verb: "list", group: "example.metactl.io", resource: "helloworlds"},
		{verb: "watch", group: "example.metactl.io", resource: "helloworlds"},
		{verb: "patch", group: "example.metactl.io", resource: "helloworlds", namespace: elsewhere},
		{verb: "patch", group: "example.metactl.io", resource: "helloworlds", subresource: "status", namespace: elsewhere},
	}
	with := func(as []access, allowed bool) []access {
		out := slices.Clone(as)
		for i := range out {
			out[i].allowed = allowed
		}
		return out
	}

	t.Log("before any controller's ClusterRole is aggregated")
	checkAccess(t, client, metactlItself)
	checkAccess(t, client, with(helloWorld, false))
	if t.Failed() {
		t.FailNow()
	}

	t.Log("after the README's hello-world ClusterRole is aggregated")
	role := helloWorldRole(t)
	if _, err := env.Kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := env.Kube.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting ClusterRole %s: %v", role.Name, err)
		}
		// The aggregation controller takes the rules away again.
		testenv.Eventually(t, 30*time.Second, "metactl-controllers without the hello-world rules", func(ctx context.Context) (bool, error) {
			rules, err := aggregatedRules(ctx, "metactl-controllers")
			return err == nil && !holdsRules(rules, role.Rules), err
		})
	})
	// kube-controller-manager's clusterrole-aggregation controller, not
	// the test, copies the rules into metactl-controllers.
	testenv.Eventually(t, 30*time.Second, "the hello-world ClusterRole aggregated into metactl-controllers by kube-controller-manager", func(ctx context.Context) (bool, error) {
		rules, err := aggregatedRules(ctx, "metactl-controllers")
		return err == nil && holdsRules(rules, role.Rules), err
	})
	last := helloWorld[len(helloWorld)-1]
	last.allowed = true
	testenv.Eventually(t, 30*time.Second, "the aggregated rules to reach the authorizer", func(ctx context.Context) (bool, error) {
		return allowed(ctx, client, last)
	})
	checkAccess(t, client, metactlItself)
	checkAccess(t, client, with(helloWorld, true))
	if t.Failed() {
		t.FailNow()
	}

	// Applying the manifests again (an upgrade) keeps the aggregated rules.
	before, err := env.Kube.RbacV1().ClusterRoles().Get(ctx, "metactl-controllers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubectl(t, "apply", "-f", repo(t, "manifests", "deploy", "rbac.yaml"))
	after, err := env.Kube.RbacV1().ClusterRoles().Get(ctx, "metactl-controllers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Rules) == 0 || !apiequality.Semantic.DeepEqual(before.Rules, after.Rules) {
		t.Fatalf("applying rbac.yaml again changed the aggregated rules of metactl-controllers from %+v to %+v", before.Rules, after.Rules)
	}

	t.Log("after a team binds metactl-service-accounts in its namespace, as the README says")
	team := teamServiceAccountsBinding(t)
	if _, err := env.Kube.RbacV1().RoleBindings(team.Namespace).Create(ctx, team, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Kube.RbacV1().RoleBindings(team.Namespace).Delete(context.Background(), team.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting RoleBinding %s/%s: %v", team.Namespace, team.Name, err)
		}
	})
	inTeam := access{verb: "impersonate", resource: "serviceaccounts", namespace: team.Namespace, allowed: true}
	testenv.Eventually(t, 30*time.Second, "the RoleBinding to reach the authorizer", func(ctx context.Context) (bool, error) {
		return allowed(ctx, client, inTeam)
	})
	checkAccess(t, client, []access{
		inTeam,
		{verb: "impersonate", resource: "serviceaccounts", namespace: "kube-system", allowed: false},
		{verb: "impersonate", resource: "serviceaccounts", allowed: false},
		{verb: "impersonate", resource: "users", namespace: team.Namespace, allowed: false},
		{verb: "impersonate", resource: "groups", namespace: team.Namespace, allowed: false},
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("install", func(t *testing.T) { runHelloWorld(t, render(t)) })
	if t.Failed() {
		t.FailNow()
	}
	// Sharded, under the Role the component deploy/sharded renders.
	applyShardedLeaseRole(t, client)
	t.Run("sharded", func(t *testing.T) { runHelloWorld(t, renderSharded(t)) })
}

// applyShardedLeaseRole applies the Role metactl-leader-election as the
// sharded install renders it, waits until the authorizer grants it, and
// applies the install's rbac.yaml again when the test ends.
func applyShardedLeaseRole(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	var role *unstructured.Unstructured
	for _, o := range renderSharded(t) {
		if o.GetKind() == "Role" && o.GetName() == "metactl-leader-election" {
			role = o
		}
	}
	if role == nil {
		t.Fatal("the sharded install renders no Role metactl-leader-election")
	}
	data, err := yaml.Marshal(role.Object)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "role.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(t, "apply", "-f", path)
	t.Cleanup(func() { kubectl(t, "apply", "-f", repo(t, "manifests", "deploy", "rbac.yaml")) })
	member := access{verb: "delete", group: "coordination.k8s.io", resource: "leases", namespace: namespace, name: "metactl-member-0123abcd"}
	testenv.Eventually(t, 30*time.Second, "the sharded Role reaches the authorizer", func(ctx context.Context) (bool, error) {
		return allowed(ctx, client, member)
	})
}

// teamServiceAccountsBinding returns the example RoleBinding of
// manifests/README.md that binds metactl-service-accounts in a team's
// namespace, moved to a namespace of the test's.
func teamServiceAccountsBinding(t *testing.T) *rbacv1.RoleBinding {
	t.Helper()
	readme := repo(t, "manifests", "README.md")
	for _, block := range yamlBlocks(t, readme) {
		binding := &rbacv1.RoleBinding{}
		if err := yaml.UnmarshalStrict([]byte(block), binding); err != nil || binding.Kind != "RoleBinding" {
			continue
		}
		if binding.RoleRef.Kind == "ClusterRole" && binding.RoleRef.Name == "metactl-service-accounts" {
			binding.Namespace = env.CreateNamespace(t)
			return binding
		}
	}
	t.Fatalf("%s has no YAML block with a RoleBinding of ClusterRole metactl-service-accounts", readme)
	return nil
}

// TestShardedLeaseRole applies the Role metactl-leader-election as the
// sharded install renders it (the component manifests/deploy/sharded) and
// checks that the ServiceAccount may read, list, watch, update and delete
// the members' and buckets' Leases of its namespace (their names carry a
// hash of a random identity), and still no Lease elsewhere; then applies
// the install's Role again and checks that those rights are gone.
func TestShardedLeaseRole(t *testing.T) {
	client := impersonatingClient(t)
	applyRBAC(t, client)
	applyShardedLeaseRole(t, client)
	lease := func(verb, name string, allowed bool) access {
		return access{verb: verb, group: "coordination.k8s.io", resource: "leases", namespace: namespace, name: name, allowed: allowed}
	}
	sharded := []access{
		lease("list", "", true), lease("watch", "", true),
		lease("get", "metactl-member-0123abcd", true), lease("update", "metactl-member-0123abcd", true),
		lease("delete", "metactl-member-0123abcd", true),
		lease("get", "metactl-bucket-3", true), lease("update", "metactl-bucket-cluster", true),
		lease("get", "metactl", true), lease("update", "metactl", true), lease("create", "", true),
	}
	checkAccess(t, client, append(slices.Clone(sharded),
		access{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system", name: "metactl-bucket-3"},
		access{verb: "list", group: "coordination.k8s.io", resource: "leases"}))

	kubectl(t, "apply", "-f", repo(t, "manifests", "deploy", "rbac.yaml"))
	testenv.Eventually(t, 30*time.Second, "the install's Role reaches the authorizer", func(ctx context.Context) (bool, error) {
		ok, err := allowed(ctx, client, lease("delete", "metactl-member-0123abcd", false))
		return !ok, err
	})
	checkAccess(t, client, []access{
		lease("list", "", false), lease("get", "metactl-member-0123abcd", false), lease("update", "metactl-bucket-3", false),
		lease("get", "metactl", true), lease("update", "metactl", true), lease("create", "", true),
	})
}

// TestExplainRole: a user bound to the shipped Role metactl-explain, with
// read access to an object and nothing else, may do what `metactl explain`
// does through the API server (list metactl's Pods, get pods/proxy in its
// namespace, discovery, get the object), and nothing more of metactl's.
func TestExplainRole(t *testing.T) {
	const user = "explain-test-user"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kubectl(t, "apply", "-f", repo(t, "manifests", "deploy", "namespace.yaml"))
	kubectl(t, "apply", "-f", repo(t, "manifests", "deploy", "rbac.yaml"))
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "explain-test", Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "metactl-explain"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
	}
	if _, err := env.Kube.RbacV1().RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Kube.RbacV1().RoleBindings(namespace).Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	proxy := access{verb: "get", resource: "pods", subresource: "proxy", namespace: namespace, allowed: true}
	testenv.Eventually(t, 30*time.Second, "the user may "+proxy.String(), func(ctx context.Context) (bool, error) {
		return allowed(ctx, client, proxy)
	})
	checkAccess(t, client, []access{
		proxy,
		{verb: "list", resource: "pods", namespace: namespace, allowed: true},
		// Nothing more of metactl's...
		{verb: "get", resource: "pods", subresource: "proxy", namespace: "default", allowed: false},
		{verb: "list", resource: "pods", namespace: "default", allowed: false},
		{verb: "create", resource: "pods", namespace: namespace, allowed: false},
		{verb: "delete", resource: "pods", namespace: namespace, allowed: false},
		{verb: "get", resource: "secrets", namespace: namespace, allowed: false},
		{verb: "create", resource: "pods", subresource: "exec", namespace: namespace, allowed: false},
		{verb: "get", resource: "services", subresource: "proxy", namespace: namespace, allowed: false},
	})
	// Discovery, which explain runs to map the resource, is open to every
	// authenticated user.
	if _, err := client.Discovery().ServerGroups(); err != nil {
		t.Errorf("discovery as a user bound to metactl-explain: %v", err)
	}
}
