// Package related serves a controller's customize hook: it asks the hook
// which related objects a parent (or decorated object) wants, caches the
// answer per (UID, generation), selects those objects from shared informers
// and delivers them keyed like children. It also maps a change of a
// related object back to exactly the parents whose declarations select it,
// through an index by resource, without calling the customize hook inside
// an event handler.
//
// Namespace rules: under hook version v1 a namespaced parent sees related
// objects of its own namespace only (a rule's namespace and
// namespaceSelector are ignored); under v2, and for cluster-scoped
// parents, rules may name any namespace, select namespaces by label, or
// (with neither) take every namespace. Cluster-scoped related resources
// have no namespace.
//
// A Resolver is safe for concurrent use.
package related
