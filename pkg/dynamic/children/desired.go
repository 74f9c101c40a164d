package children

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// Declared is a controller's set of declared child resources.
type Declared struct {
	// Resources in declaration order.
	Resources []*Resource
	byKind    map[string]*Resource
}

// Declare appends res to resources, unless resources has its resource
// already: that entry then takes res's update method and status checks
// unless res's method is OnDelete (the default), as in metacontroller,
// whose map of update strategies keeps the last entry of a resource that
// has one other than OnDelete. It returns the resources and the index of
// the earlier entry (-1 when res is new).
func Declare(resources []*Resource, res *Resource) ([]*Resource, int) {
	for i, r := range resources {
		if r.GroupVersionResource() == res.GroupVersionResource() {
			if res.Method != "" && res.Method != v1alpha1.ChildUpdateOnDelete {
				r.Method, r.StatusChecks = res.Method, res.StatusChecks
			}
			return resources, i
		}
	}
	return append(resources, res), -1
}

// OtherVersion returns the index of the entry of resources that has res's
// group and resource under another version, or -1. One object is served
// under every version of its resource, so a controller that declared both
// would see each child twice, once per version, and delete as unwanted
// the copy its hook did not answer in that version: the caller refuses it.
func OtherVersion(resources []*Resource, res *Resource) int {
	gvr := res.GroupVersionResource()
	for i, r := range resources {
		if other := r.GroupVersionResource(); other.GroupResource() == gvr.GroupResource() && other.Version != gvr.Version {
			return i
		}
	}
	return -1
}

// OtherVersionMessage says why an entry of spec.<list> cannot be declared
// beside an earlier one of the same resource under earlierAPIVersion
// (OtherVersion), and how to fix it; list is "childResources" or
// "attachments".
func OtherVersionMessage(list, earlierAPIVersion string) string {
	return fmt.Sprintf("spec.%s lists this resource under %s too: one object is served under every version, so the controller would delete and recreate it forever; list it once, under the version the hook answers in",
		list, earlierAPIVersion)
}

// NewDeclared indexes resources by apiVersion and kind.
func NewDeclared(resources []*Resource) *Declared {
	d := &Declared{Resources: resources, byKind: make(map[string]*Resource, len(resources))}
	for _, r := range resources {
		d.byKind[r.APIVersion+"/"+r.Kind] = r
	}
	return d
}

// ForObject returns the declared resource of obj's apiVersion and kind, or
// nil.
func (d *Declared) ForObject(obj *unstructured.Unstructured) *Resource {
	return d.byKind[obj.GetAPIVersion()+"/"+obj.GetKind()]
}

// Desired checks the objects a hook asked for (field names the list in
// errors, "children" or "attachments") and returns them by resource, ready
// to write: deep copies, namespace defaulted to the owner's, owner as their
// controller, then prepare applied. Rules: the resource is declared; the
// name is set and can be a single path segment (not "." or "..", no "/"
// or "%"; the API server judges the rest when the object is written); a namespaced owner's objects are in its namespace; a
// cluster-scoped owner's namespaced objects name their namespace; no
// duplicates. Every problem is reported, and any fails the whole answer.
// (How many objects one answer may ask for, v1alpha1.MaxAnswerObjects, is
// checked by pkg/hooks while decoding it.)
func (d *Declared) Desired(owner metav1.Object, ownerRef metav1.OwnerReference, field string, objs []*unstructured.Unstructured, prepare func(*unstructured.Unstructured) error) (map[*Resource]Set, error) {
	out := make(map[*Resource]Set, len(d.Resources))
	for _, res := range d.Resources {
		out[res] = Set{}
	}
	var errs []error
	for i, obj := range objs {
		if obj == nil {
			errs = append(errs, fmt.Errorf("%s[%d] is null", field, i))
			continue
		}
		what := fmt.Sprintf("%s[%d] (%s %s)", field, i, obj.GetKind(), obj.GetName())
		res := d.ForObject(obj)
		if res == nil {
			errs = append(errs, fmt.Errorf("%s: %s %s is not a declared resource of this controller", what, obj.GetAPIVersion(), obj.GetKind()))
			continue
		}
		if obj.GetName() == "" {
			errs = append(errs, fmt.Errorf("%s: metadata.name is required", what))
			continue
		}
		// Only what cannot name an object in a request path is refused
		// here; which names a resource accepts is the API server's to say
		// (ClusterRoles take "app:reader"), for that object alone.
		if msgs := content.IsPathSegmentName(obj.GetName()); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s: invalid metadata.name: %s", what, strings.Join(msgs, "; ")))
			continue
		}
		obj = obj.DeepCopy()
		switch ns := obj.GetNamespace(); {
		case !res.Namespaced && owner.GetNamespace() != "":
			errs = append(errs, fmt.Errorf("%s: %s is cluster-scoped and cannot be owned by a namespaced object: the garbage collector ignores such an owner reference, so it would never remove the object", what, res.Name))
			continue
		case !res.Namespaced && ns != "":
			errs = append(errs, fmt.Errorf("%s: %s is cluster-scoped but the object has namespace %q", what, res.Name, ns))
			continue
		case !res.Namespaced:
		case ns == "" && owner.GetNamespace() == "":
			errs = append(errs, fmt.Errorf("%s: a namespaced object of a cluster-scoped owner needs metadata.namespace", what))
			continue
		case ns == "":
			obj.SetNamespace(owner.GetNamespace())
		case owner.GetNamespace() != "" && ns != owner.GetNamespace():
			errs = append(errs, fmt.Errorf("%s: namespace %q differs from the owner's namespace %q", what, ns, owner.GetNamespace()))
			continue
		}
		if isOwner(obj, owner, ownerRef) {
			errs = append(errs, fmt.Errorf("%s: is the owner itself, which cannot be its own child", what))
			continue
		}
		setControllerRef(obj, ownerRef)
		if prepare != nil {
			if err := prepare(obj); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", what, err))
				continue
			}
		}
		key := Key(obj)
		if _, dup := out[res][key]; dup {
			errs = append(errs, fmt.Errorf("%s: duplicate %s %s", what, res.Kind, key))
			continue
		}
		out[res][key] = obj
	}
	return out, errors.Join(errs...)
}

// isOwner reports whether obj names the owner itself: a parent whose
// resource is also one of its child resources.
func isOwner(obj *unstructured.Unstructured, owner metav1.Object, ownerRef metav1.OwnerReference) bool {
	if obj.GetName() != owner.GetName() || obj.GetNamespace() != owner.GetNamespace() || obj.GetKind() != ownerRef.Kind {
		return false
	}
	objGV, err1 := schema.ParseGroupVersion(obj.GetAPIVersion())
	ownerGV, err2 := schema.ParseGroupVersion(ownerRef.APIVersion)
	return err1 == nil && err2 == nil && objGV.Group == ownerGV.Group
}

// setControllerRef makes ref the object's only controller reference,
// keeping its other owner references. A controller reference the object
// gives to ref's owner itself (the same UID) keeps its blockOwnerDeletion
// when it sets one: the hook's say on whether deleting the owner in the
// foreground waits for this object, which metacontroller's merge keeps too,
// so that a child it left so is not rewritten.
func setControllerRef(obj *unstructured.Unstructured, ref metav1.OwnerReference) {
	refs := []metav1.OwnerReference{ref}
	for _, r := range obj.GetOwnerReferences() {
		if !ptr.Deref(r.Controller, false) {
			refs = append(refs, r)
			continue
		}
		if r.UID == ref.UID && r.BlockOwnerDeletion != nil {
			refs[0].BlockOwnerDeletion = ptr.To(*r.BlockOwnerDeletion)
		}
	}
	obj.SetOwnerReferences(refs)
}
