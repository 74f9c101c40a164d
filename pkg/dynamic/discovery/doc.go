// Package discovery maps an apiVersion and a resource name (or kind) to what
// the API server serves: the resource's kind, scope and subresources.
//
// A ResourceMap holds one snapshot of the server's discovery documents. It is
// refreshed in the background at an interval, and on demand when a lookup
// misses, at most once per MinRefreshInterval however many lookups miss at
// once. Lookups never block on the network except for that on-demand refresh.
// Subscribers are told after every refresh that changed the snapshot, so a
// controller waiting for a CRD to be installed can start as soon as it is.
//
// A ResourceMap is safe for concurrent use.
package discovery
