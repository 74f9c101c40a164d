package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of every type in this package.
const GroupName = "metacontroller.k8s.io"

// SchemeGroupVersion is the group and version of every type in this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// Resource names, as the API server serves them.
var (
	CompositeControllerResource = SchemeGroupVersion.WithResource("compositecontrollers")
	DecoratorControllerResource = SchemeGroupVersion.WithResource("decoratorcontrollers")
	ControllerRevisionResource  = SchemeGroupVersion.WithResource("controllerrevisions")
)

var (
	// SchemeBuilder registers this package's types with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this package's types to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&CompositeController{}, &CompositeControllerList{},
		&DecoratorController{}, &DecoratorControllerList{},
		&ControllerRevision{}, &ControllerRevisionList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
