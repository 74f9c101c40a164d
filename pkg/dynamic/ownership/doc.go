// Package ownership decides which objects are a parent's children, through
// controller references, as Kubernetes' own controllers do.
//
// A Claimer looks only at the candidates it is given (a parent's own
// children and the orphans that may become its children) and:
//   - keeps the children it controls that match its selector;
//   - releases the children it controls that no longer match (removes its
//     controller reference), unless the parent is being deleted;
//   - adopts orphans that match (adds a controller reference), after one
//     uncached check that the parent still exists with the same UID and is
//     not being deleted, so that a parent deleted and re-created under the
//     same name never adopts what was meant for the old one.
//
// Objects controlled by another owner are never touched. Every write is a
// JSON merge patch carrying the child's UID and resourceVersion as
// preconditions, so a child replaced or changed concurrently is left alone
// and retried on the next sync.
package ownership
