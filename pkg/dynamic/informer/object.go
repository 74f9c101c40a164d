package informer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/tools/cache"

	"github.com/metactl/metactl/internal/jsonscan"
)

// Object is how the cache holds an object of any resource: its metadata
// parsed (so that handlers, indexes and selectors read it without decoding
// anything), and everything else kept as the JSON the API server sent. A
// decoded object (unstructured.Unstructured) costs about three times the
// memory of its JSON; the rest of an object is decoded when a controller
// reads it (Unstructured), not when it enters the cache.
//
// An Object is immutable once built: its body is never written, and
// DeepCopyObject shares it.
type Object struct {
	metav1.TypeMeta
	// ObjectMeta is the object's metadata without managedFields, which
	// are often the largest part of an object, but for the entries of
	// metactl's own field managers (OwnManagerPrefix), which server-side
	// apply reads; and without labels and annotations, always nil here:
	// they are Labels and Annotations.
	metav1.ObjectMeta
	// Labels and Annotations are the object's, as Pairs, in place of
	// ObjectMeta's maps (which they shadow): GetLabels and GetAnnotations
	// build a map on each call; a selector matches Labels as they are.
	Labels, Annotations Pairs
	// body is the object's JSON without metadata and managedFields.
	body []byte
}

var _ metav1.Object = &Object{}

// NewObject parses the JSON of one object, as the API server sends it. It
// keeps a copy of what it needs: data may be reused afterwards.
func NewObject(data []byte) (*Object, error) {
	fields, err := jsonscan.TopLevel(data)
	if err != nil {
		return nil, err
	}
	return NewObjectFromTopLevel(data, fields)
}

// NewObjectFromTopLevel is NewObject for a caller that has scanned the top
// level of data already (fields is jsonscan.TopLevel(data)), to look at its
// kind, say: data is then scanned once.
func NewObjectFromTopLevel(data []byte, fields jsonscan.Fields) (*Object, error) {
	o := &Object{}
	body := make([]byte, 0, len(data)-(fields.Metadata.End-fields.Metadata.Start))
	if fields.Metadata.Start > 0 {
		metadata := data[fields.Metadata.Start:fields.Metadata.End]
		// managedFields are not decoded at all, unless a metactl
		// controller applied the object server-side: they are often most
		// of the metadata, and their timestamps are slow to parse.
		var own []metav1.ManagedFieldsEntry
		if inner, err := jsonscan.TopLevel(metadata); err == nil && inner.ManagedFields.Start > 0 {
			own = ownManagedFields(metadata[inner.ManagedFields.Start:inner.ManagedFields.End])
			metadata = jsonscan.AppendWithout(make([]byte, 0, len(metadata)), metadata, inner.ManagedFields)
		}
		var m metadataJSON
		if err := utiljson.Unmarshal(metadata, &m); err != nil {
			return nil, fmt.Errorf("decoding metadata: %w", err)
		}
		o.ObjectMeta, o.Labels, o.Annotations = m.ObjectMeta, m.Labels, m.Annotations
		o.ManagedFields = own
		o.internMetadata()
		body = jsonscan.AppendWithout(body, data, fields.Metadata)
	} else {
		body = append(body, data...)
	}
	o.APIVersion, o.Kind = interned.intern(fields.APIVersion), interned.intern(fields.Kind)
	o.body = body
	return o, nil
}

// metadataJSON decodes an object's metadata with its labels and
// annotations as Pairs: its fields shadow ObjectMeta's of the same JSON
// names, which stay nil.
type metadataJSON struct {
	metav1.ObjectMeta
	Labels      Pairs `json:"labels,omitempty"`
	Annotations Pairs `json:"annotations,omitempty"`
}

// internMetadata interns the strings of o's metadata that many cached
// objects repeat: the namespace, and the API version, kind and UID of each
// owner.
func (o *Object) internMetadata() {
	o.Namespace = interned.intern(o.Namespace)
	for i := range o.OwnerReferences {
		ref := &o.OwnerReferences[i]
		ref.APIVersion, ref.Kind = interned.intern(ref.APIVersion), interned.intern(ref.Kind)
		ref.UID = types.UID(interned.intern(string(ref.UID)))
	}
}

// GetObjectMeta returns o (metav1.ObjectMetaAccessor), not its ObjectMeta,
// whose labels and annotations are always nil.
func (o *Object) GetObjectMeta() metav1.Object { return o }

// GetLabels returns a new map of o's labels that the caller owns; nil
// without any. A selector can match o.Labels (LabelsOf) without it.
func (o *Object) GetLabels() map[string]string { return o.Labels.Map() }

// SetLabels replaces o's labels with a copy of labels.
func (o *Object) SetLabels(labels map[string]string) { o.Labels = PairsOf(labels) }

// GetAnnotations returns a new map of o's annotations that the caller
// owns; nil without any.
func (o *Object) GetAnnotations() map[string]string { return o.Annotations.Map() }

// SetAnnotations replaces o's annotations with a copy of annotations.
func (o *Object) SetAnnotations(annotations map[string]string) {
	o.Annotations = PairsOf(annotations)
}

// metadata returns o's metadata as an unstructured map that the caller
// owns, labels and annotations included.
func (o *Object) metadata() (map[string]any, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&o.ObjectMeta)
	if err != nil {
		return nil, err
	}
	if len(o.Labels) > 0 {
		m["labels"] = o.Labels.unstructured()
	}
	if len(o.Annotations) > 0 {
		m["annotations"] = o.Annotations.unstructured()
	}
	return m, nil
}

// OwnManagerPrefix starts the names of the field managers whose
// managedFields entries the cache keeps: those with which metactl's
// controllers apply their children server-side.
const OwnManagerPrefix = "metactl/"

// ownManagerTag is how the JSON of an entry of such a manager starts its
// name, as the API server writes it.
var ownManagerTag = []byte(`"manager":"` + OwnManagerPrefix)

// ownManagedFields returns the entries of data, the JSON of an object's
// managedFields, whose manager starts with OwnManagerPrefix; nil when
// there are none (data is then only searched, not decoded) or when data
// does not decode. Only the entries whose JSON names such a manager are
// decoded; the others' fields are not.
func ownManagedFields(data []byte) []metav1.ManagedFieldsEntry {
	if !bytes.Contains(data, ownManagerTag) {
		return nil
	}
	var all []json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return nil
	}
	var own []metav1.ManagedFieldsEntry
	for _, raw := range all {
		if !bytes.Contains(raw, ownManagerTag) {
			continue
		}
		var e metav1.ManagedFieldsEntry
		if err := utiljson.Unmarshal(raw, &e); err != nil {
			return nil
		}
		if strings.HasPrefix(e.Manager, OwnManagerPrefix) {
			own = append(own, e)
		}
	}
	return own
}

// DeepCopyObject implements runtime.Object. The copy shares the immutable
// body.
func (o *Object) DeepCopyObject() runtime.Object {
	c := &Object{TypeMeta: o.TypeMeta, Labels: slices.Clone(o.Labels), Annotations: slices.Clone(o.Annotations), body: o.body}
	o.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return c
}

// Unstructured decodes the object. Every call returns a new object that the
// caller owns.
func (o *Object) Unstructured() (*unstructured.Unstructured, error) {
	content := map[string]any{}
	if err := utiljson.Unmarshal(o.body, &content); err != nil {
		return nil, fmt.Errorf("decoding %s %s: %w", o.Kind, o.key(), err)
	}
	metadata, err := o.metadata()
	if err != nil {
		return nil, fmt.Errorf("converting the metadata of %s %s: %w", o.Kind, o.key(), err)
	}
	content["metadata"] = metadata
	if o.APIVersion != "" {
		content["apiVersion"] = o.APIVersion
	}
	if o.Kind != "" {
		content["kind"] = o.Kind
	}
	return &unstructured.Unstructured{Object: content}, nil
}

// sizeOverhead is what Size adds for the metadata an Object keeps parsed
// besides its names, labels, annotations, finalizers and owner references
// (uid, resourceVersion, generation, timestamps, the keys of its JSON),
// and ownerOverhead for each owner reference besides its strings: at or
// above what the JSON of each takes.
const (
	sizeOverhead  = 512
	ownerOverhead = 128
)

// Size estimates, without decoding or encoding anything, the bytes of the
// object's JSON as a hook request carries it (managedFields left out, as
// the cache leaves them): its body, as the API server sent it; the
// strings of its metadata (name, generateName, namespace, labels,
// annotations, finalizers, owner references), with 3 bytes each for
// quotes and a colon or comma; and sizeOverhead and ownerOverhead for the
// rest. A string that JSON escapes grows when encoded; Size counts it as
// it is.
func (o *Object) Size() int64 {
	n := int64(len(o.body)) + sizeOverhead + int64(len(o.Name)+len(o.GenerateName)+len(o.Namespace))
	for _, r := range o.OwnerReferences {
		n += ownerOverhead + int64(len(r.APIVersion)+len(r.Kind)+len(r.Name)+len(r.UID))
	}
	for _, f := range o.Finalizers {
		n += int64(len(f)) + 3
	}
	for _, p := range [2]Pairs{o.Labels, o.Annotations} {
		for _, s := range p {
			n += int64(len(s)) + 3
		}
	}
	return n
}

// Status decodes only the object's status (nil without one): the rest of
// its JSON is scanned, not built. Numbers are float64 (encoding/json's), so
// the result is for looking at which fields are there.
func (o *Object) Status() (map[string]any, error) {
	var content struct {
		Status map[string]any `json:"status"`
	}
	if err := json.Unmarshal(o.body, &content); err != nil {
		return nil, fmt.Errorf("decoding the status of %s %s: %w", o.Kind, o.key(), err)
	}
	return content.Status, nil
}

func (o *Object) key() string {
	return cache.NewObjectName(o.Namespace, o.Name).String()
}

// ObjectList is a list response, its items parsed as Objects: what a
// ListerWatcherFunc's lists return.
type ObjectList struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []Object
	// leftOut counts the items NewObjectListKeeping left out.
	leftOut int
}

// NewObjectList parses a list response, as the API server sends it. Items
// that do not say their kind (built-in resources' lists leave it out) get
// the list's, without "List".
func NewObjectList(data []byte) (*ObjectList, error) {
	return NewObjectListKeeping(data, nil)
}

// NewObjectListKeeping is NewObjectList keeping only the items whose
// namespace keep accepts (nil: every item), as ListBuilder keeps them.
func NewObjectListKeeping(data []byte, keep func(namespace string) bool) (*ObjectList, error) {
	fields, err := jsonscan.TopLevel(data)
	if err != nil {
		return nil, err
	}
	b := NewListBuilder(keep)
	b.SetType(fields.APIVersion, fields.Kind)
	if fields.Metadata.Start > 0 {
		if err := b.SetListMeta(data[fields.Metadata.Start:fields.Metadata.End]); err != nil {
			return nil, err
		}
	}
	if fields.Items.Start == 0 || data[fields.Items.Start] == 'n' { // absent or null
		return b.List(), nil
	}
	items := data[fields.Items.Start:fields.Items.End]
	if items[0] != '[' {
		return nil, errors.New("items: not a JSON array")
	}
	for i := jsonscan.SkipSpace(items, 1); i < len(items) && items[i] != ']'; {
		end, err := jsonscan.SkipValue(items, i)
		if err != nil {
			return nil, fmt.Errorf("items: %w", err)
		}
		if err := b.Add(items[i:end]); err != nil {
			return nil, err
		}
		i = jsonscan.SkipSpace(items, end)
		if i < len(items) && items[i] == ',' {
			i = jsonscan.SkipSpace(items, i+1)
		}
	}
	return b.List(), nil
}

// ListBuilder builds an ObjectList item by item, for a caller that reads a
// list response as a stream (objectclient's sharded lists) and for
// NewObjectListKeeping. It keeps only the items whose namespace keep
// accepts (nil: every item), without building the others: an item's
// namespace is read from its JSON (a scan of the item and of its
// metadata, no decoding), and an item left out costs that scan and a copy
// of its namespace; nothing else of it is read or checked, so an item
// left out that would not decode is no error. An item whose namespace is
// not a plain JSON string (escapes, or not a string at all) is decoded
// first, and kept or left out by its decoded namespace. The list
// remembers how many items were left out (the informer's filter mode
// reads it). Items that do not say their kind get the list's, without
// "List" (List sets it, wherever the list's kind came in the response).
type ListBuilder struct {
	list ObjectList
	keep func(namespace string) bool
	n    int
}

// NewListBuilder returns a ListBuilder keeping the items keep accepts.
func NewListBuilder(keep func(namespace string) bool) *ListBuilder {
	return &ListBuilder{keep: keep}
}

// SetType sets the list's apiVersion and kind.
func (b *ListBuilder) SetType(apiVersion, kind string) {
	b.list.APIVersion, b.list.Kind = apiVersion, kind
}

// SetListMeta decodes the list's metadata from its JSON.
func (b *ListBuilder) SetListMeta(data []byte) error {
	if err := utiljson.Unmarshal(data, &b.list.ListMeta); err != nil {
		return fmt.Errorf("decoding list metadata: %w", err)
	}
	return nil
}

// Add adds the list's next item, from its JSON, unless keep refuses its
// namespace; it keeps a copy of what it needs, so data may be reused.
func (b *ListBuilder) Add(data []byte) error {
	n := b.n
	b.n++
	fields, err := jsonscan.TopLevel(data)
	if err != nil {
		return fmt.Errorf("item %d: %w", n, err)
	}
	if b.keep != nil {
		if ns, ok := namespaceOf(data, fields); ok && !b.keep(ns) {
			b.list.leftOut++
			return nil
		}
	}
	obj, err := NewObjectFromTopLevel(data, fields)
	if err != nil {
		return fmt.Errorf("item %d: %w", n, err)
	}
	if b.keep != nil && !b.keep(obj.Namespace) {
		b.list.leftOut++
		return nil
	}
	b.list.Items = append(b.list.Items, *obj)
	return nil
}

// List returns the list built; the builder must not be used afterwards.
func (b *ListBuilder) List() *ObjectList {
	itemKind := strings.TrimSuffix(b.list.Kind, "List")
	for i := range b.list.Items {
		if o := &b.list.Items[i]; o.Kind == "" {
			o.APIVersion, o.Kind = b.list.APIVersion, itemKind
		}
	}
	return &b.list
}

// namespaceOf reads an object's metadata.namespace from its JSON without
// decoding it: false when it cannot (the decoder must read it); "" and
// true when the object has none.
func namespaceOf(data []byte, fields jsonscan.Fields) (string, bool) {
	if fields.Metadata.Start == 0 {
		return "", true
	}
	metadata := data[fields.Metadata.Start:fields.Metadata.End]
	inner, err := jsonscan.TopLevel(metadata)
	if err != nil {
		return "", false
	}
	if inner.Namespace.Start == 0 {
		return "", true
	}
	return jsonscan.PlainString(metadata[inner.Namespace.Start:inner.Namespace.End])
}

// DeepCopyObject implements runtime.Object.
func (l *ObjectList) DeepCopyObject() runtime.Object {
	c := &ObjectList{TypeMeta: l.TypeMeta, leftOut: l.leftOut}
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	c.Items = make([]Object, len(l.Items))
	for i := range l.Items {
		c.Items[i] = *l.Items[i].DeepCopyObject().(*Object)
	}
	return c
}
