package children

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/pkg/dynamic/discovery"
)

func declared() *Declared {
	return NewDeclared([]*Resource{
		{Resource: &discovery.Resource{APIVersion: "v1", Name: "configmaps", Kind: "ConfigMap", Namespaced: true}},
		{Resource: &discovery.Resource{APIVersion: "rbac.authorization.k8s.io/v1", Name: "clusterroles", Kind: "ClusterRole"}},
	})
}

func object(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(apiVersion)
	obj.SetKind(kind)
	obj.SetNamespace(namespace)
	obj.SetName(name)
	return obj
}

func TestDesiredRules(t *testing.T) {
	namespacedOwner := &metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid"}
	clusterOwner := &metav1.ObjectMeta{Name: "p", UID: "uid"}
	ref := metav1.OwnerReference{APIVersion: "x/v1", Kind: "P", Name: "p", UID: "uid", Controller: ptr.To(true)}
	cases := []struct {
		name    string
		owner   metav1.Object
		objs    []*unstructured.Unstructured
		wantErr string
	}{
		{"namespace defaulted", namespacedOwner, []*unstructured.Unstructured{object("v1", "ConfigMap", "", "a")}, ""},
		{"cluster-scoped child of a cluster owner", clusterOwner, []*unstructured.Unstructured{object("rbac.authorization.k8s.io/v1", "ClusterRole", "", "r")}, ""},
		{"any namespace for a cluster owner", clusterOwner, []*unstructured.Unstructured{object("v1", "ConfigMap", "elsewhere", "a")}, ""},
		{"undeclared", namespacedOwner, []*unstructured.Unstructured{object("v1", "Secret", "", "s")}, "not a declared resource"},
		{"no name", namespacedOwner, []*unstructured.Unstructured{object("v1", "ConfigMap", "", "")}, "metadata.name is required"},
		{"a name for the server to judge", clusterOwner, []*unstructured.Unstructured{object("rbac.authorization.k8s.io/v1", "ClusterRole", "", "app:reader"), object("v1", "ConfigMap", "ns", "Not_Valid")}, ""},
		{"name with a slash", namespacedOwner, []*unstructured.Unstructured{object("v1", "ConfigMap", "", "a/b")}, "invalid metadata.name"},
		{"name with a percent sign", namespacedOwner, []*unstructured.Unstructured{object("v1", "ConfigMap", "", "50%")}, "invalid metadata.name"},
		{"name dot", namespacedOwner, []*unstructured.Unstructured{object("v1", "ConfigMap", "", ".")}, "invalid metadata.name"},
		{"name dot dot", namespacedOwner, []*unstructured.Unstructured{object("v1", "ConfigMap", "", "..")}, "invalid metadata.name"},
		{"other namespace", namespacedOwner, []*unstructured.Unstructured{object("v1", "ConfigMap", "other", "a")}, "differs from the owner's namespace"},
		{"no namespace under a cluster owner", clusterOwner, []*unstructured.Unstructured{object("v1", "ConfigMap", "", "a")}, "needs metadata.namespace"},
		{"namespace on a cluster-scoped child", clusterOwner, []*unstructured.Unstructured{object("rbac.authorization.k8s.io/v1", "ClusterRole", "ns", "r")}, "cluster-scoped"},
		{"duplicate", namespacedOwner, []*unstructured.Unstructured{object("v1", "ConfigMap", "", "a"), object("v1", "ConfigMap", "ns", "a")}, "duplicate"},
		{"cluster-scoped child of a namespaced owner", namespacedOwner, []*unstructured.Unstructured{object("rbac.authorization.k8s.io/v1", "ClusterRole", "", "r")}, "cannot be owned by a namespaced object"},
		{"null", namespacedOwner, []*unstructured.Unstructured{nil}, "is null"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := declared()
			out, err := d.Desired(tc.owner, ref, "children", tc.objs, nil)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				for _, set := range out {
					for _, obj := range set {
						if c := metav1.GetControllerOf(obj); c == nil || c.UID != "uid" {
							t.Errorf("%s has controller %v", obj.GetName(), c)
						}
						if obj.GetNamespace() == "" && obj.GetKind() == "ConfigMap" {
							t.Errorf("%s has no namespace", obj.GetName())
						}
					}
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestDesiredRefusesTheOwnerItself: a parent whose resource is also a
// child resource may have children of its own kind, but not itself.
func TestDesiredRefusesTheOwnerItself(t *testing.T) {
	d := NewDeclared([]*Resource{{Resource: &discovery.Resource{APIVersion: "x/v1", Name: "ps", Kind: "P", Namespaced: true}}})
	owner := &metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid"}
	ref := metav1.OwnerReference{APIVersion: "x/v1", Kind: "P", Name: "p", UID: "uid", Controller: ptr.To(true)}
	if _, err := d.Desired(owner, ref, "children", []*unstructured.Unstructured{object("x/v1", "P", "", "p-child")}, nil); err != nil {
		t.Errorf("a child of the parent's own kind: %v", err)
	}
	for _, self := range []*unstructured.Unstructured{object("x/v1", "P", "", "p"), object("x/v1", "P", "ns", "p")} {
		if _, err := d.Desired(owner, ref, "children", []*unstructured.Unstructured{self}, nil); err == nil || !strings.Contains(err.Error(), "owner itself") {
			t.Errorf("the parent itself (namespace %q): err = %v, want one saying it is the owner itself", self.GetNamespace(), err)
		}
	}
}

// TestDesiredControllerRef: the owner's reference replaces any controller
// reference the hook gave, keeping the hook's blockOwnerDeletion when the
// hook's reference names the owner itself; other owner references stay.
func TestDesiredControllerRef(t *testing.T) {
	owner := &metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid"}
	ref := metav1.OwnerReference{APIVersion: "x/v1", Kind: "P", Name: "p", UID: "uid", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "anchor", UID: "anchor-uid"}
	withRefs := func(name string, refs ...metav1.OwnerReference) *unstructured.Unstructured {
		obj := object("v1", "ConfigMap", "", name)
		obj.SetOwnerReferences(refs)
		return obj
	}
	cases := []struct {
		name      string
		obj       *unstructured.Unstructured
		wantBlock bool
	}{
		{"none given", withRefs("a", other), true},
		{"the owner's, non-blocking", withRefs("b", metav1.OwnerReference{APIVersion: "x/v1", Kind: "P", Name: "p", UID: "uid", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false)}, other), false},
		{"the owner's, blocking unset", withRefs("c", metav1.OwnerReference{APIVersion: "x/v1", Kind: "P", Name: "p", UID: "uid", Controller: ptr.To(true)}), true},
		{"another controller, non-blocking", withRefs("d", metav1.OwnerReference{APIVersion: "x/v1", Kind: "P", Name: "q", UID: "q-uid", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false)}), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := declared().Desired(owner, ref, "children", []*unstructured.Unstructured{tc.obj}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, set := range out {
				for _, obj := range set {
					refs := obj.GetOwnerReferences()
					c := metav1.GetControllerOf(obj)
					if c == nil || c.UID != "uid" || c.Name != "p" {
						t.Fatalf("controller %v, want the owner's", c)
					}
					if got := ptr.Deref(c.BlockOwnerDeletion, false); got != tc.wantBlock {
						t.Errorf("blockOwnerDeletion %v, want %v", got, tc.wantBlock)
					}
					controllers := 0
					for _, r := range refs {
						if ptr.Deref(r.Controller, false) {
							controllers++
						}
					}
					if controllers != 1 {
						t.Errorf("%d controller references, want 1: %v", controllers, refs)
					}
					if want := len(tc.obj.GetOwnerReferences()); len(refs) != want && !(tc.name == "none given" && len(refs) == want+1) {
						t.Errorf("owner references %v, want %d", refs, want)
					}
				}
			}
		})
	}
}
