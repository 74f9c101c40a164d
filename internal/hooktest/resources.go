package hooktest

import (
	"fmt"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientdiscovery "k8s.io/client-go/discovery"

	"github.com/metactl/metactl/pkg/dynamic/discovery"
)

// builtin are the resources of Kubernetes that controllers most often
// declare, for a test without a cluster: group/version, plural, kind and
// scope, as every API server serves them.
var builtin = []struct {
	groupVersion, name, kind string
	namespaced               bool
}{
	{"v1", "configmaps", "ConfigMap", true},
	{"v1", "secrets", "Secret", true},
	{"v1", "services", "Service", true},
	{"v1", "pods", "Pod", true},
	{"v1", "serviceaccounts", "ServiceAccount", true},
	{"v1", "persistentvolumeclaims", "PersistentVolumeClaim", true},
	{"v1", "namespaces", "Namespace", false},
	{"apps/v1", "deployments", "Deployment", true},
	{"apps/v1", "statefulsets", "StatefulSet", true},
	{"apps/v1", "replicasets", "ReplicaSet", true},
	{"apps/v1", "daemonsets", "DaemonSet", true},
	{"batch/v1", "jobs", "Job", true},
	{"batch/v1", "cronjobs", "CronJob", true},
	{"networking.k8s.io/v1", "ingresses", "Ingress", true},
	{"networking.k8s.io/v1", "networkpolicies", "NetworkPolicy", true},
	{"policy/v1", "poddisruptionbudgets", "PodDisruptionBudget", true},
	{"rbac.authorization.k8s.io/v1", "roles", "Role", true},
	{"rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding", true},
	{"rbac.authorization.k8s.io/v1", "clusterroles", "ClusterRole", false},
	{"rbac.authorization.k8s.io/v1", "clusterrolebindings", "ClusterRoleBinding", false},
}

// OfflineResources returns the resources known without a cluster: those
// of the CRDs (their served versions), a small table of Kubernetes'
// built-in resources, and, when parentResource (plural) is not among
// them, the kind of the sample parent, taken as namespaced (a note says
// so). notes say what the reader should know.
func OfflineResources(crds []*apiextensionsv1.CustomResourceDefinition, parent *unstructured.Unstructured, parentAPIVersion, parentResource string) (resources *discovery.ResourceMap, notes []string) {
	lists := map[string]*metav1.APIResourceList{}
	add := func(gv, name, kind string, namespaced, status bool) {
		list := lists[gv]
		if list == nil {
			list = &metav1.APIResourceList{GroupVersion: gv}
			lists[gv] = list
		}
		for _, r := range list.APIResources {
			if r.Name == name {
				return
			}
		}
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: name, Kind: kind, Namespaced: namespaced})
		if status {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: name + "/status", Kind: kind, Namespaced: namespaced})
		}
	}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			gv := schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}.String()
			add(gv, crd.Spec.Names.Plural, crd.Spec.Names.Kind, crd.Spec.Scope == apiextensionsv1.NamespaceScoped, v.Subresources != nil && v.Subresources.Status != nil)
		}
	}
	for _, b := range builtin {
		add(b.groupVersion, b.name, b.kind, b.namespaced, false)
	}
	if parent != nil && parent.GetAPIVersion() == parentAPIVersion {
		known := false
		if list := lists[parentAPIVersion]; list != nil {
			for _, r := range list.APIResources {
				known = known || r.Name == parentResource
			}
		}
		if !known {
			// Most resources are namespaced, and so are most samples
			// without a namespace (kubectl puts them in the default one).
			add(parentAPIVersion, parentResource, parent.GetKind(), true, true)
			scope := "namespaced"
			notes = append(notes, fmt.Sprintf("offline: %s %s taken as kind %s, %s; pass its CRD with --crd to be sure", parentAPIVersion, parentResource, parent.GetKind(), scope))
		}
	}
	var out []*metav1.APIResourceList
	for _, gv := range sortedKeys(lists) {
		out = append(out, lists[gv])
	}
	return discovery.NewResourceMap(staticDiscovery{lists: out}, discovery.Options{}), notes
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// staticDiscovery serves a fixed list of resources to a
// discovery.ResourceMap, which asks only ServerGroupsAndResources.
type staticDiscovery struct {
	clientdiscovery.DiscoveryInterface
	lists []*metav1.APIResourceList
}

func (s staticDiscovery) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	return nil, s.lists, nil
}
