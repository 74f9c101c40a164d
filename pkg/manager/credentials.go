package manager

import (
	"strings"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/hooks"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// credentialPolicy is the policy the options give for hooks' credentials.
func (o Options) credentialPolicy() hooks.CredentialPolicy {
	return hooks.CredentialPolicy{Namespaces: o.CredentialNamespaces, AllowInsecure: o.AllowInsecureCredentials}
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
	var hs *v1alpha1.Hooks
	switch k.resource {
	case v1alpha1.CompositeControllerResource:
		var cc v1alpha1.CompositeController
		if runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &cc) != nil {
			return nil // not valid: the controller refused it when built
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
	policy := o.credentialPolicy()
	var (
		reason   string
		messages []string
	)
	for _, h := range []struct {
		name string
		hook *v1alpha1.Hook
	}{{"sync", hs.Sync}, {"finalize", hs.Finalize}, {"customize", hs.Customize}} {
		if h.hook == nil {
			continue
		}
		err := policy.Check(h.hook.Webhook)
		ce, ok := err.(*hooks.CredentialError)
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
