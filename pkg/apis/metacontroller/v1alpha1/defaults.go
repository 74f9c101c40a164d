package v1alpha1

import (
	"strings"
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

// MaxAnswerObjects is the most objects (children or attachments) one sync
// or finalize hook answer may ask for; more is an error (a hook gone wrong,
// not a controller). pkg/hooks refuses such an answer while decoding it,
// before decoding its objects.
const MaxAnswerObjects = 10000

// MaxHookTimeout is the longest webhook timeout metactl accepts: a longer
// one makes the controller object InvalidSpec. A hook call holds one of
// the controller's syncs (and its request and answer in memory) for as long
// as it waits.
const MaxHookTimeout = 5 * time.Minute

// DefaultRevisionFieldPaths are the parent fields a revision records when
// revisionHistory is not set.
var DefaultRevisionFieldPaths = []string{"spec"}

// SetDefaults_CompositeController fills every unset optional field of cc
// with its default, and puts the values that mean something else the way
// metactl reads them (see setDefaultsCommon). It is idempotent.
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
	var hooks *Hooks
	if spec.Hooks != nil {
		hooks = &spec.Hooks.Hooks
	}
	setDefaultsCommon(hooks, spec.EndpointConfigs, &spec.ResyncPeriodSeconds)
}

// SetDefaults_DecoratorController fills every unset optional field of dc
// with its default, and puts the values that mean something else the way
// metactl reads them: a rolling update method of an attachment becomes its
// non-rolling counterpart (attachments have no revisions), and see
// setDefaultsCommon. It is idempotent.
func SetDefaults_DecoratorController(dc *DecoratorController) {
	for i := range dc.Spec.Attachments {
		attachment := &dc.Spec.Attachments[i]
		if attachment.UpdateStrategy == nil {
			attachment.UpdateStrategy = &DecoratorControllerAttachmentUpdateStrategy{}
		}
		switch attachment.UpdateStrategy.Method {
		case "":
			attachment.UpdateStrategy.Method = ChildUpdateOnDelete
		case ChildUpdateRollingRecreate:
			attachment.UpdateStrategy.Method = ChildUpdateRecreate
		case ChildUpdateRollingInPlace:
			attachment.UpdateStrategy.Method = ChildUpdateInPlace
		}
	}
	setDefaultsCommon(dc.Spec.Hooks, dc.Spec.EndpointConfigs, &dc.Spec.ResyncPeriodSeconds)
}

// setDefaultsCommon defaults what both kinds share: a resync period below
// 1 s becomes 1 s, as metacontroller clamps it; each hook that sets no
// connection settings of its own gets those of the endpointConfigs entry
// for its host (a copy); then every hook is defaulted.
func setDefaultsCommon(hooks *Hooks, endpointConfigs []EndpointConfig, resyncPeriodSeconds **int32) {
	if p := *resyncPeriodSeconds; p != nil && *p < 1 {
		*resyncPeriodSeconds = ptr.To[int32](1)
	}
	if hooks == nil {
		return
	}
	for _, hook := range []*Hook{hooks.Sync, hooks.Finalize, hooks.Customize} {
		if hook == nil {
			continue
		}
		if i := EndpointConfigFor(hook.Webhook, endpointConfigs); i >= 0 {
			ec := endpointConfigs[i].DeepCopy()
			hook.Webhook.CABundle, hook.Webhook.ClientTLS = ec.CABundle, ec.ClientTLS
			hook.Webhook.Authorization, hook.Webhook.BasicAuth = ec.Authorization, ec.BasicAuth
		}
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
	if w.Timeout == nil || w.Timeout.Duration <= 0 {
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
		} else {
			s.Protocol = ptr.To(strings.ToLower(*s.Protocol))
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
		if t.CertKey == nil || *t.CertKey == "" {
			t.CertKey = ptr.To(DefaultClientCertKey)
		}
		if t.PrivateKeyKey == nil || *t.PrivateKeyKey == "" {
			t.PrivateKeyKey = ptr.To(DefaultClientPrivateKeyKey)
		}
	}
	if a := w.Authorization; a != nil {
		a.Type = AuthorizationType(strings.TrimSpace(string(a.Type)))
		if a.Type == "" {
			a.Type = AuthorizationBearer
		}
		if a.SecretRef.Key == "" {
			a.SecretRef.Key = DefaultAuthorizationKey
		}
	}
	if b := w.BasicAuth; b != nil {
		if b.UsernameKey == nil || *b.UsernameKey == "" {
			b.UsernameKey = ptr.To(DefaultBasicAuthUsernameKey)
		}
		if b.PasswordKey == nil || *b.PasswordKey == "" {
			b.PasswordKey = ptr.To(DefaultBasicAuthPasswordKey)
		}
	}
}
