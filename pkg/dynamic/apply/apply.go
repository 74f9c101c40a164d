package apply

import (
	"encoding/json"
	"errors"
	"fmt"

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
// annotations object as desired's). It reads the last applied state from
// observed's LastAppliedAnnotation, stripped the same way; a missing or
// unparseable annotation counts as no last applied state. It then merges
// (see Merge) and records the stripped desired state as the
// LastAppliedAnnotation of the result.
//
// Guarantees:
//   - The result's status and read-only metadata are exactly observed's
//     (present or absent alike); only the other fields can differ.
//   - The annotation holds JSON that decodes to the stripped desired state.
//     It is json.Marshal's compact, key-sorted encoding, except that an
//     observed annotation that already decodes to the same state (compared
//     as by Merge, so 3 and 3.0 are equal) is kept byte for byte, so that a
//     mere difference in encoding never causes a write.
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
	stored, annotation, err := lastApplied(observed.Object)
	var last map[string]any
	if err == nil && stored != nil {
		if last, err = strip(stored); err != nil {
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
	if record := recorded(want); stored == nil || !equal(stored, record) {
		b, err := json.Marshal(record)
		if err != nil {
			return nil, false, fmt.Errorf("apply %s: encode %s: %w", describe(observed), LastAppliedAnnotation, err)
		}
		annotation = string(b)
	}
	if err := setAnnotation(merged, annotation); err != nil {
		return nil, false, fmt.Errorf("apply %s: %w", describe(observed), err)
	}
	return &unstructured.Unstructured{Object: merged}, !equal(observed.Object, merged), nil
}

// SetLastApplied stores desired, stripped as by Apply, in obj's
// LastAppliedAnnotation, as compact JSON (json.Marshal's encoding); it is
// used when creating a child. It modifies obj (creating its metadata and
// annotations maps if needed) but never desired; desired may be obj.Object
// itself.
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
	b, err := json.Marshal(recorded(normalizeSecret(want)))
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
