package manager

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/metactl/metactl/internal/rbac"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/hooks/credentials"
)

// credentialPolicy is the policy the options give for hooks' credentials.
func (o Options) credentialPolicy() credentials.CredentialPolicy {
	return credentials.CredentialPolicy{Namespaces: o.CredentialNamespaces, AllowInsecure: o.AllowInsecureCredentials}
}

// credentialRefusal is why a controller's hooks may not use their
// credentials: the reason of its Ready condition, and a message naming
// every refused hook setting.
type credentialRefusal struct {
	reason, message string
}

// checkCredentials checks, with the credential policy, the connection
// settings each hook of obj (a controller object of kind k) would be
// called with: its own, or those of the endpointConfigs entry for its
// host, as the controllers default them. It returns nil when all are
// allowed, or when obj does not decode (building the controller refuses
// it). The hooks' SecureTransport checks every call with the same policy;
// this check, made before the controller is built, keeps a refused
// controller from starting at all.
func (o Options) checkCredentials(k *kind, obj *unstructured.Unstructured) *credentialRefusal {
	policy := o.credentialPolicy()
	var (
		reason   string
		messages []string
	)
	for _, h := range hookWebhooks(k, obj) {
		err := policy.Check(h.webhook)
		ce, ok := err.(*credentials.CredentialError)
		if !ok {
			continue
		}
		if reason == "" {
			reason = ce.Refused
		}
		messages = append(messages, h.name+" hook: "+ce.Error())
	}
	if reason == "" {
		return nil
	}
	return &credentialRefusal{reason: reason, message: strings.Join(messages, "; ")}
}

// namedWebhook is the webhook one hook of a controller object is called
// with, and the hook's name (sync, finalize, customize).
type namedWebhook struct {
	name    string
	webhook *v1alpha1.Webhook
}

// hookWebhooks returns the webhook each hook of obj (a controller object
// of kind k) is called with: its own settings, or those of the
// endpointConfigs entry for its host, as the controllers default them.
// None when obj does not decode.
func hookWebhooks(k *kind, obj *unstructured.Unstructured) []namedWebhook {
	var hs *v1alpha1.Hooks
	switch k.resource {
	case v1alpha1.CompositeControllerResource:
		var cc v1alpha1.CompositeController
		if runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &cc) != nil {
			return nil
		}
		v1alpha1.SetDefaults_CompositeController(&cc)
		if cc.Spec.Hooks != nil {
			hs = &cc.Spec.Hooks.Hooks
		}
	case v1alpha1.DecoratorControllerResource:
		var dc v1alpha1.DecoratorController
		if runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &dc) != nil {
			return nil
		}
		v1alpha1.SetDefaults_DecoratorController(&dc)
		hs = dc.Spec.Hooks
	}
	if hs == nil {
		return nil
	}
	var out []namedWebhook
	for _, h := range []struct {
		name string
		hook *v1alpha1.Hook
	}{{"sync", hs.Sync}, {"finalize", hs.Finalize}, {"customize", hs.Customize}} {
		if h.hook != nil && h.hook.Webhook != nil {
			out = append(out, namedWebhook{h.name, h.hook.Webhook})
		}
	}
	return out
}

// The resources credentials are read from.
var (
	secretsResource    = &discovery.Resource{APIVersion: "v1", Name: "secrets", Kind: "Secret", Namespaced: true, Verbs: []string{"get", "list", "watch"}}
	configMapsResource = &discovery.Resource{APIVersion: "v1", Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: []string{"get", "list", "watch"}}
)

// credentialAccess is what reading the credentials of obj's hooks (those
// checkCredentials checks) needs: get of each Secret and ConfigMap, by
// name, in its namespace. metactl reads them with its own rights; a
// controller that acts as a ServiceAccount must have them too, so that it
// cannot have metactl send another team's credentials to its hook.
func credentialAccess(k *kind, obj *unstructured.Unstructured) []rbac.Access {
	var access []rbac.Access
	for _, h := range hookWebhooks(k, obj) {
		for _, ref := range credentials.CredentialReferences(h.webhook) {
			res := secretsResource
			if ref.Kind == "ConfigMap" {
				res = configMapsResource
			}
			access = append(access, rbac.Access{Resource: res, Namespace: ref.Namespace, Name: ref.Name, Verbs: []string{"get"}})
		}
	}
	return access
}
