package apply

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// LastAppliedAnnotation holds the desired state last applied, as JSON.
const LastAppliedAnnotation = "metacontroller.k8s.io/last-applied-configuration"

// readOnlyMetadata are the metadata fields that the API server owns; a
// client never writes them.
var readOnlyMetadata = [...]string{
	"uid",
	"resourceVersion",
	"generation",
	"creationTimestamp",
	"deletionTimestamp",
	"deletionGracePeriodSeconds",
	"managedFields",
	"selfLink",
}

// Apply computes the object to write to update observed towards desired.
//
// It strips from desired what a client must never write: the whole status,
// the read-only metadata (uid, resourceVersion, generation,
// creationTimestamp, deletionTimestamp, deletionGracePeriodSeconds,
// managedFields, selfLink) and the LastAppliedAnnotation itself (a desired
// object copied from an observed one carries the old annotation, which must
// not be nested into the new one; if it was the only annotation,
// metadata.annotations goes too, so that echoing it does not claim the
// annotations object as desired's). It merges (see Merge) with the last
// applied state read from observed's LastAppliedAnnotation, which is
// stripped the same way and brought to one form whoever wrote it: a
// Secret's stringData taken as data, no owner references that are
// controller references (the caller's desired state sets its own), no
// metadata.namespace equal to observed's. A missing or unparseable
// annotation counts as no last applied state. It records the stripped
// desired state as the LastAppliedAnnotation of the result (see
// SetLastApplied for what is recorded).
//
// Guarantees:
//   - The result's status and read-only metadata are exactly observed's
//     (present or absent alike); only the other fields can differ.
//   - The annotation is what SetLastApplied records, except that an
//     observed annotation that means the same to the merge is kept byte for
//     byte when nothing else changes, so that a mere difference in encoding
//     or in the recording writer (metacontroller's annotation on a child
//     metactl takes over, or 3 against 3.0) never causes a write. Two
//     annotations mean the same when they give the same last applied state
//     as read above, with a Secret's data values compared by digest
//     (numbers compared by value). When the object is written anyway, the
//     annotation is rewritten as SetLastApplied records it (so a Secret's
//     values recorded in clear by metacontroller go at the first write).
//   - changed is false exactly when the result equals observed as JSON
//     (numbers compared by value, the annotation included); the caller can
//     then skip the write. Applying the same desired to the result again
//     always reports changed == false.
//   - Neither argument is modified, and the result shares no map or slice
//     with them. The result is returned whether or not it changed.
//
// Apply fails if either argument is nil, if desired's metadata or
// metadata.annotations is present but not an object, if observed's is not an
// object when the annotation must be written into it, or if an argument
// holds something that is not a JSON value.
func Apply(observed, desired *unstructured.Unstructured) (result *unstructured.Unstructured, changed bool, err error) {
	if observed == nil || desired == nil {
		return nil, false, errors.New("apply: observed and desired must not be nil")
	}
	want, err := strip(desired.Object)
	if err != nil {
		return nil, false, fmt.Errorf("apply %s: desired: %w", describe(observed), err)
	}
	want = normalizeSecret(want)
	namespace := namespaceOf(observed.Object)
	stored, annotation, err := lastApplied(observed.Object)
	var last map[string]any
	if err == nil && stored != nil {
		if last, err = lastState(stored, namespace); err != nil {
			last = nil // unusable, as if unparseable
		}
	}
	merged, err := Merge(observed.Object, last, want)
	if err != nil {
		return nil, false, fmt.Errorf("apply %s: %w", describe(observed), err)
	}
	if err := restoreServerFields(merged, observed.Object); err != nil {
		return nil, false, fmt.Errorf("apply %s: %w", describe(observed), err)
	}
	rec := record(want)
	if recState, err := lastState(rec, namespace); last != nil && err == nil && equal(last, recState) {
		// The observed annotation means the same: keep it if that saves a
		// write.
		if err := setAnnotation(merged, annotation); err != nil {
			return nil, false, fmt.Errorf("apply %s: %w", describe(observed), err)
		}
		if equal(observed.Object, merged) {
			return &unstructured.Unstructured{Object: merged}, false, nil
		}
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, false, fmt.Errorf("apply %s: encode %s: %w", describe(observed), LastAppliedAnnotation, err)
	}
	if err := setAnnotation(merged, string(b)); err != nil {
		return nil, false, fmt.Errorf("apply %s: %w", describe(observed), err)
	}
	return &unstructured.Unstructured{Object: merged}, !equal(observed.Object, merged), nil
}

// SetLastApplied stores desired, stripped as by Apply, in obj's
// LastAppliedAnnotation; it is used when creating a child. What it records
// is what metacontroller records of the same desired object, in the same
// encoding (json.Marshal's: compact, keys sorted, <, > and & escaped), so
// that either can take over the other's children without a write, with
// these differences:
//   - status, the read-only metadata and the LastAppliedAnnotation itself
//     are not recorded (metacontroller records whatever the hook returned);
//   - owner references that are controller references are not recorded:
//     the controller sets its own, and metacontroller records the hook's
//     object before adding it;
//   - a Secret's stringData is recorded as data, and its data values as
//     SHA-256 digests ("sha256:<hex>" of the base64 text), so that the
//     annotation holds no second copy of the secret (metacontroller
//     records the values).
//
// It modifies obj (creating its metadata and annotations maps if needed)
// but never desired; desired may be obj.Object itself.
func SetLastApplied(obj *unstructured.Unstructured, desired map[string]any) error {
	if obj == nil {
		return errors.New("set last applied: object must not be nil")
	}
	want, err := strip(desired)
	if err != nil {
		return fmt.Errorf("set last applied on %s: %w", describe(obj), err)
	}
	if err := validate(want); err != nil {
		return fmt.Errorf("set last applied on %s: %w", describe(obj), err)
	}
	b, err := json.Marshal(record(normalizeSecret(want)))
	if err != nil {
		return fmt.Errorf("set last applied on %s: encode: %w", describe(obj), err)
	}
	if obj.Object == nil {
		obj.Object = map[string]any{}
	}
	if err := setAnnotation(obj.Object, string(b)); err != nil {
		return fmt.Errorf("set last applied on %s: %w", describe(obj), err)
	}
	return nil
}

// LastApplied returns the object stored in obj's LastAppliedAnnotation, with
// integers decoded as int64 and other numbers as float64 (as
// unstructured.Unstructured decodes JSON). It returns (nil, nil) when obj,
// its metadata, its annotations or the annotation is absent, and an error
// when the annotation is present but is not a JSON object (JSON null
// included) or the metadata around it is malformed. The result is returned
// as stored, not stripped.
func LastApplied(obj *unstructured.Unstructured) (map[string]any, error) {
	if obj == nil {
		return nil, nil
	}
	m, _, err := lastApplied(obj.Object)
	if err != nil {
		return nil, fmt.Errorf("read %s of %s: %w", LastAppliedAnnotation, describe(obj), err)
	}
	return m, nil
}

// lastApplied returns the decoded annotation of obj and its raw text.
func lastApplied(obj map[string]any) (map[string]any, string, error) {
	md, ok := obj["metadata"]
	if !ok || isNull(md) {
		return nil, "", nil
	}
	meta, ok := md.(map[string]any)
	if !ok {
		return nil, "", fmt.Errorf("metadata is a %T, not an object", md)
	}
	an, ok := meta["annotations"]
	if !ok || isNull(an) {
		return nil, "", nil
	}
	annotations, ok := an.(map[string]any)
	if !ok {
		return nil, "", fmt.Errorf("metadata.annotations is a %T, not an object", an)
	}
	v, ok := annotations[LastAppliedAnnotation]
	if !ok {
		return nil, "", nil
	}
	s, ok := v.(string)
	if !ok {
		return nil, "", fmt.Errorf("annotation is a %T, not a string", v)
	}
	var decoded any
	if err := utiljson.Unmarshal([]byte(s), &decoded); err != nil {
		return nil, "", fmt.Errorf("decode: %w", err)
	}
	res, ok := decoded.(map[string]any)
	if !ok || res == nil {
		return nil, "", fmt.Errorf("annotation holds %s, not a JSON object", kindOf(decoded))
	}
	return res, s, nil
}

// record is what the LastAppliedAnnotation holds of want, a desired state
// stripped and with a Secret's stringData turned into data (see
// SetLastApplied): want without controller owner references, with a
// Secret's data values as digests. want is not modified.
func record(want map[string]any) map[string]any {
	return withoutControllerRefs(recorded(want))
}

// lastState is the last applied state that the annotation holding stored
// gives to the merge of an object in namespace (its observed namespace,
// "" if none). It is stored stripped as by Apply, and with what is
// recorded in more than one way brought to one form: a Secret's stringData
// as data and its data values as digests (values never matter to the merge,
// only keys); no controller owner references (the caller's desired state
// sets them, so they are never the last applied state's to remove); no
// metadata.namespace when it is namespace (which cannot change). So
// metacontroller's annotation and metactl's for the same desired state give
// the same state, and keeping one or the other changes no merge. stored is
// not modified. It fails as strip does.
func lastState(stored map[string]any, namespace string) (map[string]any, error) {
	s, err := strip(stored)
	if err != nil {
		return nil, err
	}
	s = withoutControllerRefs(recorded(normalizeSecret(s)))
	if meta, ok := s["metadata"].(map[string]any); ok {
		if ns, ok := meta["namespace"].(string); ok && ns == namespace {
			s = maps.Clone(s)
			meta = maps.Clone(meta)
			delete(meta, "namespace")
			s["metadata"] = meta
		}
	}
	return s, nil
}

// withoutControllerRefs returns obj without the metadata.ownerReferences
// entries whose controller field is true, and without ownerReferences if
// that leaves none. obj is not modified: what changes is copied.
func withoutControllerRefs(obj map[string]any) map[string]any {
	meta, ok := obj["metadata"].(map[string]any)
	if !ok {
		return obj
	}
	refs, ok := meta["ownerReferences"].([]any)
	if !ok {
		return obj
	}
	kept := make([]any, 0, len(refs))
	for _, r := range refs {
		if m, ok := r.(map[string]any); ok && m["controller"] == true {
			continue
		}
		kept = append(kept, r)
	}
	if len(kept) == len(refs) {
		return obj
	}
	meta = maps.Clone(meta)
	if len(kept) == 0 {
		delete(meta, "ownerReferences")
	} else {
		meta["ownerReferences"] = kept
	}
	out := maps.Clone(obj)
	out["metadata"] = meta
	return out
}

// namespaceOf returns obj's metadata.namespace, or "".
func namespaceOf(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	ns, _ := meta["namespace"].(string)
	return ns
}

// kindOf names the JSON type of a decoded value.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	}
	return "a number"
}

// strip returns obj without status, read-only metadata and the
// LastAppliedAnnotation (and without metadata.annotations if that
// annotation was its only entry). It never modifies obj: the maps it changes are
// shallow copies, the rest is shared with obj. A nil obj gives an empty
// object. It fails if metadata or metadata.annotations is present, not null
// and not an object.
func strip(obj map[string]any) (map[string]any, error) {
	res := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "status" {
			res[k] = v
		}
	}
	md, ok := obj["metadata"]
	if !ok || isNull(md) {
		return res, nil
	}
	meta, ok := md.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("metadata is a %T, not an object", md)
	}
	m := make(map[string]any, len(meta))
	for k, v := range meta {
		m[k] = v
	}
	for _, k := range readOnlyMetadata {
		delete(m, k)
	}
	res["metadata"] = m
	an, ok := meta["annotations"]
	if !ok || isNull(an) {
		return res, nil
	}
	annotations, ok := an.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("metadata.annotations is a %T, not an object", an)
	}
	if _, ok := annotations[LastAppliedAnnotation]; ok {
		a := make(map[string]any, len(annotations))
		for k, v := range annotations {
			if k != LastAppliedAnnotation {
				a[k] = v
			}
		}
		if len(a) > 0 {
			m["annotations"] = a
		} else {
			// Only our annotation was there: as if desired had none. Keeping
			// an empty object would record annotations as ours, and a later
			// desired state without them would delete everyone's.
			delete(m, "annotations")
		}
	}
	return res, nil
}

// restoreServerFields makes the status and read-only metadata of merged
// (which must share nothing with observed) those of observed. Merge already
// keeps them, since they were stripped from desired and last applied; this
// restores them where desired replaced or deleted the whole metadata. It
// leaves merged with a metadata object.
func restoreServerFields(merged, observed map[string]any) error {
	if s, ok := observed["status"]; ok {
		if _, ok := merged["status"]; !ok {
			merged["status"] = deepCopy(s)
		}
	} else {
		delete(merged, "status")
	}
	meta, err := metadataOf(merged)
	if err != nil {
		return err
	}
	om, _ := observed["metadata"].(map[string]any)
	for _, k := range readOnlyMetadata {
		if v, ok := om[k]; ok {
			if _, ok := meta[k]; !ok {
				meta[k] = deepCopy(v)
			}
		} else {
			delete(meta, k)
		}
	}
	return nil
}

// metadataOf returns obj's metadata, creating it if absent or null.
func metadataOf(obj map[string]any) (map[string]any, error) {
	md := obj["metadata"]
	if isNull(md) {
		m := map[string]any{}
		obj["metadata"] = m
		return m, nil
	}
	m, ok := md.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("metadata is a %T, not an object", md)
	}
	return m, nil
}

// setAnnotation sets the LastAppliedAnnotation of obj to value, creating
// metadata and annotations if absent or null.
func setAnnotation(obj map[string]any, value string) error {
	meta, err := metadataOf(obj)
	if err != nil {
		return err
	}
	an := meta["annotations"]
	if isNull(an) {
		meta["annotations"] = map[string]any{LastAppliedAnnotation: value}
		return nil
	}
	annotations, ok := an.(map[string]any)
	if !ok {
		return fmt.Errorf("metadata.annotations is a %T, not an object", an)
	}
	annotations[LastAppliedAnnotation] = value
	return nil
}

// describe names obj in error messages.
func describe(obj *unstructured.Unstructured) string {
	name := obj.GetName()
	if ns := obj.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	if kind := obj.GetKind(); kind != "" {
		return kind + " " + name
	}
	return name
}
