package v1alpha1

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestSetDefaultsCompositeController(t *testing.T) {
	cases := []struct {
		name  string
		given func(cc *CompositeController)
		want  func(cc *CompositeController)
	}{
		{
			name:  "minimal",
			given: func(*CompositeController) {},
			want:  func(*CompositeController) {},
		},
		{
			name: "v2 hook is strict, set fields kept",
			given: func(cc *CompositeController) {
				cc.Spec.ParentResource.RevisionHistory = &CompositeControllerRevisionHistory{FieldPaths: []string{"spec.template"}}
				cc.Spec.ChildResources[0].UpdateStrategy = &CompositeControllerChildUpdateStrategy{Method: ChildUpdateInPlace}
				cc.Spec.Hooks.Sync.Version = ptr.To(HookVersionV2)
				cc.Spec.Hooks.Sync.Webhook.Timeout = &metav1.Duration{Duration: 3e9}
			},
			want: func(cc *CompositeController) {
				cc.Spec.Hooks.Sync.Webhook.ResponseUnMarshallMode = ptr.To(ResponseUnMarshallModeStrict)
			},
		},
		{
			name: "v2 hook may still ask for loose",
			given: func(cc *CompositeController) {
				cc.Spec.Hooks.Sync.Version = ptr.To(HookVersionV2)
				cc.Spec.Hooks.Sync.Webhook.ResponseUnMarshallMode = ptr.To(ResponseUnMarshallModeLoose)
			},
			want: func(cc *CompositeController) {},
		},
		{
			name: "service, etag and credentials",
			given: func(cc *CompositeController) {
				cc.Spec.Hooks.Finalize = &Hook{Webhook: &Webhook{
					Service:   &ServiceReference{Name: "svc", Namespace: "ns"},
					Etag:      &WebhookEtagConfig{Enabled: ptr.To(true)},
					CABundle:  &CABundleConfig{SecretRef: &KeyReference{Name: "ca", Namespace: "ns"}},
					ClientTLS: &ClientTLSConfig{SecretRef: SecretReference{Name: "tls", Namespace: "ns"}},
					BasicAuth: &BasicAuthConfig{SecretRef: SecretReference{Name: "basic", Namespace: "ns"}},
				}}
				cc.Spec.Hooks.Customize = &Hook{Webhook: &Webhook{
					URL:           ptr.To("http://h/c"),
					Authorization: &AuthorizationConfig{Type: AuthorizationBearer, SecretRef: KeyReference{Name: "tok", Namespace: "ns"}},
				}}
			},
			want: func(cc *CompositeController) {
				f := cc.Spec.Hooks.Finalize
				f.Version = ptr.To(HookVersionV1)
				f.Webhook.Timeout = &metav1.Duration{Duration: 10 * time.Second}
				f.Webhook.ResponseUnMarshallMode = ptr.To(ResponseUnMarshallModeLoose)
				f.Webhook.Service.Port = ptr.To[int32](80)
				f.Webhook.Service.Protocol = ptr.To("http")
				f.Webhook.Etag.CacheTimeoutSeconds = ptr.To[int32](60)
				f.Webhook.Etag.CacheCleanupSeconds = ptr.To[int32](300)
				f.Webhook.CABundle.SecretRef.Key = "ca.crt"
				f.Webhook.ClientTLS.CertKey = ptr.To("tls.crt")
				f.Webhook.ClientTLS.PrivateKeyKey = ptr.To("tls.key")
				f.Webhook.BasicAuth.UsernameKey = ptr.To("username")
				f.Webhook.BasicAuth.PasswordKey = ptr.To("password")
				c := cc.Spec.Hooks.Customize
				c.Version = ptr.To(HookVersionV1)
				c.Webhook.Timeout = &metav1.Duration{Duration: 10 * time.Second}
				c.Webhook.ResponseUnMarshallMode = ptr.To(ResponseUnMarshallModeLoose)
				c.Webhook.Authorization.SecretRef.Key = "token"
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := validComposite()
			tc.given(got)
			SetDefaults_CompositeController(got)

			// want is spelled out by hand: the defaults of the minimal
			// object, then what the case set, then what the case expects.
			want := validComposite()
			wantMinimalDefaults(want)
			tc.given(want)
			tc.want(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("defaults (-want +got):\n%s", diff)
			}
			again := got.DeepCopy()
			SetDefaults_CompositeController(again)
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("defaulting twice changed the object:\n%s", diff)
			}
		})
	}
}

// wantMinimalDefaults sets, by hand, what defaulting adds to validComposite.
func wantMinimalDefaults(cc *CompositeController) {
	cc.Spec.ParentResource.RevisionHistory = &CompositeControllerRevisionHistory{FieldPaths: []string{"spec"}}
	cc.Spec.ChildResources[0].UpdateStrategy = &CompositeControllerChildUpdateStrategy{Method: ChildUpdateOnDelete}
	cc.Spec.Hooks.Sync.Version = ptr.To(HookVersionV1)
	cc.Spec.Hooks.Sync.Webhook.Timeout = &metav1.Duration{Duration: 10 * time.Second}
	cc.Spec.Hooks.Sync.Webhook.ResponseUnMarshallMode = ptr.To(ResponseUnMarshallModeLoose)
}

func TestSetDefaultsDecoratorController(t *testing.T) {
	dc := validDecorator()
	dc.Spec.Attachments = []DecoratorControllerAttachmentRule{
		{ResourceRule: ResourceRule{APIVersion: "v1", Resource: "services"}},
		{ResourceRule: ResourceRule{APIVersion: "v1", Resource: "configmaps"}, UpdateStrategy: &DecoratorControllerAttachmentUpdateStrategy{Method: ChildUpdateInPlace}},
	}
	SetDefaults_DecoratorController(dc)
	if m := dc.Spec.Attachments[0].UpdateStrategy.Method; m != ChildUpdateOnDelete {
		t.Errorf("attachment 0 method = %q, want OnDelete", m)
	}
	if m := dc.Spec.Attachments[1].UpdateStrategy.Method; m != ChildUpdateInPlace {
		t.Errorf("attachment 1 method = %q, want InPlace (set)", m)
	}
	if v := dc.Spec.Hooks.Sync.Version; v == nil || *v != HookVersionV1 {
		t.Errorf("sync hook version = %v, want v1", v)
	}
}
