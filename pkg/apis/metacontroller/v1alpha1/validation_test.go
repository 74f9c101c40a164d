package v1alpha1

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func validComposite() *CompositeController {
	return &CompositeController{
		ObjectMeta: metav1.ObjectMeta{Name: "things"},
		Spec: CompositeControllerSpec{
			ParentResource: CompositeControllerParentResourceRule{ResourceRule: ResourceRule{APIVersion: "ctl.example.com/v1", Resource: "things"}},
			ChildResources: []CompositeControllerChildResourceRule{{ResourceRule: ResourceRule{APIVersion: "v1", Resource: "configmaps"}}},
			Hooks:          &CompositeControllerHooks{Hooks: Hooks{Sync: &Hook{Webhook: &Webhook{URL: ptr.To("http://127.0.0.1:8080/sync")}}}},
		},
	}
}

func validDecorator() *DecoratorController {
	return &DecoratorController{
		ObjectMeta: metav1.ObjectMeta{Name: "decorate"},
		Spec: DecoratorControllerSpec{
			Resources: []DecoratorControllerResourceRule{{ResourceRule: ResourceRule{APIVersion: "apps/v1", Resource: "statefulsets"}}},
			Hooks:     &Hooks{Sync: &Hook{Webhook: &Webhook{URL: ptr.To("http://127.0.0.1:8080/sync")}}},
		},
	}
}

// checkErrors asserts that errs is empty when wantField is "", and otherwise
// that one error names wantField.
func checkErrors(t *testing.T, errs field.ErrorList, wantField string) {
	t.Helper()
	if wantField == "" {
		if len(errs) > 0 {
			t.Fatalf("want no errors, got %v", errs.ToAggregate())
		}
		return
	}
	for _, err := range errs {
		if err.Field == wantField {
			return
		}
	}
	t.Fatalf("want an error on %s, got %v", wantField, errs.ToAggregate())
}

func TestValidateCompositeController(t *testing.T) {
	cases := []struct {
		name      string
		mutate    func(cc *CompositeController)
		wantField string
	}{
		{"valid", func(*CompositeController) {}, ""},
		{"service instead of url", func(cc *CompositeController) {
			cc.Spec.Hooks.Sync.Webhook = &Webhook{Service: &ServiceReference{Name: "hook", Namespace: "ns"}, Path: ptr.To("/sync")}
		}, ""},
		{"url and service: the url wins, the service is not looked at", func(cc *CompositeController) {
			cc.Spec.Hooks.Sync.Webhook.Service = &ServiceReference{Protocol: ptr.To("ftp")}
			cc.Spec.Hooks.Sync.Webhook.Path = ptr.To("no-slash")
		}, ""},
		{"neither url nor service", func(cc *CompositeController) {
			cc.Spec.Hooks.Sync.Webhook.URL = nil
		}, "spec.hooks.sync.webhook"},
		{"url without scheme", func(cc *CompositeController) {
			cc.Spec.Hooks.Sync.Webhook.URL = ptr.To("127.0.0.1:8080/sync")
		}, "spec.hooks.sync.webhook.url"},
		{"url that does not parse", func(cc *CompositeController) {
			cc.Spec.Hooks.Sync.Webhook.URL = ptr.To("http://[::1/sync")
		}, "spec.hooks.sync.webhook.url"},
		{"service without namespace", func(cc *CompositeController) {
			cc.Spec.Hooks.Sync.Webhook = &Webhook{Service: &ServiceReference{Name: "hook"}}
		}, "spec.hooks.sync.webhook.service.namespace"},
		{"service name that is a host", func(cc *CompositeController) {
			cc.Spec.Hooks.Sync.Webhook = &Webhook{Service: &ServiceReference{Name: "evil.example.com/", Namespace: "ns"}}
		}, "spec.hooks.sync.webhook.service.name"},
		{"service name with user information", func(cc *CompositeController) {
			cc.Spec.Hooks.Sync.Webhook = &Webhook{Service: &ServiceReference{Name: "x@evil.com:443/?", Namespace: "ns"}}
		}, "spec.hooks.sync.webhook.service.name"},
		{"service namespace that is not a label", func(cc *CompositeController) {
			cc.Spec.Hooks.Sync.Webhook = &Webhook{Service: &ServiceReference{Name: "hook", Namespace: "evil.com"}}
		}, "spec.hooks.sync.webhook.service.namespace"},
		{"service port out of range", func(cc *CompositeController) {
			cc.Spec.Hooks.Sync.Webhook = &Webhook{Service: &ServiceReference{Name: "hook", Namespace: "ns", Port: ptr.To[int32](70000)}}
		}, "spec.hooks.sync.webhook.service.port"},
		{"service protocol", func(cc *CompositeController) {
			cc.Spec.Hooks.Sync.Webhook = &Webhook{Service: &ServiceReference{Name: "hook", Namespace: "ns", Protocol: ptr.To("ftp")}}
		}, "spec.hooks.sync.webhook.service.protocol"},
		{"service protocol in capitals", func(cc *CompositeController) {
			cc.Spec.Hooks.Sync.Webhook = &Webhook{Service: &ServiceReference{Name: "hook", Namespace: "ns", Protocol: ptr.To("HTTPS")}}
		}, ""},
		{"no hooks", func(cc *CompositeController) { cc.Spec.Hooks = nil }, "spec.hooks.sync"},
		{"no sync hook", func(cc *CompositeController) {
			cc.Spec.Hooks = &CompositeControllerHooks{Hooks: Hooks{Finalize: &Hook{Webhook: &Webhook{URL: ptr.To("http://h/f")}}}}
		}, "spec.hooks.sync"},
		{"sync hook without webhook", func(cc *CompositeController) { cc.Spec.Hooks.Sync.Webhook = nil }, "spec.hooks.sync.webhook"},
		{"bad finalize hook", func(cc *CompositeController) {
			cc.Spec.Hooks.Finalize = &Hook{Webhook: &Webhook{}}
		}, "spec.hooks.finalize.webhook"},
		{"hook version", func(cc *CompositeController) {
			cc.Spec.Hooks.Sync.Version = ptr.To(HookVersion("v3"))
		}, "spec.hooks.sync.version"},
		{"unmarshall mode", func(cc *CompositeController) {
			cc.Spec.Hooks.Sync.Webhook.ResponseUnMarshallMode = ptr.To(ResponseUnMarshallMode("lenient"))
		}, "spec.hooks.sync.webhook.responseUnMarshallMode"},
		{"negative timeout means the default", func(cc *CompositeController) {
			cc.Spec.Hooks.Sync.Webhook.Timeout = &metav1.Duration{Duration: -time.Second}
		}, ""},
		{"ignored hooks are not looked at", func(cc *CompositeController) {
			cc.Spec.Hooks.PreUpdateChild = &Hook{}
			cc.Spec.Hooks.PostUpdateChild = &Hook{Webhook: &Webhook{URL: ptr.To("ftp://x")}}
		}, ""},
		{"bearer and basic auth", func(cc *CompositeController) {
			cc.Spec.Hooks.Sync.Webhook.Authorization = &AuthorizationConfig{Type: AuthorizationBearer, SecretRef: KeyReference{Name: "t", Namespace: "ns"}}
			cc.Spec.Hooks.Sync.Webhook.BasicAuth = &BasicAuthConfig{SecretRef: SecretReference{Name: "b", Namespace: "ns"}}
		}, "spec.hooks.sync.webhook.basicAuth"},
		{"bearer alone", func(cc *CompositeController) {
			cc.Spec.Hooks.Sync.Webhook.Authorization = &AuthorizationConfig{Type: AuthorizationBearer, SecretRef: KeyReference{Name: "t", Namespace: "ns"}}
		}, ""},
		{"authorization type of another scheme", func(cc *CompositeController) {
			cc.Spec.Hooks.Sync.Webhook.Authorization = &AuthorizationConfig{Type: "Token", SecretRef: KeyReference{Name: "t", Namespace: "ns"}}
		}, ""},
		{"authorization without type", func(cc *CompositeController) {
			cc.Spec.Hooks.Sync.Webhook.Authorization = &AuthorizationConfig{SecretRef: KeyReference{Name: "t", Namespace: "ns"}}
		}, ""},
		{"authorization type Basic", func(cc *CompositeController) {
			cc.Spec.Hooks.Sync.Webhook.Authorization = &AuthorizationConfig{Type: " basic ", SecretRef: KeyReference{Name: "t", Namespace: "ns"}}
		}, "spec.hooks.sync.webhook.authorization.type"},
		{"authorization type that is not a scheme", func(cc *CompositeController) {
			cc.Spec.Hooks.Sync.Webhook.Authorization = &AuthorizationConfig{Type: "Bearer x", SecretRef: KeyReference{Name: "t", Namespace: "ns"}}
		}, "spec.hooks.sync.webhook.authorization.type"},
		{"endpoint config of the hook's host is checked where it is", func(cc *CompositeController) {
			cc.Spec.EndpointConfigs = []EndpointConfig{{Host: "other"}, {Host: "127.0.0.1:8080", CABundle: &CABundleConfig{}}}
		}, "spec.endpointConfigs[1].caBundle"},
		{"endpoint config of another host is not looked at", func(cc *CompositeController) {
			cc.Spec.EndpointConfigs = []EndpointConfig{{Host: "127.0.0.1:8081", CABundle: &CABundleConfig{}}}
		}, ""},
		{"endpoint config is not looked at for a hook with settings of its own", func(cc *CompositeController) {
			cc.Spec.Hooks.Sync.Webhook.Authorization = &AuthorizationConfig{SecretRef: KeyReference{Name: "t", Namespace: "ns"}}
			cc.Spec.EndpointConfigs = []EndpointConfig{{Host: "127.0.0.1:8080", CABundle: &CABundleConfig{}}}
		}, ""},
		{"basic auth secret without name", func(cc *CompositeController) {
			cc.Spec.Hooks.Sync.Webhook.BasicAuth = &BasicAuthConfig{SecretRef: SecretReference{Namespace: "ns"}}
		}, "spec.hooks.sync.webhook.basicAuth.secretRef.name"},
		{"ca bundle with two sources", func(cc *CompositeController) {
			cc.Spec.Hooks.Sync.Webhook.CABundle = &CABundleConfig{
				SecretRef: &KeyReference{Name: "a", Namespace: "ns"}, ConfigMapRef: &KeyReference{Name: "b", Namespace: "ns"}}
		}, "spec.hooks.sync.webhook.caBundle"},
		{"ca bundle that is not PEM", func(cc *CompositeController) {
			cc.Spec.Hooks.Sync.Webhook.CABundle = &CABundleConfig{Inline: ptr.To("not a certificate")}
		}, "spec.hooks.sync.webhook.caBundle.inline"},
		{"etag durations of zero and less", func(cc *CompositeController) {
			cc.Spec.Hooks.Sync.Webhook.Etag = &WebhookEtagConfig{CacheTimeoutSeconds: ptr.To[int32](0), CacheCleanupSeconds: ptr.To[int32](-1)}
		}, ""},
		{"update method", func(cc *CompositeController) {
			cc.Spec.ChildResources[0].UpdateStrategy = &CompositeControllerChildUpdateStrategy{Method: "Sideways"}
		}, "spec.childResources[0].updateStrategy.method"},
		{"rolling method", func(cc *CompositeController) {
			cc.Spec.ChildResources[0].UpdateStrategy = &CompositeControllerChildUpdateStrategy{Method: ChildUpdateRollingInPlace,
				StatusChecks: &ChildUpdateStatusChecks{Conditions: []StatusConditionCheck{{Type: "Ready", Status: ptr.To("True")}}}}
		}, ""},
		{"status check without type", func(cc *CompositeController) {
			cc.Spec.ChildResources[0].UpdateStrategy = &CompositeControllerChildUpdateStrategy{Method: ChildUpdateRollingInPlace,
				StatusChecks: &ChildUpdateStatusChecks{Conditions: []StatusConditionCheck{{Status: ptr.To("True")}}}}
		}, "spec.childResources[0].updateStrategy.statusChecks.conditions[0].type"},
		{"resync zero", func(cc *CompositeController) { cc.Spec.ResyncPeriodSeconds = ptr.To[int32](0) }, ""},
		{"resync one", func(cc *CompositeController) { cc.Spec.ResyncPeriodSeconds = ptr.To[int32](1) }, ""},
		{"parent without resource", func(cc *CompositeController) { cc.Spec.ParentResource.Resource = "" }, "spec.parentResource.resource"},
		{"parent api version", func(cc *CompositeController) { cc.Spec.ParentResource.APIVersion = "a/b/c" }, "spec.parentResource.apiVersion"},
		{"subresource as resource", func(cc *CompositeController) { cc.Spec.ChildResources[0].Resource = "pods/status" }, "spec.childResources[0].resource"},
		{"parent also a child", func(cc *CompositeController) {
			cc.Spec.ChildResources = append(cc.Spec.ChildResources, CompositeControllerChildResourceRule{ResourceRule: cc.Spec.ParentResource.ResourceRule})
		}, ""},
		// Valid, as in metacontroller: the controller uses one entry.
		{"duplicate child", func(cc *CompositeController) {
			cc.Spec.ChildResources = append(cc.Spec.ChildResources, cc.Spec.ChildResources[0])
		}, ""},
		{"parent label selector", func(cc *CompositeController) {
			cc.Spec.ParentResource.LabelSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}
		}, "spec.parentResource.labelSelector.matchExpressions[0].operator"},
		{"revision field path", func(cc *CompositeController) {
			cc.Spec.ParentResource.RevisionHistory = &CompositeControllerRevisionHistory{FieldPaths: []string{"spec..template"}}
		}, "spec.parentResource.revisionHistory.fieldPaths[0]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cc := validComposite()
			tc.mutate(cc)
			checkErrors(t, ValidateCompositeController(cc), tc.wantField)
		})
	}
}

func TestValidateDecoratorController(t *testing.T) {
	cases := []struct {
		name      string
		mutate    func(dc *DecoratorController)
		wantField string
	}{
		{"valid", func(*DecoratorController) {}, ""},
		{"no resources", func(dc *DecoratorController) { dc.Spec.Resources = nil }, "spec.resources"},
		{"resource without apiVersion", func(dc *DecoratorController) { dc.Spec.Resources[0].APIVersion = "" }, "spec.resources[0].apiVersion"},
		{"annotation selector", func(dc *DecoratorController) {
			dc.Spec.Resources[0].AnnotationSelector = &AnnotationSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpIn}}}
		}, "spec.resources[0].annotationSelector.matchExpressions[0].values"},
		{"annotation selector with free-text values", func(dc *DecoratorController) {
			dc.Spec.Resources[0].AnnotationSelector = &AnnotationSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "example.com/a", Operator: metav1.LabelSelectorOpIn, Values: []string{"any text, even / this"}}}}
		}, ""},
		{"annotation selector key", func(dc *DecoratorController) {
			dc.Spec.Resources[0].AnnotationSelector = &AnnotationSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "bad key!", Operator: metav1.LabelSelectorOpExists}}}
		}, "spec.resources[0].annotationSelector.matchExpressions[0].key"},
		{"rolling attachment", func(dc *DecoratorController) {
			dc.Spec.Attachments = []DecoratorControllerAttachmentRule{{ResourceRule: ResourceRule{APIVersion: "v1", Resource: "services"},
				UpdateStrategy: &DecoratorControllerAttachmentUpdateStrategy{Method: ChildUpdateRollingRecreate}}}
		}, ""},
		{"attachment method", func(dc *DecoratorController) {
			dc.Spec.Attachments = []DecoratorControllerAttachmentRule{{ResourceRule: ResourceRule{APIVersion: "v1", Resource: "services"},
				UpdateStrategy: &DecoratorControllerAttachmentUpdateStrategy{Method: "Sideways"}}}
		}, "spec.attachments[0].updateStrategy.method"},
		{"endpoint config used by the decorator's hook", func(dc *DecoratorController) {
			dc.Spec.EndpointConfigs = []EndpointConfig{{Host: "127.0.0.1:8080",
				Authorization: &AuthorizationConfig{SecretRef: KeyReference{Name: "t", Namespace: "ns"}},
				BasicAuth:     &BasicAuthConfig{SecretRef: SecretReference{Name: "b", Namespace: "ns"}}}}
		}, "spec.endpointConfigs[0].basicAuth"},
		{"duplicate attachment", func(dc *DecoratorController) {
			a := DecoratorControllerAttachmentRule{ResourceRule: ResourceRule{APIVersion: "v1", Resource: "services"}}
			dc.Spec.Attachments = []DecoratorControllerAttachmentRule{a, a}
		}, ""},
		{"no sync hook", func(dc *DecoratorController) { dc.Spec.Hooks.Sync = nil }, "spec.hooks.sync"},
		{"resync negative", func(dc *DecoratorController) { dc.Spec.ResyncPeriodSeconds = ptr.To[int32](-5) }, ""},
		{"no hooks", func(dc *DecoratorController) { dc.Spec.Hooks = nil }, "spec.hooks.sync"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dc := validDecorator()
			tc.mutate(dc)
			checkErrors(t, ValidateDecoratorController(dc), tc.wantField)
		})
	}
}

func TestValidateRelatedResourceRule(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
	base := ResourceRule{APIVersion: "v1", Resource: "configmaps"}
	cases := []struct {
		name      string
		rule      RelatedResourceRule
		wantField string
	}{
		{"names", RelatedResourceRule{ResourceRule: base, Names: []string{"a", "b"}}, ""},
		{"selector", RelatedResourceRule{ResourceRule: base, LabelSelector: sel}, ""},
		{"namespace and selector", RelatedResourceRule{ResourceRule: base, Namespace: "ns", LabelSelector: sel}, ""},
		{"names and label selector", RelatedResourceRule{ResourceRule: base, Names: []string{"a"}, LabelSelector: sel}, "relatedResources[0].names"},
		{"names and namespace selector", RelatedResourceRule{ResourceRule: base, Names: []string{"a"}, NamespaceSelector: sel}, "relatedResources[0].names"},
		{"namespace and namespace selector", RelatedResourceRule{ResourceRule: base, Namespace: "ns", NamespaceSelector: sel}, "relatedResources[0].namespace"},
		{"empty name", RelatedResourceRule{ResourceRule: base, Names: []string{""}}, "relatedResources[0].names[0]"},
		{"no resource", RelatedResourceRule{ResourceRule: ResourceRule{APIVersion: "v1"}}, "relatedResources[0].resource"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateRelatedResourceRule(&tc.rule, field.NewPath("relatedResources").Index(0)), tc.wantField)
		})
	}
}

func TestFullManifestsAreValid(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "compositecontroller-full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cc CompositeController
	decodeStrict(t, data, &cc)
	checkErrors(t, ValidateCompositeController(&cc), "")

	data, err = os.ReadFile(filepath.Join("testdata", "decoratorcontroller-full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var dc DecoratorController
	decodeStrict(t, data, &dc)
	checkErrors(t, ValidateDecoratorController(&dc), "")
}

func TestErrorsNameTheProblem(t *testing.T) {
	cc := validComposite()
	cc.Spec.Hooks.Sync.Webhook.URL = ptr.To("ftp://x")
	msg := ValidateCompositeController(cc).ToAggregate().Error()
	if !strings.Contains(msg, "spec.hooks.sync.webhook.url") || !strings.Contains(msg, "ftp://x") {
		t.Fatalf("message %q should name the field and the value", msg)
	}
}

func TestIgnoredFields(t *testing.T) {
	cc := validComposite()
	if got := cc.Spec.IgnoredFields(); len(got) != 0 {
		t.Errorf("IgnoredFields() = %v, want none", got)
	}
	cc.Spec.Hooks.PreUpdateChild = &Hook{}
	cc.Spec.Hooks.PostUpdateChild = &Hook{}
	if got := strings.Join(cc.Spec.IgnoredFields(), " "); got != "spec.hooks.preUpdateChild spec.hooks.postUpdateChild" {
		t.Errorf("IgnoredFields() = %q", got)
	}
}
