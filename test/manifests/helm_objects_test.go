package manifests_test

// Tests of what the chart's objects say to each other and to Helm: labels
// written once, selectors that select, the PodDisruptionBudget only when a
// drain can meet it, names that fit, and the notes' warning on the
// placeholder image.

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
)

// TestHelmLabelsWrittenOnce sets commonLabels and the monitoring objects'
// labels with a shared key (and commonLabels with a key the chart sets
// itself): every object's labels are one map with each key once; a value's
// labels win over commonLabels, the chart's own over both.
func TestHelmLabelsWrittenOnce(t *testing.T) {
	values := writeValues(t, map[string]any{
		"commonLabels":   map[string]any{"team": "common", "tier": "platform", "app.kubernetes.io/component": "common"},
		"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"team": "monitor"}},
		"prometheusRule": map[string]any{"enabled": true, "labels": map[string]any{"team": "rules"}},
		"dashboard":      map[string]any{"enabled": true, "labels": map[string]any{"team": "dash"}},
	})
	out, err := runHelm(t, "template", "metactl", repo(t, "charts", "metactl"), "--namespace", namespace, "-f", values)
	if err != nil {
		t.Fatal(err)
	}
	r := chartRender(decodeAll(t, []byte(out)))
	if len(r) < 10 {
		t.Fatalf("%d objects rendered", len(r))
	}
	want := map[string]map[string]string{
		"ServiceMonitor metactl":      {"team": "monitor", "tier": "platform"},
		"PrometheusRule metactl":      {"team": "rules", "tier": "platform"},
		"ConfigMap metactl-dashboard": {"team": "dash", "tier": "platform", "grafana_dashboard": "1"},
		"Service metactl-metrics":     {"team": "common", "app.kubernetes.io/component": "metrics"},
		"Deployment metactl":          {"team": "common", "app.kubernetes.io/component": "controller"},
		"ClusterRole metactl":         {"team": "common", "app.kubernetes.io/component": "common", "app.kubernetes.io/name": "metactl"},
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		kind, name, _ := strings.Cut(k, " ")
		o := r.get(kind, name)
		if o == nil {
			t.Errorf("no %s rendered", k)
			continue
		}
		for l, v := range want[k] {
			if got := o.GetLabels()[l]; got != v {
				t.Errorf("%s: label %s is %q, want %q", k, l, got, v)
			}
		}
	}
}

// TestHelmPodDisruptionBudgetOnlyWhenDrainable checks that the chart
// renders the PodDisruptionBudget only when the Deployment has more
// replicas than it keeps available: otherwise no eviction could meet it
// and it would block every node drain.
func TestHelmPodDisruptionBudgetOnlyWhenDrainable(t *testing.T) {
	for _, c := range []struct {
		values map[string]any
		want   bool
	}{
		{values: map[string]any{}, want: true},
		{values: nestedValues("replicaCount", 1), want: false},
		{values: nestedValues("replicaCount", 1, "leaderElection.enabled", false), want: false},
		{values: nestedValues("podDisruptionBudget.minAvailable", 2), want: false},
		{values: nestedValues("replicaCount", 3, "podDisruptionBudget.minAvailable", 2), want: true},
		{values: nestedValues("podDisruptionBudget.enabled", false), want: false},
	} {
		r := chartRender(helmTemplate(t, "metactl", namespace, "-f", writeValues(t, c.values)))
		if got := r.get("PodDisruptionBudget", "metactl") != nil; got != c.want {
			t.Errorf("with %v: PodDisruptionBudget rendered %v, want %v", c.values, got, c.want)
		}
	}
}

// TestHelmNamesFit renders the chart with a long release name and a long
// fullnameOverride: every object's name is a valid name of its kind, and
// the metrics Service's a DNS label.
func TestHelmNamesFit(t *testing.T) {
	long := strings.Repeat("a", 70)
	for _, args := range [][]string{
		{"--set", "fullnameOverride=" + long},
		{"--set", "fullnameOverride=" + strings.Repeat("b", 43) + "-c"},
	} {
		objs := helmTemplate(t, "metactl", namespace, args...)
		for _, o := range objs {
			if o.GetKind() == "CustomResourceDefinition" {
				continue
			}
			if n := len(o.GetName()); n > 63 {
				t.Errorf("with %v: %s's name has %d characters", args, objectKey(o), n)
			}
			if o.GetKind() == "Service" {
				if errs := validation.IsDNS1035Label(o.GetName()); len(errs) > 0 {
					t.Errorf("with %v: Service %s: %v", args, o.GetName(), errs)
				}
			}
		}
	}
	// A release name too long for a Helm release is Helm's to refuse; the
	// longest it takes (53) fits.
	for _, o := range helmTemplate(t, strings.Repeat("r", 53), namespace) {
		if o.GetKind() != "CustomResourceDefinition" && len(o.GetName()) > 63 {
			t.Errorf("release of 53 characters: %s's name has %d characters", objectKey(o), len(o.GetName()))
		}
	}
}

// testDigest is an image digest of the right form.
var testDigest = "sha256:" + strings.Repeat("0123", 16)

// TestHelmNotesWarnWithoutDigest checks that the notes helm install prints
// warn while the image is pulled by tag (the placeholder among them), and
// only then.
func TestHelmNotesWarnWithoutDigest(t *testing.T) {
	const warning = "WARNING: the image"
	for _, c := range []struct {
		args []string
		warn bool
	}{
		{args: nil, warn: true},
		{args: []string{"--set", "image.repository=registry.example.com/metactl"}, warn: true},
		{args: []string{"--set", "image.tag=v1.2.3"}, warn: true},
		{args: []string{"--set", "image.digest=" + testDigest}, warn: false},
	} {
		out, err := runHelm(t, append([]string{"install", "metactl", repo(t, "charts", "metactl"),
			"--namespace", namespace, "--dry-run=client"}, c.args...)...)
		if err != nil {
			t.Fatal(err)
		}
		_, notes, ok := strings.Cut(out, "NOTES:")
		if !ok {
			t.Fatalf("helm install --dry-run=client %v printed no NOTES:\n%s", c.args, out)
		}
		if got := strings.Contains(notes, warning); got != c.warn {
			t.Errorf("with %v: notes warn %v, want %v:\n%s", c.args, got, c.warn, notes)
		}
	}
}

// TestHelmRefusesUnpinnedImages checks that the chart refuses the tag
// latest, with a message naming image.tag and saying what to set, and a
// digest that is not sha256: and 64 hexadecimal digits (the schema).
func TestHelmRefusesUnpinnedImages(t *testing.T) {
	for set, want := range map[string]string{
		"image.tag=latest":      "image.tag latest: pin the image by image.digest",
		"image.digest=sha256:0": "image.digest",
		"image.digest=latest":   "image.digest",
	} {
		_, err := runHelm(t, "template", "metactl", repo(t, "charts", "metactl"), "--set", set)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("helm template --set %s: %v, want a refusal saying %q", set, err, want)
		}
	}
	if _, err := runHelm(t, "template", "metactl", repo(t, "charts", "metactl"), "--set", "image.tag=latest", "--set", "image.digest="+testDigest); err != nil {
		t.Errorf("a digest with the tag latest (ignored): %v", err)
	}
}

// TestHelmTracingValuesRefused checks that the chart refuses a tracing
// endpoint metactl cannot export to (OTLP/gRPC's port, no URL), with a
// message naming the value. (The schema refuses an unknown sampler:
// TestHelmSchemaRefusesWrongValues.)
func TestHelmTracingValuesRefused(t *testing.T) {
	for _, set := range []string{
		"tracing.otlpEndpoint=http://collector:4317",
		"tracing.otlpEndpoint=collector:4318",
	} {
		_, err := runHelm(t, "template", "metactl", repo(t, "charts", "metactl"), "--set", set)
		name, _, _ := strings.Cut(set, "=")
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("helm template --set %s: %v, want the chart's refusal naming %s", set, err, name)
		}
	}
}

// subset says whether every label of sel is in labels, with its value.
func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// selection checks, in a set of objects to install together, that each
// Deployment's selector, affinity and spread terms select its Pods; that
// each Service and PodDisruptionBudget selects the Pods of a Deployment of
// its namespace; and that each ServiceMonitor selects a Service of its
// namespace by labels that Service has, and scrapes ports that Service
// names. It returns what does not hold, and that a kind is missing from
// the set.
func selection(objs []*unstructured.Unstructured) []string {
	var errs []string
	errorf := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	stringMap := func(obj map[string]any, path ...string) map[string]string {
		m, _, err := unstructured.NestedStringMap(obj, path...)
		if err != nil {
			errorf(".%s: %v", strings.Join(path, "."), err)
		}
		return m
	}
	byKind := map[string][]*unstructured.Unstructured{}
	for _, o := range objs {
		byKind[o.GetKind()] = append(byKind[o.GetKind()], o)
	}
	for _, kind := range []string{"Deployment", "Service", "PodDisruptionBudget", "ServiceMonitor"} {
		if len(byKind[kind]) == 0 {
			errorf("no %s", kind)
		}
	}
	podLabels := map[string][]map[string]string{} // by namespace
	for _, d := range byKind["Deployment"] {
		pods := stringMap(d.Object, "spec", "template", "metadata", "labels")
		sel := stringMap(d.Object, "spec", "selector", "matchLabels")
		if len(sel) == 0 || !subset(sel, pods) {
			errorf("%s selects %v, its Pods have %v", objectKey(d), sel, pods)
		}
		podLabels[d.GetNamespace()] = append(podLabels[d.GetNamespace()], pods)
		// The label selectors of the Pod's scheduling terms.
		var terms []any
		anti, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "affinity", "podAntiAffinity",
			"preferredDuringSchedulingIgnoredDuringExecution")
		for _, a := range anti {
			terms = append(terms, a.(map[string]any)["podAffinityTerm"])
		}
		spread, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "topologySpreadConstraints")
		terms = append(terms, spread...)
		for _, term := range terms {
			sel := stringMap(term.(map[string]any), "labelSelector", "matchLabels")
			if len(sel) == 0 || !subset(sel, pods) {
				errorf("%s's scheduling term %v does not select its Pods %v", objectKey(d), term, pods)
			}
		}
	}
	selectsPods := func(o *unstructured.Unstructured, path ...string) {
		sel := stringMap(o.Object, path...)
		if len(sel) == 0 || !slices.ContainsFunc(podLabels[o.GetNamespace()], func(p map[string]string) bool { return subset(sel, p) }) {
			errorf("%s selects %v, which no Deployment's Pods in its namespace have", objectKey(o), sel)
		}
	}
	for _, s := range byKind["Service"] {
		selectsPods(s, "spec", "selector")
	}
	for _, p := range byKind["PodDisruptionBudget"] {
		selectsPods(p, "spec", "selector", "matchLabels")
	}
	for _, sm := range byKind["ServiceMonitor"] {
		if _, ok, _ := unstructured.NestedFieldNoCopy(sm.Object, "spec", "namespaceSelector"); ok {
			errorf("%s has a namespaceSelector, which this check does not follow", objectKey(sm))
		}
		sel := stringMap(sm.Object, "spec", "selector", "matchLabels")
		endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		if len(endpoints) == 0 {
			errorf("%s has no endpoints", objectKey(sm))
		}
		selected := 0
		for _, svc := range byKind["Service"] {
			if svc.GetNamespace() != sm.GetNamespace() || len(sel) == 0 || !subset(sel, svc.GetLabels()) {
				continue
			}
			selected++
			ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
			for _, e := range endpoints {
				port := e.(map[string]any)["port"]
				if !slices.ContainsFunc(ports, func(p any) bool { return p.(map[string]any)["name"] == port }) {
					errorf("%s scrapes port %v, which %s does not name", objectKey(sm), port, objectKey(svc))
				}
			}
		}
		if selected == 0 {
			errorf("%s selects %v, which no Service of its namespace has", objectKey(sm), sel)
		}
	}
	return errs
}

// checkSelection fails the test for each error of selection.
func checkSelection(t *testing.T, what string, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, e := range selection(objs) {
		t.Errorf("%s: %s", what, e)
	}
}

// TestSelectorsSelect checks the selectors (selection) of the kustomize
// install with its monitoring objects, of the chart with its defaults and
// monitoring on, and of the chart with every option on.
func TestSelectorsSelect(t *testing.T) {
	kustomized := append(render(t), decodeAll(t, []byte(kubectl(t, "kustomize", repo(t, "manifests", "monitoring"))))...)
	checkSelection(t, "kubectl kustomize manifests and manifests/monitoring", kustomized)
	checkSelection(t, "the chart's defaults with monitoring on", helmTemplate(t, "metactl", namespace,
		"--set", "serviceMonitor.enabled=true,prometheusRule.enabled=true,dashboard.enabled=true"))
	checkSelection(t, "the chart with every option on", helmTemplate(t, "platform", namespace,
		"-f", repo(t, "test", "manifests", "testdata", "helm-values-all.yaml")))

	// The check can fail: a Service relabelled away from the
	// ServiceMonitor, a Service port renamed, a PodDisruptionBudget
	// selecting other Pods.
	for _, c := range []struct {
		what  string
		kind  string
		value string
		path  []string
	}{
		{"relabelled Service", "Service", "other", []string{"metadata", "labels", "app.kubernetes.io/component"}},
		{"Service selecting other Pods", "Service", "other", []string{"spec", "selector", "app.kubernetes.io/component"}},
		{"PodDisruptionBudget selecting other Pods", "PodDisruptionBudget", "other", []string{"spec", "selector", "matchLabels", "app.kubernetes.io/component"}},
	} {
		objs := helmTemplate(t, "metactl", namespace, "--set", "serviceMonitor.enabled=true")
		for _, o := range objs {
			if o.GetKind() == c.kind {
				if err := unstructured.SetNestedField(o.Object, c.value, c.path...); err != nil {
					t.Fatal(err)
				}
			}
		}
		if len(selection(objs)) == 0 {
			t.Errorf("selection passes the chart with a %s", c.what)
		}
	}
}

// TestMonitoringKustomizeDryRunServer sends `kubectl kustomize
// manifests/monitoring` to the API server (server-side dry run) with the
// Prometheus Operator's CRDs installed: the ServiceMonitor and
// PrometheusRule validate against the CRDs' schemas, the ConfigMap is
// accepted.
func TestMonitoringKustomizeDryRunServer(t *testing.T) {
	installPrometheusOperatorCRDsForChart(t)
	// A dry run creates no namespace: the objects need it.
	kubectl(t, "apply", "-f", repo(t, "manifests", "deploy", "namespace.yaml"))
	objs := decodeAll(t, []byte(kubectl(t, "kustomize", repo(t, "manifests", "monitoring"))))
	kinds := map[string]bool{}
	for _, o := range objs {
		kinds[o.GetKind()] = true
	}
	for _, k := range []string{"ServiceMonitor", "PrometheusRule", "ConfigMap"} {
		if !kinds[k] {
			t.Errorf("kubectl kustomize manifests/monitoring renders no %s", k)
		}
	}
	dryRunApply(t, objs)
}
