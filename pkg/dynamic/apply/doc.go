// Package apply implements the three-way merge with which metactl, like
// metacontroller, updates a child object towards the state a hook desires
// without undoing what others (the API server's defaulting, other
// controllers, people) set on it.
//
// # Inputs
//
// The merge takes three JSON objects as unstructured values: observed (the
// object as it is in the cluster), lastApplied (the desired state written
// the previous time, kept in the LastAppliedAnnotation of the object) and
// desired (what the hook wants now). A JSON value is nil (null), a bool, a
// string, a number, map[string]any or []any; a nil map or slice is null.
// Numbers may be of any Go integer or floating-point type or
// encoding/json.Number; those that unstructured.Unstructured produces are
// int64 and float64. Numbers compare by value, so int64(3) equals
// float64(3), wherever the package compares values (merge keys, change
// detection). NaN and infinities are not JSON values and are rejected.
//
// # Merge rules
//
// Starting from the top-level objects, a value in desired is merged with
// the observed and lastApplied values at the same path:
//
//   - Objects merge field by field. A field desired has is set (recursively
//     merged if both sides are objects or lists). A field desired has with
//     the value null is deleted, whether or not lastApplied had it (this
//     differs from metacontroller, which writes the null), unless observed
//     holds it as null: it is then kept, as null and absent mean the same
//     and rewriting one as the other would be a write for nothing (the API
//     server keeps the nulls metacontroller wrote where a schema allows
//     them, x-kubernetes-preserve-unknown-fields or nullable). A field
//     lastApplied has and desired lacks is deleted. Any other field keeps
//     observed's value: what nobody declared is left alone.
//   - A list of objects merges as a map (a "list map") when there is a merge
//     key: the first of containerPort, port, mountPath, name, uid, ip, path
//     that every element of the desired list, of the observed list and of
//     the lastApplied list (each of the latter two only if it is a list) has
//     with a string, number or bool value, unique within each list. So ports
//     that have both port and name merge by port, and containers or env
//     variables that have only a name merge by name. Each desired element is
//     merged as an object with the observed and lastApplied elements of the
//     same key; observed elements whose key lastApplied has but desired has
//     not are removed; observed elements whose key neither has (added by
//     others) are kept. The result keeps observed's order, as
//     metacontroller's does: the observed elements, each merged with its
//     desired element or kept (the removed ones left out), then the desired
//     elements observed lacks, in desired's order. So a list that differs
//     from desired only in order is not rewritten.
//   - Any other list (of scalars, of mixed elements, of objects with no
//     merge key or a duplicated one) replaces observed's list wholesale. An
//     empty desired list takes its key from the others, as metacontroller's
//     apply does: against an observed list map it removes only the
//     elements lastApplied has, and keeps those others added (the volume
//     and mount that admission adds to a Pod whose template says
//     "volumes: []"); against any other list it is an empty list.
//   - A scalar replaces observed's value.
//   - When observed's value is of another type than desired's, desired's
//     wins; observed's is discarded. A lastApplied value of another type
//     than desired's is ignored.
//
// Whatever desired sets is copied into the result with the null fields of
// its objects removed (null elements of lists stay), except those that
// observed holds as null at the same path, which stay null.
//
// Requiring a merge key to be unique (rather than replacing the list when
// the first key present everywhere has duplicates) is a deliberate choice:
// it makes merging idempotent. For every result r = Merge(o, l, d),
// Merge(r, d, d) equals r, which is what lets Apply report no change on the
// next round.
//
// # Guarantees
//
// Merge is pure: it never modifies its arguments, and its result shares no
// map or slice with them. It is deterministic: equal arguments give equal
// results, list order included. It fails only when an argument holds a
// value that is not a JSON value.
//
// Apply wraps Merge for whole Kubernetes objects: it never writes status or
// read-only metadata, keeps the last applied state in the
// LastAppliedAnnotation, and reports whether anything changed so that the
// caller can skip the write.
//
// # Server-side apply
//
// For a controller that writes its children with server-side apply
// instead, Configuration makes the body of the apply from a desired object
// (stripped as Apply strips it, null fields left out, a Secret's stringData
// as data), and ServerSide tells whether applying it would change the
// observed object, from the object itself and the field manager's entry in
// its managedFields (OwnedFields): no entry, a desired value the object
// does not have, or an owned field desired no longer has, means an apply.
// So drift is repaired and an object as the last apply left it is not
// written, without any record of the desired state. No last-applied
// annotation is involved.
package apply
