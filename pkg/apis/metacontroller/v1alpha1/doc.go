// Package v1alpha1 holds the metacontroller.k8s.io/v1alpha1 API that metactl
// serves: CompositeController, DecoratorController and ControllerRevision,
// with their defaulting and validation.
//
// The JSON names of every field are wire-visible: a CompositeController or
// DecoratorController written for metacontroller decodes into these types
// unchanged, and hooks written for metacontroller receive these objects as
// they would from metacontroller. Fields that metactl adds are marked (ours)
// and are always optional.
//
// Defaulting (SetDefaults_*) and validation (Validate*) are plain functions
// over the typed objects. The CRDs generated from these types (see
// manifests/crds) enforce the same enums and required fields on the API
// server; the functions here add the checks a schema cannot express and are
// what the controllers call before they start.
//
// +kubebuilder:object:generate=true
// +groupName=metacontroller.k8s.io
package v1alpha1
