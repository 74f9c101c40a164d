// Package decorator runs one DecoratorController: it decorates existing
// objects of any resource, selected by label and annotation selectors, with
// the labels, annotations, status and attachments its sync hook returns.
//
// The path of one event mirrors pkg/composite:
//
//	informer event (decorated object or attachment) → handlers.go maps it to
//	the decorated object's key → work queue (internal/loop) → sync.go:
//	   1. read the object from the cache; finalize it if it is being deleted
//	      or no longer selected (and carries our finalizer), else skip
//	   2. its attachments: objects it controls that carry the annotation
//	      metacontroller.k8s.io/decorator-controller: <name>, from the
//	      owner-UID index (attachments are never adopted)
//	   3. call the sync (or finalize) hook; check its attachments; report
//	      unknown keys; refuse a sync answer without attachments while
//	      there are some, unless the controller carries
//	      controller.AbsentAttachmentsAnnotation=empty
//	   4. write attachments per update strategy (pkg/dynamic/children)
//	   3-4 again, with the attachments as written and the object with the
//	      labels, annotations and status the answer asked for, until an
//	      answer asks for no write (a fixed point; controller.MaxRounds)
//	   5. patch changed labels and annotations (null removes a key)
//	   6. replace the status when the hook returned one and it changed
//	   7. remove the finalizer on finalized; requeue after resyncAfterSeconds,
//	      or with backoff when the hook did not settle
//
// A failed hook call or an invalid answer changes nothing and leaves a
// SyncError Event on the object. Cleanup removes this controller's
// finalizer from every object, for when the DecoratorController is deleted.
package decorator
