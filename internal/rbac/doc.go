// Package rbac says what a controller must be allowed to do and checks it.
//
// A controller lists its Access: the verbs on the objects it syncs
// (OwnerVerbs, and StatusVerbs on their status subresource) and on the
// objects it writes for them (ChildVerbs). Denied asks the API server, with
// SelfSubjectAccessReviews, which of these metactl may not do, so that a
// controller lacking permissions says so on its object instead of waiting
// for caches that never sync. internal/manager runs the check before it starts
// a controller; RBAC is not watched, so the manager retries it with
// backoff.
//
// A controller may act as a ServiceAccount (ServiceAccountAnnotation):
// DeniedBy asks the same questions of that account with
// SubjectAccessReviews (ServiceAccount.Reviewer), MayImpersonate asks
// whether metactl may act as it, and Reads and BeforeStart keep, of a
// controller's Access, what metactl's shared cache needs and what is
// checked of the account before the controller starts. For a controller
// whose synced resources are all namespaced (PerNamespace), the account's
// reads are checked per namespace instead, InNamespace, as its objects
// are synced; a CachedReviewer keeps the answers for a while, bounded.
package rbac
