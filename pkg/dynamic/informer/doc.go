// Package informer shares dynamic informers among metactl's controllers.
//
// A Factory holds at most one running informer per GroupVersionResource.
// Controllers Acquire a handle for each resource they watch and Release it
// when they stop; the informer starts on the first Acquire and stops when
// the last handle is released, so resources are watched only while some
// controller needs them, and a controller restarting does not disturb the
// others sharing its informers.
//
// Every informer indexes its objects by the UID of their controller owner
// and keeps an index of orphans (objects without a controller owner) by
// namespace. A controller claiming a parent's children reads only the
// parent's own children and the orphans of its namespace, never every
// cached object.
//
// The cache drops metadata.managedFields from every object (metactl does not
// read them, and they are often the largest part of an object). Objects
// returned by a handle are shared with the cache: callers must not modify
// them; DeepCopy first.
//
// Factory and Informer are safe for concurrent use.
package informer
