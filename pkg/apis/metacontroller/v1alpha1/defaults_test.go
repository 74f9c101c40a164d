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
		{
			// metacontroller dereferences the absent cacheCleanupSeconds
			// here (docs/compatibility.md, "ETag cache lifetime").
			name: "etag timeout without cleanup",
			given: func(cc *CompositeController) {
				cc.Spec.Hooks.Sync.Webhook.Etag = &WebhookEtagConfig{Enabled: ptr.To(true), CacheTimeoutSeconds: ptr.To[int32](30)}
			},
			want: func(cc *CompositeController) {
				cc.Spec.Hooks.Sync.Webhook.Etag.CacheCleanupSeconds = ptr.To[int32](300)
			},
		},
		{
			name: "values metacontroller reads as others",
			given: func(cc *CompositeController) {
				cc.Spec.ResyncPeriodSeconds = ptr.To[int32](-3)
				cc.Spec.Hooks.Sync.Webhook.Timeout = &metav1.Duration{}
				cc.Spec.Hooks.Finalize = &Hook{Webhook: &Webhook{
					Service:       &ServiceReference{Name: "svc", Namespace: "ns", Protocol: ptr.To("HTTPS")},
					Etag:          &WebhookEtagConfig{Enabled: ptr.To(true), CacheTimeoutSeconds: ptr.To[int32](0), CacheCleanupSeconds: ptr.To[int32](-1)},
					Authorization: &AuthorizationConfig{Type: "  ", SecretRef: KeyReference{Name: "tok", Namespace: "ns", Key: "k"}},
					ClientTLS:     &ClientTLSConfig{SecretRef: SecretReference{Name: "tls", Namespace: "ns"}, CertKey: ptr.To(""), PrivateKeyKey: ptr.To("")},
				}}
			},
			want: func(cc *CompositeController) {
				cc.Spec.ResyncPeriodSeconds = ptr.To[int32](1)
				cc.Spec.Hooks.Sync.Webhook.Timeout = &metav1.Duration{Duration: 10 * time.Second}
				f := cc.Spec.Hooks.Finalize
				f.Version = ptr.To(HookVersionV1)
				f.Webhook.Timeout = &metav1.Duration{Duration: 10 * time.Second}
				f.Webhook.ResponseUnMarshallMode = ptr.To(ResponseUnMarshallModeLoose)
				f.Webhook.Service.Port = ptr.To[int32](80)
				f.Webhook.Service.Protocol = ptr.To("https")
				f.Webhook.Authorization.Type = AuthorizationBearer
				f.Webhook.ClientTLS.CertKey = ptr.To("tls.crt")
				f.Webhook.ClientTLS.PrivateKeyKey = ptr.To("tls.key")
			},
		},
		{
			name: "endpoint configs",
			given: func(cc *CompositeController) {
				cc.Spec.EndpointConfigs = []EndpointConfig{
					{Host: "elsewhere:8080", BasicAuth: &BasicAuthConfig{SecretRef: SecretReference{Name: "no", Namespace: "ns"}}},
					{Host: "127.0.0.1:8080", Authorization: &AuthorizationConfig{SecretRef: KeyReference{Name: "tok", Namespace: "ns"}},
						CABundle: &CABundleConfig{ConfigMapRef: &KeyReference{Name: "ca", Namespace: "ns"}}},
					{Host: "svc.ns", ClientTLS: &ClientTLSConfig{SecretRef: SecretReference{Name: "tls", Namespace: "ns"}}},
				}
				// Its own settings are used in full: nothing comes from the
				// entry of its host.
				cc.Spec.Hooks.Finalize = &Hook{Webhook: &Webhook{URL: ptr.To("http://127.0.0.1:8080/f"),
					BasicAuth: &BasicAuthConfig{SecretRef: SecretReference{Name: "own", Namespace: "ns"}}}}
				cc.Spec.Hooks.Customize = &Hook{Webhook: &Webhook{Service: &ServiceReference{Name: "SVC", Namespace: "ns"}, Path: ptr.To("/c")}}
			},
			want: func(cc *CompositeController) {
				cc.Spec.Hooks.Sync.Webhook.Authorization = &AuthorizationConfig{Type: AuthorizationBearer, SecretRef: KeyReference{Name: "tok", Namespace: "ns", Key: "token"}}
				cc.Spec.Hooks.Sync.Webhook.CABundle = &CABundleConfig{ConfigMapRef: &KeyReference{Name: "ca", Namespace: "ns", Key: "ca.crt"}}
				f := cc.Spec.Hooks.Finalize
				f.Version = ptr.To(HookVersionV1)
				f.Webhook.Timeout = &metav1.Duration{Duration: 10 * time.Second}
				f.Webhook.ResponseUnMarshallMode = ptr.To(ResponseUnMarshallModeLoose)
				f.Webhook.BasicAuth.UsernameKey = ptr.To("username")
				f.Webhook.BasicAuth.PasswordKey = ptr.To("password")
				c := cc.Spec.Hooks.Customize
				c.Version = ptr.To(HookVersionV1)
				c.Webhook.Timeout = &metav1.Duration{Duration: 10 * time.Second}
				c.Webhook.ResponseUnMarshallMode = ptr.To(ResponseUnMarshallModeLoose)
				c.Webhook.Service.Port = ptr.To[int32](80)
				c.Webhook.Service.Protocol = ptr.To("http")
				c.Webhook.ClientTLS = &ClientTLSConfig{SecretRef: SecretReference{Name: "tls", Namespace: "ns"},
					CertKey: ptr.To("tls.crt"), PrivateKeyKey: ptr.To("tls.key")}
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
			// Defaulting copies what it takes from endpointConfigs.
			for _, ec := range got.Spec.EndpointConfigs {
				if ec.Authorization != nil && ec.Authorization.SecretRef.Key != "" {
					t.Errorf("defaulting a hook changed the endpoint config it copied: %+v", ec)
				}
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
	attachment := func(method ChildUpdateMethod) DecoratorControllerAttachmentRule {
		rule := DecoratorControllerAttachmentRule{ResourceRule: ResourceRule{APIVersion: "v1", Resource: "services"}}
		if method != "" {
			rule.UpdateStrategy = &DecoratorControllerAttachmentUpdateStrategy{Method: method}
		}
		return rule
	}
	dc.Spec.Attachments = []DecoratorControllerAttachmentRule{
		attachment(""), attachment(ChildUpdateInPlace), attachment(ChildUpdateRollingRecreate), attachment(ChildUpdateRollingInPlace),
	}
	dc.Spec.ResyncPeriodSeconds = ptr.To[int32](0)
	dc.Spec.EndpointConfigs = []EndpointConfig{{Host: "127.0.0.1:8080", BasicAuth: &BasicAuthConfig{SecretRef: SecretReference{Name: "b", Namespace: "ns"}}}}
	SetDefaults_DecoratorController(dc)
	for i, want := range []ChildUpdateMethod{ChildUpdateOnDelete, ChildUpdateInPlace, ChildUpdateRecreate, ChildUpdateInPlace} {
		if m := dc.Spec.Attachments[i].UpdateStrategy.Method; m != want {
			t.Errorf("attachment %d method = %q, want %q", i, m, want)
		}
	}
	if v := dc.Spec.Hooks.Sync.Version; v == nil || *v != HookVersionV1 {
		t.Errorf("sync hook version = %v, want v1", v)
	}
	if p := dc.Spec.ResyncPeriodSeconds; p == nil || *p != 1 {
		t.Errorf("resyncPeriodSeconds = %v, want 1", p)
	}
	if b := dc.Spec.Hooks.Sync.Webhook.BasicAuth; b == nil || b.SecretRef.Name != "b" {
		t.Errorf("sync webhook basicAuth = %+v, want the endpoint config's", b)
	}
}

func TestMatchEndpointConfig(t *testing.T) {
	configs := []EndpointConfig{
		{Host: "EXAMPLE.com"},        // 0
		{Host: "example.com:8443"},   // 1
		{Host: "plain.example:80"},   // 2
		{Host: "[::1]"},              // 3
		{Host: "svc.ns"},             // 4
		{Host: "example.com"},        // 5: never reached, 0 comes first
		{Host: ""},                   // 6: matches nothing
		{Host: "other.example:8080"}, // 7
		{Host: "secure.example:443"}, // 8
	}
	for _, tc := range []struct {
		address string
		want    int
	}{
		{"https://example.com/sync", 0},
		{"https://Example.COM:443/sync", 0},
		{"http://example.com/sync", 0},
		{"http://example.com:80/sync", 0},
		{"https://example.com:8443/sync", 1},
		{"http://example.com:8080/sync", -1},
		{"http://plain.example/sync", 2},
		{"https://plain.example/sync", -1},
		{"http://[::1]:80/x", 3},
		{"https://[::1]:8443/x", -1},
		{"http://svc.ns:80/sync", 4},
		{"HTTP://svc.ns:80/sync", 4},
		{"https://svc.ns:80/sync", -1},
		{"http://other.example:8080", 7},
		{"https://secure.example", 8},
		{"http://secure.example", -1},
		{"not a url", -1},
		{"", -1},
	} {
		if got := MatchEndpointConfig(tc.address, configs); got != tc.want {
			t.Errorf("MatchEndpointConfig(%q) = %d, want %d", tc.address, got, tc.want)
		}
	}
}

func TestWebhookAddress(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    Webhook
		want string
	}{
		{"url", Webhook{URL: ptr.To("http://h/p")}, "http://h/p"},
		{"url wins over service", Webhook{URL: ptr.To("http://h/p"), Service: &ServiceReference{Name: "s", Namespace: "n"}, Path: ptr.To("/q")}, "http://h/p"},
		{"service", Webhook{Service: &ServiceReference{Name: "s", Namespace: "n"}, Path: ptr.To("/q")}, "http://s.n:80/q"},
		{"service with a query in its path", Webhook{Service: &ServiceReference{Name: "s", Namespace: "n"}, Path: ptr.To("/q?x=1")}, "http://s.n:80/q?x=1"},
		{"service protocol in capitals", Webhook{Service: &ServiceReference{Name: "s", Namespace: "n", Protocol: ptr.To("HTTPS")}}, "https://s.n:80"},
		{"service name and namespace in capitals", Webhook{Service: &ServiceReference{Name: "Svc", Namespace: "NS"}}, "http://Svc.NS:80"},
		{"service with all", Webhook{Service: &ServiceReference{Name: "s", Namespace: "n", Port: ptr.To[int32](8443), Protocol: ptr.To("https")}}, "https://s.n:8443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.w.Address()
			if err != nil || got != tc.want {
				t.Errorf("Address() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	for _, w := range []Webhook{{}, {Service: &ServiceReference{Name: "s"}},
		{Service: &ServiceReference{Name: "evil.example.com/", Namespace: "n"}},
		{Service: &ServiceReference{Name: "x@evil.com:443/?", Namespace: "n"}},
		{Service: &ServiceReference{Name: "s", Namespace: "n.evil.com"}},
		{Service: &ServiceReference{Name: "s", Namespace: "n", Protocol: ptr.To("https://evil.com/#")}},
		{Service: &ServiceReference{Name: "s", Namespace: "n"}, Path: ptr.To("@evil.com/")},
	} {
		if got, err := w.Address(); err == nil {
			t.Errorf("Address() of %+v = %q, want an error", w, got)
		}
	}
}
