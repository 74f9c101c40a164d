package inmemory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/metactl/metactl/pkg/dynamic/informer"
	"github.com/metactl/metactl/pkg/dynamic/objectclient"
)

// Objects is an in-memory store of objects that answers the writes of
// metactl's object client (the methods of objectclient.Client, so a
// children.Objects: engine.Options.Objects) as kube-apiserver would in
// what metactl relies on:
//
//   - every write gives the object a new resourceVersion; a create gives
//     it a UID of its own;
//   - the preconditions metactl sends are checked: an update's or a
//     merge patch's metadata.resourceVersion and metadata.uid, a delete's
//     Preconditions; a failure is a conflict (apierrors.IsConflict); a
//     failed "test" of a JSON patch is Invalid without causes;
//   - a write of the "status" subresource changes only .status, and for a
//     resource with that subresource (NewObjects' withStatus) a write of
//     the object itself keeps the stored .status;
//   - a delete of an object with finalizers sets its deletionTimestamp and
//     returns it; the write that removes its last finalizer removes it;
//   - a create of an object whose name is not a DNS-1123 subdomain is
//     Invalid (apierrors.IsInvalid), as most resources' names are checked.
//
// It holds no garbage collector, no admission and no schema; server-side
// apply (Apply) is refused: tests use client-side apply. Client serves
// the same objects, as client-go's fake dynamic client, whose writes
// follow the same rules. Safe for concurrent use.
type Objects struct {
	client *dynamicfake.FakeDynamicClient
	status map[schema.GroupVersionResource]bool

	// mu serialises the writes (each reads, then writes the tracker),
	// and guards rv and writes.
	mu     sync.Mutex
	rv     int
	writes []Write
}

// Write is one write Objects served: its verb ("create", "update",
// "patch", "delete"), resource, subresource, namespace and name, and
// whether it failed.
type Write struct {
	Verb, Subresource, Namespace, Name string
	Resource                           schema.GroupVersionResource
	Failed                             bool
}

// String is the write as a test reports it: "patch things/status ns/p"
// ("... p" for a cluster-scoped object).
func (w Write) String() string {
	res := w.Resource.Resource
	if w.Subresource != "" {
		res += "/" + w.Subresource
	}
	name := w.Name
	if w.Namespace != "" {
		name = w.Namespace + "/" + w.Name
	}
	s := w.Verb + " " + res + " " + name
	if w.Failed {
		s += " (failed)"
	}
	return s
}

// NewObjects returns a store holding objs (deep copies), each of the
// resource its kind's name guesses (ConfigMap: configmaps), as they are:
// their resourceVersion and UID are kept (see Object). The resources in
// withStatus have a status subresource.
func NewObjects(withStatus []schema.GroupVersionResource, objs ...*unstructured.Unstructured) *Objects {
	listKinds := map[schema.GroupVersionResource]string{}
	stored := make([]runtime.Object, len(objs))
	for i, obj := range objs {
		gvr, _ := meta.UnsafeGuessKindToResource(obj.GroupVersionKind())
		listKinds[gvr] = obj.GetKind() + "List"
		stored[i] = obj.DeepCopy()
	}
	o := &Objects{
		client: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, stored...),
		status: map[schema.GroupVersionResource]bool{},
		rv:     100,
	}
	for _, gvr := range withStatus {
		o.status[gvr] = true
	}
	o.client.PrependReactor("*", "*", o.react)
	return o
}

// Client returns client-go's fake dynamic client over the same objects:
// its reads are the store's, its creates, updates, patches and deletes
// are the store's writes.
func (o *Objects) Client() dynamic.Interface { return o.client }

// Get returns the object name of gvr in namespace, a copy; false when
// there is none.
func (o *Objects) Get(gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, bool) {
	obj, err := o.get(gvr, namespace, name)
	return obj, err == nil
}

// Writes returns the writes served so far, in order.
func (o *Objects) Writes() []Write {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.writes)
}

// Create stores the object of body, unless one of its name exists
// (AlreadyExists).
func (o *Objects) Create(_ context.Context, gvr schema.GroupVersionResource, namespace string, body []byte, _ ...objectclient.WriteOption) (*informer.Object, error) {
	return toObject(o.create(gvr, namespace, body))
}

// Update replaces the object name with body, on its preconditions.
func (o *Objects) Update(_ context.Context, gvr schema.GroupVersionResource, namespace, name string, body []byte, _ ...objectclient.WriteOption) (*informer.Object, error) {
	return toObject(o.update(gvr, namespace, name, "", body))
}

// Patch applies a JSON merge patch or a JSON patch to the object name, or
// to its status subresource, on the patched object's preconditions.
func (o *Objects) Patch(_ context.Context, gvr schema.GroupVersionResource, namespace, name string, pt types.PatchType, data []byte, subresources ...string) (*informer.Object, error) {
	return toObject(o.patch(gvr, namespace, name, pt, data, subresources...))
}

// Delete deletes the object name on opts' preconditions; with finalizers
// it stays, being deleted, and is returned.
func (o *Objects) Delete(_ context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions, _ ...objectclient.WriteOption) (*informer.Object, error) {
	left, err := o.delete(gvr, namespace, name, opts)
	if left == nil || err != nil {
		return nil, err
	}
	return toObject(left, nil)
}

// Apply is refused: the store serves no server-side apply.
func (o *Objects) Apply(_ context.Context, gvr schema.GroupVersionResource, _, _ string, _ []byte, _ string, _ bool, _ ...objectclient.WriteOption) (*informer.Object, error) {
	return nil, apierrors.NewMethodNotSupported(gvr.GroupResource(), "server-side apply (in memory)")
}

// GetMetadata returns the metadata of the object name.
func (o *Objects) GetMetadata(_ context.Context, gvr schema.GroupVersionResource, namespace, name string) (*metav1.ObjectMeta, error) {
	obj, err := o.get(gvr, namespace, name)
	if err != nil {
		return nil, err
	}
	md, _ := obj.Object["metadata"].(map[string]any)
	out := &metav1.ObjectMeta{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(md, out); err != nil {
		return nil, fmt.Errorf("decoding the metadata of %s %s: %w", gvr.Resource, name, err)
	}
	return out, nil
}

func (o *Objects) get(gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	obj, err := o.client.Tracker().Get(gvr, namespace, name)
	if err != nil {
		return nil, err
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("%s %s/%s is stored as %T", gvr.Resource, namespace, name, obj)
	}
	return u.DeepCopy(), nil
}

// record notes a write; mu is held.
func (o *Objects) record(verb string, gvr schema.GroupVersionResource, subresource, namespace, name string, err error) {
	o.writes = append(o.writes, Write{Verb: verb, Resource: gvr, Subresource: subresource, Namespace: namespace, Name: name, Failed: err != nil})
}

// nextRV returns a new resourceVersion; mu is held.
func (o *Objects) nextRV() string {
	o.rv++
	return strconv.Itoa(o.rv)
}

func (o *Objects) create(gvr schema.GroupVersionResource, namespace string, body []byte) (_ *unstructured.Unstructured, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(body); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("decoding a %s: %v", gvr.Resource, err))
	}
	name := obj.GetName()
	defer func() { o.record("create", gvr, "", namespace, name, err) }()
	if obj.GetNamespace() == "" {
		obj.SetNamespace(namespace)
	}
	if obj.GetName() == "" {
		return nil, apierrors.NewBadRequest("the in-memory store needs a name: it generates none")
	}
	if msgs := validation.IsDNS1123Subdomain(obj.GetName()); len(msgs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: gvr.Group, Kind: obj.GetKind()}, obj.GetName(),
			field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), obj.GetName(), strings.Join(msgs, "; "))})
	}
	rv := o.nextRV()
	obj.SetResourceVersion(rv)
	obj.SetUID(types.UID(fmt.Sprintf("uid-%s/%s-%s", namespace, obj.GetName(), rv)))
	obj.SetCreationTimestamp(metav1.Now())
	obj.SetDeletionTimestamp(nil)
	if o.status[gvr] {
		delete(obj.Object, "status")
	}
	if err := o.client.Tracker().Create(gvr, obj, namespace); err != nil {
		return nil, err
	}
	return obj.DeepCopy(), nil
}

// update stores body in place of the object name (of its status alone for
// subresource "status"), on body's preconditions.
func (o *Objects) update(gvr schema.GroupVersionResource, namespace, name, subresource string, body []byte) (obj *unstructured.Unstructured, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	defer func() { o.record("update", gvr, subresource, namespace, name, err) }()
	have, err := o.get(gvr, namespace, name)
	if err != nil {
		return nil, err
	}
	return o.replace(gvr, namespace, name, subresource, body, have)
}

// replace is update of have, the stored object as read; mu is held.
func (o *Objects) replace(gvr schema.GroupVersionResource, namespace, name, subresource string, body []byte, have *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	want := &unstructured.Unstructured{}
	if err := want.UnmarshalJSON(body); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("decoding %s %s: %v", gvr.Resource, name, err))
	}
	if err := preconditions(gvr, name, have, string(want.GetUID()), want.GetResourceVersion()); err != nil {
		return nil, err
	}
	switch {
	case subresource == "status":
		status, ok := want.Object["status"]
		want = have.DeepCopy()
		delete(want.Object, "status")
		if ok {
			want.Object["status"] = status
		}
	case subresource != "":
		return nil, apierrors.NewNotFound(gvr.GroupResource(), name+"/"+subresource)
	case o.status[gvr]:
		delete(want.Object, "status")
		if status, ok := have.Object["status"]; ok {
			want.Object["status"] = status
		}
	}
	// What the server keeps, whatever is sent.
	want.SetNamespace(have.GetNamespace())
	want.SetName(have.GetName())
	want.SetUID(have.GetUID())
	want.SetCreationTimestamp(have.GetCreationTimestamp())
	want.SetDeletionTimestamp(have.GetDeletionTimestamp())
	want.SetResourceVersion(o.nextRV())
	if want.GetDeletionTimestamp() != nil && len(want.GetFinalizers()) == 0 {
		if err := o.client.Tracker().Delete(gvr, namespace, name); err != nil {
			return nil, err
		}
		return want, nil
	}
	if err := o.client.Tracker().Update(gvr, want, namespace); err != nil {
		return nil, err
	}
	return want.DeepCopy(), nil
}

func (o *Objects) patch(gvr schema.GroupVersionResource, namespace, name string, pt types.PatchType, data []byte, subresources ...string) (obj *unstructured.Unstructured, err error) {
	subresource := ""
	if len(subresources) > 0 {
		subresource = subresources[0]
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	defer func() { o.record("patch", gvr, subresource, namespace, name, err) }()
	have, err := o.get(gvr, namespace, name)
	if err != nil {
		return nil, err
	}
	before, err := json.Marshal(have.Object)
	if err != nil {
		return nil, fmt.Errorf("encoding %s %s: %w", gvr.Resource, name, err)
	}
	var after []byte
	switch pt {
	case types.MergePatchType:
		after, err = jsonpatch.MergePatch(before, data)
	case types.JSONPatchType:
		var patch jsonpatch.Patch
		if patch, err = jsonpatch.DecodePatch(data); err == nil {
			after, err = patch.Apply(before)
		}
	default:
		return nil, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", gvr.GroupResource(), name,
			fmt.Sprintf("the in-memory store serves no %s patch", pt), 0, false)
	}
	if err != nil {
		// kube-apiserver answers a patch it cannot apply, a failed test
		// included, 422 without causes.
		return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "patch", gvr.GroupResource(), name, err.Error(), 0, false)
	}
	return o.replace(gvr, namespace, name, subresource, after, have)
}

// delete deletes the object name, or marks it deleted while it has
// finalizers and returns it then.
func (o *Objects) delete(gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) (left *unstructured.Unstructured, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	defer func() { o.record("delete", gvr, "", namespace, name, err) }()
	have, err := o.get(gvr, namespace, name)
	if err != nil {
		return nil, err
	}
	if p := opts.Preconditions; p != nil {
		var uid, rv string
		if p.UID != nil {
			uid = string(*p.UID)
		}
		if p.ResourceVersion != nil {
			rv = *p.ResourceVersion
		}
		if err := preconditions(gvr, name, have, uid, rv); err != nil {
			return nil, err
		}
	}
	if len(have.GetFinalizers()) == 0 {
		return nil, o.client.Tracker().Delete(gvr, namespace, name)
	}
	if have.GetDeletionTimestamp() == nil {
		now := metav1.NewTime(time.Now())
		have.SetDeletionTimestamp(&now)
		have.SetResourceVersion(o.nextRV())
		if err := o.client.Tracker().Update(gvr, have, namespace); err != nil {
			return nil, err
		}
	}
	return have, nil
}

// preconditions returns a conflict unless have has uid and resourceVersion
// rv (either "": not checked).
func preconditions(gvr schema.GroupVersionResource, name string, have *unstructured.Unstructured, uid, rv string) error {
	if uid != "" && uid != string(have.GetUID()) {
		return apierrors.NewConflict(gvr.GroupResource(), name,
			fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", uid, have.GetUID()))
	}
	if rv != "" && rv != have.GetResourceVersion() {
		return apierrors.NewConflict(gvr.GroupResource(), name,
			errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	}
	return nil
}

// toObject returns obj as objectclient.Client returns what a write
// stored.
func toObject(obj *unstructured.Unstructured, err error) (*informer.Object, error) {
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, fmt.Errorf("encoding %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return informer.NewObject(data)
}

// react serves the fake dynamic client's writes as the store's.
func (o *Objects) react(action k8stesting.Action) (bool, runtime.Object, error) {
	gvr, ns := action.GetResource(), action.GetNamespace()
	var obj *unstructured.Unstructured
	var err error
	switch action.GetVerb() {
	case "create":
		var body []byte
		if body, err = json.Marshal(action.(k8stesting.CreateAction).GetObject()); err == nil {
			obj, err = o.create(gvr, ns, body)
		}
	case "update":
		a := action.(k8stesting.UpdateAction)
		u, _ := a.GetObject().(*unstructured.Unstructured)
		if u == nil {
			return true, nil, fmt.Errorf("an update of %s sends a %T", gvr.Resource, a.GetObject())
		}
		var body []byte
		if body, err = json.Marshal(u.Object); err == nil {
			obj, err = o.update(gvr, ns, u.GetName(), a.GetSubresource(), body)
		}
	case "patch":
		a := action.(k8stesting.PatchAction)
		obj, err = o.patch(gvr, ns, a.GetName(), a.GetPatchType(), a.GetPatch(), subresourcesOf(a.GetSubresource())...)
	case "delete":
		a := action.(k8stesting.DeleteAction)
		left, err := o.delete(gvr, ns, a.GetName(), a.GetDeleteOptions())
		if left == nil {
			return true, nil, err
		}
		return true, left, err
	default:
		return false, nil, nil // reads: the tracker's
	}
	if err != nil {
		return true, nil, err
	}
	return true, obj, nil
}

func subresourcesOf(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
