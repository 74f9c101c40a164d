package v1alpha1

import (
	"crypto/x509"
	"errors"
	"net/url"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateCompositeController returns every problem of cc's spec, or an
// empty list. The CRD schema accepts every object metacontroller's does;
// this checks what metactl needs to run one: the required fields, the rules
// between fields, parseable API versions, URLs, selectors and CA bundles.
// It does not check that the named resources exist; that needs discovery.
// Fields that metacontroller ignores (hooks.preUpdateChild and
// hooks.postUpdateChild, a webhook's service and path when it has a url,
// endpointConfigs entries that no webhook uses) are not checked.
func ValidateCompositeController(cc *CompositeController) field.ErrorList {
	var errs field.ErrorList
	spec := &cc.Spec
	specPath := field.NewPath("spec")

	parentPath := specPath.Child("parentResource")
	errs = append(errs, validateResourceRule(&spec.ParentResource.ResourceRule, parentPath)...)
	errs = append(errs, validateLabelSelector(spec.ParentResource.LabelSelector, parentPath.Child("labelSelector"))...)
	if rh := spec.ParentResource.RevisionHistory; rh != nil {
		for i, p := range rh.FieldPaths {
			if strings.TrimSpace(p) == "" || strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".") || strings.Contains(p, "..") {
				errs = append(errs, field.Invalid(parentPath.Child("revisionHistory", "fieldPaths").Index(i), p, "must be a dot-separated path such as spec or spec.template"))
			}
		}
	}

	// The parent resource may also be a child resource: parents then own
	// parents, as in metacontroller. A resource listed twice is not an
	// error, as in metacontroller: the controller uses one entry
	// (children.Declare) and says so (engine.ReportRepeated). One resource
	// under two versions is refused once discovery has resolved it
	// (children.OtherVersion).
	for i := range spec.ChildResources {
		child := &spec.ChildResources[i]
		childPath := specPath.Child("childResources").Index(i)
		errs = append(errs, validateResourceRule(&child.ResourceRule, childPath)...)
		if s := child.UpdateStrategy; s != nil {
			errs = append(errs, validateUpdateMethod(s.Method, childMethods, childPath.Child("updateStrategy", "method"))...)
			if s.StatusChecks != nil {
				for j, c := range s.StatusChecks.Conditions {
					if c.Type == "" {
						errs = append(errs, field.Required(childPath.Child("updateStrategy", "statusChecks", "conditions").Index(j).Child("type"), ""))
					}
				}
			}
		}
	}

	var hooks *Hooks
	if spec.Hooks != nil {
		hooks = &spec.Hooks.Hooks
	}
	errs = append(errs, validateHooks(hooks, spec.EndpointConfigs, specPath)...)
	return errs
}

// ValidateDecoratorController returns every problem of dc's spec, or an
// empty list, with the same scope as ValidateCompositeController.
func ValidateDecoratorController(dc *DecoratorController) field.ErrorList {
	var errs field.ErrorList
	spec := &dc.Spec
	specPath := field.NewPath("spec")

	if len(spec.Resources) == 0 {
		errs = append(errs, field.Required(specPath.Child("resources"), "at least one resource rule is required"))
	}
	for i := range spec.Resources {
		rule := &spec.Resources[i]
		rulePath := specPath.Child("resources").Index(i)
		errs = append(errs, validateResourceRule(&rule.ResourceRule, rulePath)...)
		errs = append(errs, validateLabelSelector(rule.LabelSelector, rulePath.Child("labelSelector"))...)
		if as := rule.AnnotationSelector; as != nil {
			exprPath := rulePath.Child("annotationSelector", "matchExpressions")
			for j, req := range as.MatchExpressions {
				errs = append(errs, validateSelectorRequirement(req, exprPath.Index(j))...)
			}
		}
	}
	for i := range spec.Attachments {
		attachment := &spec.Attachments[i]
		attachmentPath := specPath.Child("attachments").Index(i)
		errs = append(errs, validateResourceRule(&attachment.ResourceRule, attachmentPath)...)
		if s := attachment.UpdateStrategy; s != nil {
			// A rolling method means its non-rolling counterpart here.
			errs = append(errs, validateUpdateMethod(s.Method, childMethods, attachmentPath.Child("updateStrategy", "method"))...)
		}
	}

	errs = append(errs, validateHooks(spec.Hooks, spec.EndpointConfigs, specPath)...)
	return errs
}

// ValidateRelatedResourceRule returns every problem of one entry of a
// customize hook's relatedResources; path is where the entry sits in the
// response.
func ValidateRelatedResourceRule(rule *RelatedResourceRule, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateResourceRule(&rule.ResourceRule, path)...)
	errs = append(errs, validateLabelSelector(rule.LabelSelector, path.Child("labelSelector"))...)
	errs = append(errs, validateLabelSelector(rule.NamespaceSelector, path.Child("namespaceSelector"))...)
	if len(rule.Names) > 0 && (rule.LabelSelector != nil || rule.NamespaceSelector != nil) {
		errs = append(errs, field.Forbidden(path.Child("names"), "names cannot be combined with labelSelector or namespaceSelector"))
	}
	if rule.Namespace != "" && rule.NamespaceSelector != nil {
		errs = append(errs, field.Forbidden(path.Child("namespace"), "namespace cannot be combined with namespaceSelector"))
	}
	for i, name := range rule.Names {
		if name == "" {
			errs = append(errs, field.Required(path.Child("names").Index(i), "names must not be empty"))
		}
	}
	return errs
}

// validateHook returns every problem of one hook, whose connection
// settings, when it sets none, come from endpointConfigs (found at
// specPath.endpointConfigs); see validateHooks.
func validateHook(hook *Hook, path *field.Path, ec *endpointConfigsInUse) field.ErrorList {
	var errs field.ErrorList
	if hook.Version != nil && *hook.Version != HookVersionV1 && *hook.Version != HookVersionV2 {
		errs = append(errs, field.NotSupported(path.Child("version"), *hook.Version, []HookVersion{HookVersionV1, HookVersionV2}))
	}
	if hook.Webhook == nil {
		return append(errs, field.Required(path.Child("webhook"), ""))
	}
	return append(errs, validateWebhook(hook.Webhook, path.Child("webhook"), ec)...)
}

var childMethods = []ChildUpdateMethod{ChildUpdateOnDelete, ChildUpdateRecreate, ChildUpdateInPlace, ChildUpdateRollingRecreate, ChildUpdateRollingInPlace}

func validateUpdateMethod(m ChildUpdateMethod, allowed []ChildUpdateMethod, path *field.Path) field.ErrorList {
	if m == "" {
		return nil
	}
	for _, a := range allowed {
		if m == a {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(path, m, allowed)}
}

func validateResourceRule(rule *ResourceRule, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if rule.APIVersion == "" {
		errs = append(errs, field.Required(path.Child("apiVersion"), ""))
	} else if _, err := schema.ParseGroupVersion(rule.APIVersion); err != nil {
		errs = append(errs, field.Invalid(path.Child("apiVersion"), rule.APIVersion, err.Error()))
	}
	if rule.Resource == "" {
		errs = append(errs, field.Required(path.Child("resource"), ""))
	} else if strings.ContainsAny(rule.Resource, "/ ") {
		errs = append(errs, field.Invalid(path.Child("resource"), rule.Resource, "must be a plural resource name such as configmaps, without a subresource"))
	}
	return errs
}

func validateLabelSelector(sel *metav1.LabelSelector, path *field.Path) field.ErrorList {
	if sel == nil {
		return nil
	}
	return metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, path)
}

// validateSelectorRequirement checks an annotation selector expression:
// the key's syntax, the operator, and values present exactly for In and
// NotIn. Annotation values are free text, so their syntax is not checked.
func validateSelectorRequirement(req metav1.LabelSelectorRequirement, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(req.Key) {
		errs = append(errs, field.Invalid(path.Child("key"), req.Key, msg))
	}
	switch req.Operator {
	case metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn:
		if len(req.Values) == 0 {
			errs = append(errs, field.Required(path.Child("values"), "must be specified when operator is In or NotIn"))
		}
	case metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist:
		if len(req.Values) > 0 {
			errs = append(errs, field.Forbidden(path.Child("values"), "may not be specified when operator is Exists or DoesNotExist"))
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("operator"), req.Operator, []metav1.LabelSelectorOperator{
			metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist}))
	}
	return errs
}

// validateHooks checks the hooks metactl calls (sync, required, finalize
// and customize) of the spec at specPath, with the endpointConfigs entries
// they use.
func validateHooks(hooks *Hooks, endpointConfigs []EndpointConfig, specPath *field.Path) field.ErrorList {
	path := specPath.Child("hooks")
	if hooks == nil || hooks.Sync == nil {
		return field.ErrorList{field.Required(path.Child("sync"), "a sync hook is required")}
	}
	ec := &endpointConfigsInUse{configs: endpointConfigs, path: specPath.Child("endpointConfigs"), checked: sets.New[int]()}
	var errs field.ErrorList
	errs = append(errs, validateHook(hooks.Sync, path.Child("sync"), ec)...)
	if hooks.Finalize != nil {
		errs = append(errs, validateHook(hooks.Finalize, path.Child("finalize"), ec)...)
	}
	if hooks.Customize != nil {
		errs = append(errs, validateHook(hooks.Customize, path.Child("customize"), ec)...)
	}
	return errs
}

// endpointConfigsInUse are a spec's endpointConfigs, and which of them were
// checked already: an entry is checked once, where it is, and only if a
// webhook uses it.
type endpointConfigsInUse struct {
	configs []EndpointConfig
	path    *field.Path
	checked sets.Set[int]
}

func validateWebhook(w *Webhook, path *field.Path, ec *endpointConfigsInUse) field.ErrorList {
	var errs field.ErrorList
	switch {
	case w.URL == nil && w.Service == nil:
		errs = append(errs, field.Required(path, "one of url and service must be set"))
	case w.URL != nil:
		// The url wins: service and path are ignored.
		// The message shows the URL without its credentials: it reaches
		// the log, an Event and the Ready condition.
		shown := RedactURL(*w.URL)
		u, err := url.Parse(*w.URL)
		switch {
		case err != nil:
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err // without the URL
			}
			errs = append(errs, field.Invalid(path.Child("url"), shown, err.Error()))
		case u.Scheme != "http" && u.Scheme != "https":
			errs = append(errs, field.Invalid(path.Child("url"), shown, "must be an absolute http or https URL"))
		case u.Host == "":
			errs = append(errs, field.Invalid(path.Child("url"), shown, "must name a host"))
		}
	default:
		s := w.Service
		sp := path.Child("service")
		// Both are parts of the host called (ServiceReference.Host): a
		// name such as "evil.example.com/" would call another host, with
		// the credentials of the Service's namespace.
		if s.Name == "" {
			errs = append(errs, field.Required(sp.Child("name"), ""))
		} else {
			// Capitals are allowed, as DNS ignores case: a name that
			// metacontroller calls stays valid.
			for _, msg := range validation.IsDNS1035Label(strings.ToLower(s.Name)) {
				errs = append(errs, field.Invalid(sp.Child("name"), s.Name, msg))
			}
		}
		if s.Namespace == "" {
			errs = append(errs, field.Required(sp.Child("namespace"), ""))
		} else {
			for _, msg := range validation.IsDNS1123Label(strings.ToLower(s.Namespace)) {
				errs = append(errs, field.Invalid(sp.Child("namespace"), s.Namespace, msg))
			}
		}
		if s.Port != nil && (*s.Port < 1 || *s.Port > 65535) {
			errs = append(errs, field.Invalid(sp.Child("port"), *s.Port, "must be between 1 and 65535"))
		}
		if p := s.Protocol; p != nil && !strings.EqualFold(*p, "http") && !strings.EqualFold(*p, "https") {
			errs = append(errs, field.NotSupported(sp.Child("protocol"), *p, []string{"http", "https"}))
		}
		if w.Path != nil && *w.Path != "" && !strings.HasPrefix(*w.Path, "/") {
			errs = append(errs, field.Invalid(path.Child("path"), *w.Path, "must start with /"))
		}
	}
	if w.Timeout != nil && w.Timeout.Duration > MaxHookTimeout {
		errs = append(errs, field.Invalid(path.Child("timeout"), w.Timeout.Duration.String(),
			"must be at most "+MaxHookTimeout.String()+", metactl's longest hook timeout"))
	}
	// A timeout that is not positive means the default, and etag's
	// durations below 1 s mean no expiry and no periodic cleanup: see
	// SetDefaults_Hook.
	if m := w.ResponseUnMarshallMode; m != nil && *m != ResponseUnMarshallModeLoose && *m != ResponseUnMarshallModeStrict {
		errs = append(errs, field.NotSupported(path.Child("responseUnMarshallMode"), *m, []ResponseUnMarshallMode{ResponseUnMarshallModeLoose, ResponseUnMarshallModeStrict}))
	}
	switch i := EndpointConfigFor(w, ec.configs); {
	case i >= 0 && !ec.checked.Has(i):
		ec.checked.Insert(i)
		c := &ec.configs[i]
		errs = append(errs, validateConnection(c.CABundle, c.ClientTLS, c.Authorization, c.BasicAuth, ec.path.Index(i))...)
	case i < 0:
		errs = append(errs, validateConnection(w.CABundle, w.ClientTLS, w.Authorization, w.BasicAuth, path)...)
	}
	return errs
}

// validateConnection checks the connection settings of a webhook, or of an
// endpointConfigs entry, at path.
func validateConnection(ca *CABundleConfig, clientTLS *ClientTLSConfig, authz *AuthorizationConfig, basic *BasicAuthConfig, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ca != nil {
		errs = append(errs, validateCABundle(ca, path.Child("caBundle"))...)
	}
	if clientTLS != nil {
		errs = append(errs, validateSecretReference(clientTLS.SecretRef, path.Child("clientTLS", "secretRef"))...)
	}
	if authz != nil && basic != nil {
		errs = append(errs, field.Forbidden(path.Child("basicAuth"), "authorization and basicAuth are mutually exclusive"))
	}
	if authz != nil {
		ap := path.Child("authorization")
		switch t := strings.TrimSpace(string(authz.Type)); {
		case strings.EqualFold(t, "Basic"):
			errs = append(errs, field.Invalid(ap.Child("type"), authz.Type, "use basicAuth for basic authentication"))
		case !isToken(t):
			errs = append(errs, field.Invalid(ap.Child("type"), authz.Type, "must be an authentication scheme such as Bearer: letters, digits and !#$%&'*+-.^_`|~ only"))
		}
		errs = append(errs, validateSecretReference(SecretReference{Name: authz.SecretRef.Name, Namespace: authz.SecretRef.Namespace}, ap.Child("secretRef"))...)
	}
	if basic != nil {
		errs = append(errs, validateSecretReference(basic.SecretRef, path.Child("basicAuth", "secretRef"))...)
	}
	return errs
}

// isToken reports whether s is empty or an HTTP token (RFC 9110), the
// syntax of an authentication scheme.
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func validateCABundle(ca *CABundleConfig, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	if ca.Inline != nil {
		n++
		if !x509.NewCertPool().AppendCertsFromPEM([]byte(*ca.Inline)) {
			errs = append(errs, field.Invalid(path.Child("inline"), "<PEM>", "holds no PEM-encoded certificate"))
		}
	}
	if ref := ca.SecretRef; ref != nil {
		n++
		errs = append(errs, validateSecretReference(SecretReference{Name: ref.Name, Namespace: ref.Namespace}, path.Child("secretRef"))...)
	}
	if ref := ca.ConfigMapRef; ref != nil {
		n++
		errs = append(errs, validateSecretReference(SecretReference{Name: ref.Name, Namespace: ref.Namespace}, path.Child("configMapRef"))...)
	}
	if n != 1 {
		errs = append(errs, field.Invalid(path, n, "exactly one of inline, secretRef and configMapRef must be set"))
	}
	return errs
}

func validateSecretReference(ref SecretReference, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ref.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), ""))
	}
	if ref.Namespace == "" {
		errs = append(errs, field.Required(path.Child("namespace"), ""))
	}
	return errs
}
