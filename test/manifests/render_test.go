package manifests_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// render returns what `kubectl kustomize manifests` renders.
func render(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	objs := decodeAll(t, []byte(kubectl(t, "kustomize", repo(t, "manifests"))))
	if len(objs) == 0 {
		t.Fatal("kubectl kustomize manifests rendered nothing")
	}
	return objs
}

// find returns the rendered object of that kind, namespace and name, or
// fails the test.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == ns && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("kubectl kustomize manifests renders no %s %s/%s", kind, ns, name)
	return nil
}

// convert decodes a rendered object into a typed one.
func convert(t *testing.T, obj *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, into, true); err != nil {
		t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
}

// TestKustomizeRendersEverything checks that `kubectl apply -k manifests`
// installs every CRD of manifests/crds/, the namespace, the
// ServiceAccount, the RBAC, the Deployment and the metrics Service.
func TestKustomizeRendersEverything(t *testing.T) {
	objs := render(t)

	crdFiles, err := filepath.Glob(repo(t, "manifests", "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(crdFiles) == 0 {
		t.Fatal("no CRDs in manifests/crds")
	}
	for _, file := range crdFiles {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		crd := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &crd.Object); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		find(t, objs, "CustomResourceDefinition", "", crd.GetName())
	}

	for _, want := range []struct{ kind, ns, name string }{
		{"Namespace", "", namespace},
		{"ServiceAccount", namespace, saName},
		{"ClusterRole", "", "metactl"},
		{"ClusterRoleBinding", "", "metactl"},
		{"ClusterRole", "", "metactl-controllers"},
		{"ClusterRoleBinding", "", "metactl-controllers"},
		{"ClusterRole", "", "metactl-service-accounts"},
		{"Role", namespace, "metactl-leader-election"},
		{"RoleBinding", namespace, "metactl-leader-election"},
		{"Role", namespace, "metactl-explain"},
		{"Deployment", namespace, "metactl"},
		{"Service", namespace, "metactl-metrics"},
		{"ValidatingAdmissionPolicy", "", "metactl-controller-account"},
		{"ValidatingAdmissionPolicyBinding", "", "metactl-controller-account"},
	} {
		find(t, objs, want.kind, want.ns, want.name)
	}
}

// TestRBACHasNoWildcards checks every rule of every Role and ClusterRole
// rendered, and that the bindings and the aggregated ClusterRole are as
// documented.
func TestRBACHasNoWildcards(t *testing.T) {
	objs := render(t)
	rules := 0
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
			continue
		}
		role := &rbacv1.ClusterRole{} // a Role's rules have the same shape
		convert(t, o, role)
		for i, rule := range role.Rules {
			rules++
			for field, values := range map[string][]string{
				"apiGroups":       rule.APIGroups,
				"resources":       rule.Resources,
				"verbs":           rule.Verbs,
				"resourceNames":   rule.ResourceNames,
				"nonResourceURLs": rule.NonResourceURLs,
			} {
				for _, v := range values {
					if strings.Contains(v, "*") {
						t.Errorf("%s %s, rule %d: %s has the wildcard %q", o.GetKind(), o.GetName(), i, field, v)
					}
				}
			}
			if len(rule.Verbs) == 0 || (len(rule.Resources) == 0 && len(rule.NonResourceURLs) == 0) {
				t.Errorf("%s %s, rule %d grants nothing: %+v", o.GetKind(), o.GetName(), i, rule)
			}
		}
	}
	if rules == 0 {
		t.Fatal("no RBAC rules rendered")
	}

	aggregated := &rbacv1.ClusterRole{}
	convert(t, find(t, objs, "ClusterRole", "", "metactl-controllers"), aggregated)
	if aggregated.AggregationRule == nil || len(aggregated.AggregationRule.ClusterRoleSelectors) != 1 {
		t.Fatalf("ClusterRole metactl-controllers: aggregationRule %+v, want one clusterRoleSelector", aggregated.AggregationRule)
	}
	selector := aggregated.AggregationRule.ClusterRoleSelectors[0]
	if len(selector.MatchExpressions) != 0 || len(selector.MatchLabels) != 1 || selector.MatchLabels[aggregationLabel] != "true" {
		t.Errorf("ClusterRole metactl-controllers selects %+v, want matchLabels {%s: \"true\"}", selector, aggregationLabel)
	}
	if len(aggregated.Rules) != 0 {
		t.Errorf("ClusterRole metactl-controllers ships with rules %+v; aggregation fills them", aggregated.Rules)
	}

	// Impersonation: of ServiceAccounts only, and bound nowhere (a team
	// binds it in its namespace).
	impersonation := &rbacv1.ClusterRole{}
	convert(t, find(t, objs, "ClusterRole", "", "metactl-service-accounts"), impersonation)
	if want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"impersonate"}}}; !apiequality.Semantic.DeepEqual(impersonation.Rules, want) {
		t.Errorf("ClusterRole metactl-service-accounts has rules %+v, want only %+v", impersonation.Rules, want)
	}
	for _, o := range objs {
		if o.GetKind() != "ClusterRoleBinding" && o.GetKind() != "RoleBinding" {
			continue
		}
		binding := &rbacv1.RoleBinding{}
		convert(t, o, binding)
		if binding.RoleRef.Name == impersonation.Name {
			t.Errorf("%s %s binds ClusterRole %s; it ships unbound", o.GetKind(), o.GetName(), impersonation.Name)
		}
	}
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
			continue
		}
		role := &rbacv1.ClusterRole{}
		convert(t, o, role)
		for i, rule := range role.Rules {
			if slices.Contains(rule.Verbs, "impersonate") && (o.GetName() != impersonation.Name || !slices.Equal(rule.Resources, []string{"serviceaccounts"})) {
				t.Errorf("%s %s, rule %d: impersonate on %v; only ClusterRole %s may impersonate, and only serviceaccounts", o.GetKind(), o.GetName(), i, rule.Resources, impersonation.Name)
			}
		}
	}

	for _, b := range []struct{ kind, ns, name, roleKind string }{
		{"ClusterRoleBinding", "", "metactl", "ClusterRole"},
		{"ClusterRoleBinding", "", "metactl-controllers", "ClusterRole"},
		{"RoleBinding", namespace, "metactl-leader-election", "Role"},
	} {
		binding := &rbacv1.RoleBinding{} // a ClusterRoleBinding has the same shape
		convert(t, find(t, objs, b.kind, b.ns, b.name), binding)
		if binding.RoleRef.Kind != b.roleKind || binding.RoleRef.Name != b.name {
			t.Errorf("%s %s refers to %s %s, want %s %s", b.kind, b.name, binding.RoleRef.Kind, binding.RoleRef.Name, b.roleKind, b.name)
		}
		want := rbacv1.Subject{Kind: "ServiceAccount", Name: saName, Namespace: namespace}
		if !slices.Equal(binding.Subjects, []rbacv1.Subject{want}) {
			t.Errorf("%s %s binds %+v, want only %+v", b.kind, b.name, binding.Subjects, want)
		}
	}
}

// TestDeployment checks the Deployment and the metrics Service as
// rendered: replicas and leader election, the pod's hardening, resources,
// probes and ports.
func TestDeployment(t *testing.T) {
	objs := render(t)
	d := &appsv1.Deployment{}
	convert(t, find(t, objs, "Deployment", namespace, "metactl"), d)

	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2", d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	if pod.ServiceAccountName != saName {
		t.Errorf("serviceAccountName %q, want %q", pod.ServiceAccountName, saName)
	}
	if pod.AutomountServiceAccountToken == nil || !*pod.AutomountServiceAccountToken {
		t.Errorf("automountServiceAccountToken %v, want true", pod.AutomountServiceAccountToken)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image != "ghcr.io/metactl/metactl:v0.1.0" {
		t.Errorf("image %q, want the documented placeholder ghcr.io/metactl/metactl:v0.1.0", c.Image)
	}
	wantArgs := []string{"run", "--leader-elect=true", "--leader-elect-namespace=" + namespace, "--metrics-addr=:9999", "--health-addr=:9998"}
	if !slices.Equal(append(append([]string{}, c.Command...), c.Args...), wantArgs) {
		t.Errorf("command %q args %q, want args %q", c.Command, c.Args, wantArgs)
	}

	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("the container has no securityContext")
	}
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("runAsNonRoot is not true")
	}
	if sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
		t.Errorf("runAsUser %v, want 65532", sc.RunAsUser)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem is not true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation is not false")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("capabilities %+v, want drop [ALL] and no add", sc.Capabilities)
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccompProfile %+v, want RuntimeDefault", sc.SeccompProfile)
	}

	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, hasReq := c.Resources.Requests[r]
		limit, hasLimit := c.Resources.Limits[r]
		if !hasReq || !hasLimit || req.IsZero() || limit.Cmp(req) < 0 {
			t.Errorf("%s: request %v, limit %v; want both, limit >= request", r, req.String(), limit.String())
		}
	}

	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["metrics"] != 9999 || ports["health"] != 9998 {
		t.Errorf("container ports %v, want metrics 9999 and health 9998", ports)
	}
	for _, probe := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if probe.probe == nil || probe.probe.HTTPGet == nil {
			t.Errorf("no HTTP %s probe", probe.name)
			continue
		}
		if got := probe.probe.HTTPGet; got.Path != probe.path || got.Port != intstr.FromString("health") {
			t.Errorf("%s probe GET %s on port %s, want %s on port health", probe.name, got.Path, got.Port.String(), probe.path)
		}
	}

	s := &corev1.Service{}
	convert(t, find(t, objs, "Service", namespace, "metactl-metrics"), s)
	if s.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("Service type %q, want ClusterIP", s.Spec.Type)
	}
	if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Name != "metrics" || s.Spec.Ports[0].Port != 9999 ||
		s.Spec.Ports[0].TargetPort != intstr.FromString("metrics") {
		t.Errorf("Service ports %+v, want one named metrics, 9999 → the metrics port", s.Spec.Ports)
	}
	if len(s.Spec.Selector) == 0 {
		t.Error("the Service selects nothing")
	}
	for k, v := range s.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("the Service selects %s=%s; the pods are labelled %v", k, v, d.Spec.Template.Labels)
		}
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if selector.Empty() {
		t.Error("the Deployment's selector is empty")
	}
}

// TestApplyDryRunServer runs `kubectl apply -k manifests --dry-run=server`
// against the API server, which validates and admits every object (the
// CRDs are installed already, by testenv), and checks that the pods the
// Deployment makes pass the namespace's Pod Security admission.
func TestApplyDryRunServer(t *testing.T) {
	objs := render(t)
	// A dry run creates no namespace, so the namespaced objects of a dry
	// run need it to exist already.
	kubectl(t, "apply", "-f", repo(t, "manifests", "deploy", "namespace.yaml"))
	kubectl(t, "apply", "-f", repo(t, "manifests", "deploy", "serviceaccount.yaml"))

	out := kubectl(t, "apply", "-k", repo(t, "manifests"), "--dry-run=server")
	for _, o := range objs {
		if !strings.Contains(out, "/"+o.GetName()+" ") {
			t.Errorf("kubectl apply --dry-run=server says nothing of %s %s:\n%s", o.GetKind(), o.GetName(), out)
		}
	}
	if n := strings.Count(out, "(server dry run)"); n != len(objs) {
		t.Errorf("%d objects applied in a server dry run, want %d:\n%s", n, len(objs), out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := env.Kube.AppsV1().Deployments(namespace).Get(ctx, "metactl", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after a dry run, getting the Deployment: %v, want NotFound", err)
	}

	// The namespace enforces the restricted Pod Security Standard: a pod
	// of the Deployment is admitted, and one with a weakened security
	// context is not (which shows the enforcement is on).
	d := &appsv1.Deployment{}
	convert(t, find(t, objs, "Deployment", namespace, "metactl"), d)
	newPod := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "metactl-", Namespace: namespace, Labels: d.Spec.Template.Labels},
			Spec:       *d.Spec.Template.Spec.DeepCopy(),
		}
	}
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	if _, err := env.Kube.CoreV1().Pods(namespace).Create(ctx, newPod(), dryRun); err != nil {
		t.Errorf("creating a pod of the Deployment (dry run): %v", err)
	}
	weakened := newPod()
	escalate := true
	weakened.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = &escalate
	if _, err := env.Kube.CoreV1().Pods(namespace).Create(ctx, weakened, dryRun); !apierrors.IsForbidden(err) {
		t.Errorf("creating a pod with allowPrivilegeEscalation (dry run): %v, want Forbidden by Pod Security admission", err)
	}
}
