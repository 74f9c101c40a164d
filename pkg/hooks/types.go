/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hooks

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// CompositeSyncRequest is the body of a CompositeController's sync or
// finalize hook call.
type CompositeSyncRequest struct {
	// Controller is the CompositeController as the user wrote it (not
	// defaulted).
	Controller *unstructured.Unstructured `json:"controller"`
	// Parent is the parent object.
	Parent *unstructured.Unstructured `json:"parent"`
	// Children are the parent's observed children; every declared child
	// resource has a key.
	Children ObjectMap `json:"children"`
	// Related are the objects the customize hook asked for.
	Related ObjectMap `json:"related"`
	// Finalizing is true when the finalize hook is called.
	Finalizing bool `json:"finalizing"`
}

func (r *CompositeSyncRequest) encodeRequest(e *encoder) error {
	return encodeSyncRequest(e, r.Controller, "parent", r.Parent, "children", r.Children, r.Related, r.Finalizing)
}

// encodeSyncRequest encodes the body of a sync or finalize call of
// either kind: the controller, the object synced (under objectField), its
// observed dependents (under dependentsField), the related objects and
// whether it is finalizing, in that order.
func encodeSyncRequest(e *encoder, controller *unstructured.Unstructured, objectField string, object *unstructured.Unstructured, dependentsField string, dependents, related ObjectMap, finalizing bool) error {
	e.field("controller", true)
	if err := e.object(controller); err != nil {
		return err
	}
	e.field(objectField, false)
	if err := e.object(object); err != nil {
		return err
	}
	e.field(dependentsField, false)
	if err := e.objectMap(dependents); err != nil {
		return err
	}
	e.field("related", false)
	if err := e.objectMap(related); err != nil {
		return err
	}
	e.field("finalizing", false)
	e.bool(finalizing)
	e.buf.WriteByte('}')
	return nil
}

// CompositeSyncResponse is the answer of a CompositeController's sync or
// finalize hook.
type CompositeSyncResponse struct {
	// Status replaces the parent's status. After decoding it is never nil:
	// a null or absent status decodes as an empty map.
	Status map[string]any `json:"status"`
	// Children is the complete desired set of children. Each has a
	// non-empty apiVersion, kind and metadata.name.
	Children []*unstructured.Unstructured `json:"children"`
	// ResyncAfterSeconds > 0 asks for another sync after that delay.
	ResyncAfterSeconds float64 `json:"resyncAfterSeconds"`
	// Finalized lets the finalizer be removed (finalize hook only).
	Finalized bool `json:"finalized"`
	// Events are the Events to record on the parent, checked by
	// CheckEvents (a metactl addition to the protocol).
	Events []Event `json:"events,omitempty"`

	// ChildrenAbsent is true when the answer had no children key at all:
	// Children is then empty, but the hook may not have meant "no
	// children" (a misspelt key reads the same). The controller decides
	// how to read it. An explicit null, as a Go hook's nil slice encodes,
	// is an empty list, as [] is.
	ChildrenAbsent bool `json:"-"`
	// UnknownFields are the top-level keys of the answer that the
	// protocol does not define, which loose mode ignores (strict mode
	// refuses the answer instead).
	UnknownFields []UnknownField `json:"-"`
}

// DecoratorSyncRequest is the body of a DecoratorController's sync or
// finalize hook call.
type DecoratorSyncRequest struct {
	// Controller is the DecoratorController as the user wrote it.
	Controller *unstructured.Unstructured `json:"controller"`
	// Object is the decorated object.
	Object *unstructured.Unstructured `json:"object"`
	// Attachments are the object's observed attachments; every declared
	// attachment resource has a key.
	Attachments ObjectMap `json:"attachments"`
	// Related are the objects the customize hook asked for.
	Related ObjectMap `json:"related"`
	// Finalizing is true when the finalize hook is called.
	Finalizing bool `json:"finalizing"`
}

func (r *DecoratorSyncRequest) encodeRequest(e *encoder) error {
	return encodeSyncRequest(e, r.Controller, "object", r.Object, "attachments", r.Attachments, r.Related, r.Finalizing)
}

// DecoratorSyncResponse is the answer of a DecoratorController's sync or
// finalize hook.
type DecoratorSyncResponse struct {
	// Labels to set on the object. A key whose value is nil (JSON null) is
	// removed; keys not in the map are left alone.
	Labels map[string]*string `json:"labels"`
	// Annotations to set on the object, with the same rules as Labels.
	Annotations map[string]*string `json:"annotations"`
	// Status replaces the object's status when it is not nil. A nil Status
	// (JSON null or absent) leaves the status unchanged; an empty non-nil
	// map (JSON {}) empties it. See StatusUnchanged.
	Status map[string]any `json:"status"`
	// Attachments is the complete desired set of attachments. Each has a
	// non-empty apiVersion, kind and metadata.name.
	Attachments []*unstructured.Unstructured `json:"attachments"`
	// ResyncAfterSeconds > 0 asks for another sync after that delay.
	ResyncAfterSeconds float64 `json:"resyncAfterSeconds"`
	// Finalized lets the finalizer be removed (finalize hook only).
	Finalized bool `json:"finalized"`
	// Events are the Events to record on the object (see
	// CompositeSyncResponse.Events).
	Events []Event `json:"events,omitempty"`

	// AttachmentsAbsent is true when the answer had no attachments key at
	// all (see CompositeSyncResponse.ChildrenAbsent).
	AttachmentsAbsent bool `json:"-"`
	// UnknownFields are the top-level keys of the answer that the
	// protocol does not define, which loose mode ignores.
	UnknownFields []UnknownField `json:"-"`
}

// StatusUnchanged reports whether the hook left the status alone (sent a
// null or no status).
func (r *DecoratorSyncResponse) StatusUnchanged() bool {
	return r.Status == nil
}

// CustomizeRequest is the body of a customize hook call.
type CustomizeRequest struct {
	// Controller is the CompositeController or DecoratorController as the
	// user wrote it.
	Controller *unstructured.Unstructured `json:"controller"`
	// Parent is the parent (or decorated object).
	Parent *unstructured.Unstructured `json:"parent"`
}

func (r *CustomizeRequest) encodeRequest(e *encoder) error {
	e.field("controller", true)
	if err := e.object(r.Controller); err != nil {
		return err
	}
	e.field("parent", false)
	if err := e.object(r.Parent); err != nil {
		return err
	}
	e.buf.WriteByte('}')
	return nil
}

// CustomizeResponse is the answer of a customize hook.
type CustomizeResponse struct {
	// RelatedResources say which objects to send to the sync hook as
	// related. After decoding, each rule passes
	// v1alpha1.ValidateRelatedResourceRule.
	RelatedResources []v1alpha1.RelatedResourceRule `json:"relatedResources"`
}
