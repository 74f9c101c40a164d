package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Default values of optional fields.
const (
	DefaultHookTimeout                = 10 * time.Second
	DefaultServicePort          int32 = 80
	DefaultServiceProtocol            = "http"
	DefaultEtagCacheTimeout     int32 = 60
	DefaultEtagCacheCleanup     int32 = 300
	DefaultCABundleKey                = "ca.crt"
	DefaultAuthorizationKey           = "token"
	DefaultClientCertKey              = "tls.crt"
	DefaultClientPrivateKeyKey        = "tls.key"
	DefaultBasicAuthUsernameKey       = "username"
	DefaultBasicAuthPasswordKey       = "password"
)

// DefaultRevisionFieldPaths are the parent fields a revision records when
// revisionHistory is not set.
var DefaultRevisionFieldPaths = []string{"spec"}

// SetDefaults_CompositeController fills every unset optional field of cc
// with its default. It is idempotent.
//
// The controllers default a copy: the object sent to hooks as "controller"
// is the one the user wrote, as metacontroller sends it.
func SetDefaults_CompositeController(cc *CompositeController) {
	spec := &cc.Spec
	if spec.ParentResource.RevisionHistory == nil {
		spec.ParentResource.RevisionHistory = &CompositeControllerRevisionHistory{}
	}
	if len(spec.ParentResource.RevisionHistory.FieldPaths) == 0 {
		spec.ParentResource.RevisionHistory.FieldPaths = append([]string(nil), DefaultRevisionFieldPaths...)
	}
	for i := range spec.ChildResources {
		child := &spec.ChildResources[i]
		if child.UpdateStrategy == nil {
			child.UpdateStrategy = &CompositeControllerChildUpdateStrategy{}
		}
		if child.UpdateStrategy.Method == "" {
			child.UpdateStrategy.Method = ChildUpdateOnDelete
		}
	}
	setDefaultsHooks(spec.Hooks)
}

// SetDefaults_DecoratorController fills every unset optional field of dc
// with its default. It is idempotent.
func SetDefaults_DecoratorController(dc *DecoratorController) {
	for i := range dc.Spec.Attachments {
		attachment := &dc.Spec.Attachments[i]
		if attachment.UpdateStrategy == nil {
			attachment.UpdateStrategy = &DecoratorControllerAttachmentUpdateStrategy{}
		}
		if attachment.UpdateStrategy.Method == "" {
			attachment.UpdateStrategy.Method = ChildUpdateOnDelete
		}
	}
	setDefaultsHooks(dc.Spec.Hooks)
}

func setDefaultsHooks(hooks *Hooks) {
	if hooks == nil {
		return
	}
	for _, hook := range []*Hook{hooks.Sync, hooks.Finalize, hooks.Customize} {
		SetDefaults_Hook(hook)
	}
}

// SetDefaults_Hook fills the unset optional fields of a hook. A nil hook,
// or one without a webhook, is left alone.
func SetDefaults_Hook(hook *Hook) {
	if hook == nil {
		return
	}
	if hook.Version == nil {
		hook.Version = ptr.To(HookVersionV1)
	}
	w := hook.Webhook
	if w == nil {
		return
	}
	if w.Timeout == nil {
		w.Timeout = &metav1.Duration{Duration: DefaultHookTimeout}
	}
	if w.ResponseUnMarshallMode == nil {
		mode := ResponseUnMarshallModeLoose
		if *hook.Version == HookVersionV2 {
			mode = ResponseUnMarshallModeStrict
		}
		w.ResponseUnMarshallMode = &mode
	}
	if s := w.Service; s != nil {
		if s.Port == nil {
			s.Port = ptr.To(DefaultServicePort)
		}
		if s.Protocol == nil {
			s.Protocol = ptr.To(DefaultServiceProtocol)
		}
	}
	if e := w.Etag; e != nil {
		if e.Enabled == nil {
			e.Enabled = ptr.To(false)
		}
		if e.CacheTimeoutSeconds == nil {
			e.CacheTimeoutSeconds = ptr.To(DefaultEtagCacheTimeout)
		}
		if e.CacheCleanupSeconds == nil {
			e.CacheCleanupSeconds = ptr.To(DefaultEtagCacheCleanup)
		}
	}
	if ca := w.CABundle; ca != nil {
		for _, ref := range []*KeyReference{ca.SecretRef, ca.ConfigMapRef} {
			if ref != nil && ref.Key == "" {
				ref.Key = DefaultCABundleKey
			}
		}
	}
	if t := w.ClientTLS; t != nil {
		if t.CertKey == nil {
			t.CertKey = ptr.To(DefaultClientCertKey)
		}
		if t.PrivateKeyKey == nil {
			t.PrivateKeyKey = ptr.To(DefaultClientPrivateKeyKey)
		}
	}
	if a := w.Authorization; a != nil && a.SecretRef.Key == "" {
		a.SecretRef.Key = DefaultAuthorizationKey
	}
	if b := w.BasicAuth; b != nil {
		if b.UsernameKey == nil {
			b.UsernameKey = ptr.To(DefaultBasicAuthUsernameKey)
		}
		if b.PasswordKey == nil {
			b.PasswordKey = ptr.To(DefaultBasicAuthPasswordKey)
		}
	}
}
