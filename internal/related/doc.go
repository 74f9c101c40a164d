// Package related serves a controller's customize hook: it asks the hook
// which related objects a parent (or decorated object) wants, caches the
// answer by the object's queue key while its UID, generation and labels
// stay the same, for at most Options.AnswerTTL, selects those objects from shared informers and delivers them
// keyed like children. It also maps a change of a related object back to
// exactly the parents whose declarations select it, through an index by
// resource, without calling the customize hook inside an event handler.
//
// Namespace rules, set by the customize hook's own version: under v1 a
// namespaced parent sees related objects of its own namespace only (a
// rule's namespaceSelector is ignored; a rule naming another namespace is
// an error); under v2, and for cluster-scoped parents, a rule may name any
// namespace, select namespaces by label, or, with neither, select in every
// namespace (names too). Cluster-scoped related resources have no
// namespace (a rule's namespace is ignored for them, and a
// namespaceSelector fails the sync, as in metacontroller). The objects are
// keyed by the version of the hooks that receive them (sync, finalize),
// and a v1 hook of a namespaced parent gets only those of the parent's
// namespace (Delivered).
//
// A Resolver is safe for concurrent use.
package related
