// Package decorator runs one DecoratorController: it decorates existing
// objects of any resource, selected by label and annotation selectors, with
// the labels, annotations, status and attachments its sync hook returns.
//
// The engine, engine.Engine, runs it as it runs a CompositeController
// (see internal/engine for the path of one event); Controller is its
// engine.Controller and supplies what is a DecoratorController's own:
//
//	controller.go  New: the spec checked and resolved, the watched
//	               resources (engine.Watched) and their selectors;
//	               Watch: informers of the watched resources (objects
//	               selected or carrying the finalizer concern it) and of
//	               the attachments; a queue key (engine.Key) names the
//	               watched resource and the object
//	handlers.go    an attachment's event → its owner's key, when the
//	               attachment carries metacontroller.k8s.io/
//	               decorator-controller: <name>
//	sync.go        Observe: the object's attachments, the objects it controls that carry the
//	               annotation, from the owner-UID index (attachments are
//	               never adopted); the sync request, the answer read
//	               (labels and annotations, null removing a key; a null
//	               status leaves it), the attachments checked and marked
//
// A failed hook call or an invalid answer changes nothing and leaves a
// SyncError Event on the object. Cleanup removes this controller's
// finalizer from every object, for when the DecoratorController is deleted.
package decorator
