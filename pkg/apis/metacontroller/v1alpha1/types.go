package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// CompositeController runs a controller whose logic lives in a sync hook:
// for every parent object it calls the hook with the parent and its
// children, and makes the children what the hook returns.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=compositecontrollers,scope=Cluster,shortName=cc;cctl,categories=metacontroller
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, request not yet submitted"
// +kubebuilder:printcolumn:name="Parent",type=string,JSONPath=`.spec.parentResource.resource`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Failing",type=integer,JSONPath=`.status.failingObjects`,description="Objects whose last sync failed"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
type CompositeController struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec CompositeControllerSpec `json:"spec"`
	// +optional
	Status ControllerStatus `json:"status,omitempty"`
}

// CompositeControllerSpec says which parents to watch, which children they
// own and which hooks decide those children.
type CompositeControllerSpec struct {
	// ParentResource is the resource whose objects are the parents.
	ParentResource CompositeControllerParentResourceRule `json:"parentResource"`
	// ChildResources are the resources the parents own. Children of any other
	// resource returned by the sync hook are an error.
	// +optional
	ChildResources []CompositeControllerChildResourceRule `json:"childResources,omitempty"`
	// Hooks are the webhooks that hold the controller's logic; a sync hook
	// is required.
	// +optional
	Hooks *CompositeControllerHooks `json:"hooks,omitempty"`
	// ResyncPeriodSeconds, when set, syncs every parent again at that period;
	// a value below 1 means 1.
	// +optional
	ResyncPeriodSeconds *int32 `json:"resyncPeriodSeconds,omitempty"`
	// GenerateSelector, when true, ignores the parent's spec.selector: children
	// are labelled controller-uid=<parent uid> and selected by that label.
	// +optional
	GenerateSelector *bool `json:"generateSelector,omitempty"`
	// EndpointConfigs give, per host, the transport settings and credentials
	// of the webhooks that set none of their own.
	// +optional
	EndpointConfigs []EndpointConfig `json:"endpointConfigs,omitempty"`
}

// ResourceRule names a resource by API version and plural resource name.
type ResourceRule struct {
	// APIVersion is the group/version of the resource, or just the version for
	// the core group ("v1").
	APIVersion string `json:"apiVersion"`
	// Resource is the plural resource name ("configmaps").
	Resource string `json:"resource"`
}

// CompositeControllerParentResourceRule selects the parent objects.
type CompositeControllerParentResourceRule struct {
	ResourceRule `json:",inline"`
	// RevisionHistory says which parent fields make up a revision for rolling
	// updates. Defaults to fieldPaths ["spec"].
	// +optional
	RevisionHistory *CompositeControllerRevisionHistory `json:"revisionHistory,omitempty"`
	// LabelSelector, when set, limits the controller to parents that match.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// IgnoreStatusChanges, when true, makes a change of only the parent's
	// status trigger no sync.
	// +optional
	IgnoreStatusChanges *bool `json:"ignoreStatusChanges,omitempty"`
}

// CompositeControllerRevisionHistory lists the parent fields recorded in a
// ControllerRevision.
type CompositeControllerRevisionHistory struct {
	// FieldPaths are dot-separated paths into the parent ("spec", "spec.template").
	// +optional
	FieldPaths []string `json:"fieldPaths,omitempty"`
}

// ChildUpdateMethod says what happens to an existing child whose desired
// state differs from its observed state.
type ChildUpdateMethod string

// The update methods.
const (
	// ChildUpdateOnDelete never updates an existing child; missing children
	// are created.
	ChildUpdateOnDelete ChildUpdateMethod = "OnDelete"
	// ChildUpdateRecreate deletes a child that differs and creates it anew.
	ChildUpdateRecreate ChildUpdateMethod = "Recreate"
	// ChildUpdateInPlace applies the desired state to the existing child.
	ChildUpdateInPlace ChildUpdateMethod = "InPlace"
	// ChildUpdateRollingRecreate recreates children one at a time, moving on
	// only while the children already moved pass the status checks.
	ChildUpdateRollingRecreate ChildUpdateMethod = "RollingRecreate"
	// ChildUpdateRollingInPlace updates children in place one at a time,
	// moving on only while the children already moved pass the status checks.
	ChildUpdateRollingInPlace ChildUpdateMethod = "RollingInPlace"
)

// IsRolling reports whether m moves children one revision at a time.
func (m ChildUpdateMethod) IsRolling() bool {
	return m == ChildUpdateRollingRecreate || m == ChildUpdateRollingInPlace
}

// CompositeControllerChildResourceRule declares a child resource.
type CompositeControllerChildResourceRule struct {
	ResourceRule `json:",inline"`
	// UpdateStrategy says how children of this resource are updated.
	// Defaults to method OnDelete.
	// +optional
	UpdateStrategy *CompositeControllerChildUpdateStrategy `json:"updateStrategy,omitempty"`
}

// CompositeControllerChildUpdateStrategy is the update strategy of one child
// resource.
type CompositeControllerChildUpdateStrategy struct {
	// Method defaults to OnDelete.
	// +kubebuilder:validation:Enum=OnDelete;Recreate;InPlace;RollingRecreate;RollingInPlace
	// +optional
	Method ChildUpdateMethod `json:"method,omitempty"`
	// StatusChecks say when an updated child counts as healthy, for the
	// rolling methods.
	// +optional
	StatusChecks *ChildUpdateStatusChecks `json:"statusChecks,omitempty"`
}

// ChildUpdateStatusChecks are the checks an updated child must pass.
type ChildUpdateStatusChecks struct {
	// Conditions must all be present on the child's status.conditions.
	// +optional
	Conditions []StatusConditionCheck `json:"conditions,omitempty"`
}

// StatusConditionCheck requires a condition of a type, and optionally a
// status and reason.
type StatusConditionCheck struct {
	Type string `json:"type"`
	// +optional
	Status *string `json:"status,omitempty"`
	// +optional
	Reason *string `json:"reason,omitempty"`
}

// Hooks are the webhooks of a DecoratorController, and those of a
// CompositeController that metactl calls.
type Hooks struct {
	// Sync is called to compute the desired children (or attachments) and
	// status. It is required.
	// +optional
	Sync *Hook `json:"sync,omitempty"`
	// Finalize, when set, is called instead of Sync while the object is being
	// deleted; its presence puts a finalizer on every object.
	// +optional
	Finalize *Hook `json:"finalize,omitempty"`
	// Customize, when set, declares the related objects sent to Sync.
	// +optional
	Customize *Hook `json:"customize,omitempty"`
}

// CompositeControllerHooks are the webhooks of a CompositeController.
type CompositeControllerHooks struct {
	Hooks `json:",inline"`
	// PreUpdateChild is accepted, as metacontroller's schema accepts it, and
	// ignored: metacontroller never calls it either.
	// +optional
	PreUpdateChild *Hook `json:"preUpdateChild,omitempty"`
	// PostUpdateChild is accepted, as metacontroller's schema accepts it, and
	// ignored: metacontroller never calls it either.
	// +optional
	PostUpdateChild *Hook `json:"postUpdateChild,omitempty"`
}

// HookVersion selects how objects are keyed in the maps of a hook request.
// +kubebuilder:validation:Enum=v1;v2
type HookVersion string

// The hook versions.
const (
	// HookVersionV1 keys objects by name when they share the parent's scope,
	// and by namespace/name otherwise.
	HookVersionV1 HookVersion = "v1"
	// HookVersionV2 keys every namespaced object by namespace/name.
	HookVersionV2 HookVersion = "v2"
)

// Hook is one hook: a webhook and the protocol version it speaks.
type Hook struct {
	// Webhook is where the hook is served. It is required.
	// +optional
	Webhook *Webhook `json:"webhook,omitempty"`
	// Version defaults to v1.
	// +kubebuilder:default=v1
	// +optional
	Version *HookVersion `json:"version,omitempty"`
}

// ResponseUnMarshallMode says how strictly a hook response is decoded.
// +kubebuilder:validation:Enum=loose;strict
type ResponseUnMarshallMode string

// The response decoding modes.
const (
	// ResponseUnMarshallModeLoose ignores unknown fields (default for v1).
	ResponseUnMarshallModeLoose ResponseUnMarshallMode = "loose"
	// ResponseUnMarshallModeStrict rejects unknown fields (default for v2).
	ResponseUnMarshallModeStrict ResponseUnMarshallMode = "strict"
)

// Webhook is an HTTP endpoint, given as a URL or as an in-cluster Service
// and path, with the transport settings to reach it. When none of caBundle,
// clientTLS, authorization and basicAuth is set, they come from the first
// of the controller's endpointConfigs whose host matches the webhook's.
type Webhook struct {
	// URL is the hook's full address. When set, service and path are ignored.
	// +optional
	URL *string `json:"url,omitempty"`
	// Timeout of one call; defaults to 10s, as does a value that is not
	// positive.
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// Path is appended to the Service's address.
	// +optional
	Path *string `json:"path,omitempty"`
	// Service is an in-cluster Service serving the hook, used when url is not
	// set.
	// +optional
	Service *ServiceReference `json:"service,omitempty"`
	// ResponseUnMarshallMode defaults to loose for v1 hooks, strict for v2.
	// +optional
	ResponseUnMarshallMode *ResponseUnMarshallMode `json:"responseUnMarshallMode,omitempty"`
	// Etag turns on caching of responses keyed by the request, revalidated
	// with If-None-Match.
	// +optional
	Etag *WebhookEtagConfig `json:"etag,omitempty"`
	// CABundle verifies the hook's serving certificate.
	// +optional
	CABundle *CABundleConfig `json:"caBundle,omitempty"`
	// ClientTLS is the client certificate presented to the hook.
	// +optional
	ClientTLS *ClientTLSConfig `json:"clientTLS,omitempty"`
	// Authorization sends an Authorization header.
	// +optional
	Authorization *AuthorizationConfig `json:"authorization,omitempty"`
	// BasicAuth sends HTTP basic authentication.
	// +optional
	BasicAuth *BasicAuthConfig `json:"basicAuth,omitempty"`
}

// ServiceReference names a Service port: the hook is reached at
// protocol://name.namespace:port/path.
type ServiceReference struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Port defaults to 80.
	// +optional
	Port *int32 `json:"port,omitempty"`
	// Protocol, http (the default) or https in any case, is the scheme of
	// the address.
	// +optional
	Protocol *string `json:"protocol,omitempty"`
}

// WebhookEtagConfig configures the response cache of a hook.
type WebhookEtagConfig struct {
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// CacheTimeoutSeconds is how long a cached response is kept; defaults to
	// 60. A value below 1 keeps responses until the cache's size limits
	// push them out.
	// +optional
	CacheTimeoutSeconds *int32 `json:"cacheTimeoutSeconds,omitempty"`
	// CacheCleanupSeconds is how often expired responses are dropped;
	// defaults to 300. A value below 1 asks for no periodic cleanup: expired
	// responses are then dropped when looked up.
	// +optional
	CacheCleanupSeconds *int32 `json:"cacheCleanupSeconds,omitempty"`
}

// CABundleConfig is a PEM bundle of certificate authorities, given inline or
// read from a Secret or ConfigMap; exactly one of the three must be set.
type CABundleConfig struct {
	// +optional
	Inline *string `json:"inline,omitempty"`
	// +optional
	SecretRef *KeyReference `json:"secretRef,omitempty"`
	// +optional
	ConfigMapRef *KeyReference `json:"configMapRef,omitempty"`
}

// KeyReference names one key of a Secret or ConfigMap.
type KeyReference struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Key defaults to ca.crt for a CA bundle and token for an authorization.
	// +optional
	Key string `json:"key,omitempty"`
}

// SecretReference names a Secret.
type SecretReference struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// ClientTLSConfig is a client certificate and key read from a Secret.
type ClientTLSConfig struct {
	SecretRef SecretReference `json:"secretRef"`
	// CertKey defaults to tls.crt.
	// +optional
	CertKey *string `json:"certKey,omitempty"`
	// PrivateKeyKey defaults to tls.key.
	// +optional
	PrivateKeyKey *string `json:"privateKeyKey,omitempty"`
}

// AuthorizationType is the scheme of an Authorization header, such as
// Bearer or Token.
type AuthorizationType string

// AuthorizationBearer sends "Authorization: Bearer <token>".
const AuthorizationBearer AuthorizationType = "Bearer"

// AuthorizationConfig sends "Authorization: <type> <token>", the token read
// from a Secret.
type AuthorizationConfig struct {
	// Type is the scheme; defaults to Bearer. Basic is refused: basicAuth
	// is the field for it.
	// +optional
	Type      AuthorizationType `json:"type,omitempty"`
	SecretRef KeyReference      `json:"secretRef"`
}

// EndpointConfig gives the transport settings and credentials of every
// webhook of the controller that is called at Host and sets none of
// caBundle, clientTLS, authorization and basicAuth itself (metacontroller
// v4.16 and later).
type EndpointConfig struct {
	// Host is compared, ignoring case, with the host of a webhook's address
	// (its url, or name.namespace:port of its service). Without a port it
	// stands for the default port of the address's scheme: 80 for http, 443
	// for https. The first entry that matches applies.
	Host string `json:"host"`
	// CABundle verifies the hook's serving certificate.
	// +optional
	CABundle *CABundleConfig `json:"caBundle,omitempty"`
	// ClientTLS is the client certificate presented to the hook.
	// +optional
	ClientTLS *ClientTLSConfig `json:"clientTLS,omitempty"`
	// Authorization sends an Authorization header.
	// +optional
	Authorization *AuthorizationConfig `json:"authorization,omitempty"`
	// BasicAuth sends HTTP basic authentication.
	// +optional
	BasicAuth *BasicAuthConfig `json:"basicAuth,omitempty"`
}

// BasicAuthConfig sends HTTP basic authentication read from a Secret.
type BasicAuthConfig struct {
	SecretRef SecretReference `json:"secretRef"`
	// UsernameKey defaults to username.
	// +optional
	UsernameKey *string `json:"usernameKey,omitempty"`
	// PasswordKey defaults to password.
	// +optional
	PasswordKey *string `json:"passwordKey,omitempty"`
}

// ControllerStatus is what metactl reports on a CompositeController or
// DecoratorController (ours).
type ControllerStatus struct {
	// ObservedGeneration is the generation of the spec the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready is true when the controller runs with synced
	// caches, whether or not its objects' syncs succeed; Synced, present
	// while it runs, is false when the last sync of some of its objects
	// failed, and its message names them.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// FailingObjects is the number of objects (parents of a
	// CompositeController, decorated objects of a DecoratorController)
	// whose last sync failed; updated every few seconds at most.
	// +optional
	FailingObjects int32 `json:"failingObjects,omitempty"`
}

// Condition types on CompositeController and DecoratorController; their
// reasons are in reasons.go.
const (
	// ConditionReady is true while the controller runs.
	ConditionReady = "Ready"
	// ConditionSynced is false while the last sync of some of the
	// controller's objects failed.
	ConditionSynced = "Synced"
)

// CompositeControllerList is a list of CompositeControllers.
// +kubebuilder:object:root=true
type CompositeControllerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CompositeController `json:"items"`
}

// DecoratorController adds labels, annotations, status and attachments to
// existing objects of any resource, as its sync hook decides.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=decoratorcontrollers,scope=Cluster,shortName=dec;decorators,categories=metacontroller
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, request not yet submitted"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Failing",type=integer,JSONPath=`.status.failingObjects`,description="Objects whose last sync failed"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
type DecoratorController struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec DecoratorControllerSpec `json:"spec"`
	// +optional
	Status ControllerStatus `json:"status,omitempty"`
}

// DecoratorControllerSpec says which objects to decorate and with which hooks.
type DecoratorControllerSpec struct {
	// Resources are the rules selecting the objects to decorate; at least
	// one is required.
	Resources []DecoratorControllerResourceRule `json:"resources"`
	// Attachments are the resources of the children owned by decorated objects.
	// +optional
	Attachments []DecoratorControllerAttachmentRule `json:"attachments,omitempty"`
	// Hooks are the webhooks that hold the controller's logic; a sync hook
	// is required.
	// +optional
	Hooks *Hooks `json:"hooks,omitempty"`
	// ResyncPeriodSeconds, when set, syncs every decorated object again at
	// that period; a value below 1 means 1.
	// +optional
	ResyncPeriodSeconds *int32 `json:"resyncPeriodSeconds,omitempty"`
	// EndpointConfigs give, per host, the transport settings and credentials
	// of the webhooks that set none of their own.
	// +optional
	EndpointConfigs []EndpointConfig `json:"endpointConfigs,omitempty"`
}

// DecoratorControllerResourceRule selects objects of one resource; both
// selectors must match when present.
type DecoratorControllerResourceRule struct {
	ResourceRule `json:",inline"`
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// +optional
	AnnotationSelector *AnnotationSelector `json:"annotationSelector,omitempty"`
	// IgnoreStatusChanges, when true, makes a change of only the object's
	// status trigger no sync.
	// +optional
	IgnoreStatusChanges *bool `json:"ignoreStatusChanges,omitempty"`
}

// AnnotationSelector selects objects by annotations, like a label selector.
type AnnotationSelector struct {
	// +optional
	MatchAnnotations map[string]string `json:"matchAnnotations,omitempty"`
	// +optional
	MatchExpressions []metav1.LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// DecoratorControllerAttachmentRule declares an attachment resource.
type DecoratorControllerAttachmentRule struct {
	ResourceRule `json:",inline"`
	// +optional
	UpdateStrategy *DecoratorControllerAttachmentUpdateStrategy `json:"updateStrategy,omitempty"`
}

// DecoratorControllerAttachmentUpdateStrategy is the update strategy of one
// attachment resource. Attachments have no revisions: RollingRecreate means
// Recreate and RollingInPlace means InPlace, as in metacontroller.
type DecoratorControllerAttachmentUpdateStrategy struct {
	// Method defaults to OnDelete.
	// +kubebuilder:validation:Enum=OnDelete;Recreate;InPlace;RollingRecreate;RollingInPlace
	// +optional
	Method ChildUpdateMethod `json:"method,omitempty"`
}

// DecoratorControllerList is a list of DecoratorControllers.
// +kubebuilder:object:root=true
type DecoratorControllerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DecoratorController `json:"items"`
}

// ControllerRevision records one revision of a parent for rolling updates:
// the parent fields named by revisionHistory.fieldPaths and the children that
// belong to it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=controllerrevisions,scope=Namespaced,categories=metacontroller
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, request not yet submitted"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ControllerRevision struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// ParentPatch holds the recorded parent fields.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	ParentPatch runtime.RawExtension `json:"parentPatch"`
	// Children are the children that belong to this revision.
	// +optional
	Children []ControllerRevisionChildren `json:"children,omitempty"`
}

// ControllerRevisionChildren names the children of one kind in a revision.
type ControllerRevisionChildren struct {
	APIGroup string   `json:"apiGroup"`
	Kind     string   `json:"kind"`
	Names    []string `json:"names"`
}

// ControllerRevisionList is a list of ControllerRevisions.
// +kubebuilder:object:root=true
type ControllerRevisionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ControllerRevision `json:"items"`
}

// RelatedResourceRule is one entry of a customize hook's relatedResources:
// the objects of a resource to send to the sync hook as related objects.
// Names cannot be combined with a selector, nor namespace with
// namespaceSelector.
type RelatedResourceRule struct {
	ResourceRule `json:",inline"`
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// +optional
	Names []string `json:"names,omitempty"`
}
