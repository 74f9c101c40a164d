package v1alpha1

import (
	"crypto/x509"
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
// empty list. It checks what the CRD schema cannot: the rules between
// fields, parseable API versions, URLs, selectors and CA bundles. It does not
// check that the named resources exist; that needs discovery.
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

	parent := resourceKey(spec.ParentResource.ResourceRule)
	seen := sets.New[string]()
	for i := range spec.ChildResources {
		child := &spec.ChildResources[i]
		childPath := specPath.Child("childResources").Index(i)
		errs = append(errs, validateResourceRule(&child.ResourceRule, childPath)...)
		key := resourceKey(child.ResourceRule)
		switch {
		case key == parent:
			errs = append(errs, field.Invalid(childPath, key, "the parent resource cannot also be a child resource"))
		case seen.Has(key):
			errs = append(errs, field.Duplicate(childPath, key))
		}
		seen.Insert(key)
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

	errs = append(errs, validateHooks(spec.Hooks, specPath.Child("hooks"))...)
	errs = append(errs, validateResyncPeriod(spec.ResyncPeriodSeconds, specPath.Child("resyncPeriodSeconds"))...)
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
	seen := sets.New[string]()
	for i := range spec.Attachments {
		attachment := &spec.Attachments[i]
		attachmentPath := specPath.Child("attachments").Index(i)
		errs = append(errs, validateResourceRule(&attachment.ResourceRule, attachmentPath)...)
		key := resourceKey(attachment.ResourceRule)
		if seen.Has(key) {
			errs = append(errs, field.Duplicate(attachmentPath, key))
		}
		seen.Insert(key)
		if s := attachment.UpdateStrategy; s != nil {
			errs = append(errs, validateUpdateMethod(s.Method, attachmentMethods, attachmentPath.Child("updateStrategy", "method"))...)
		}
	}

	errs = append(errs, validateHooks(spec.Hooks, specPath.Child("hooks"))...)
	errs = append(errs, validateResyncPeriod(spec.ResyncPeriodSeconds, specPath.Child("resyncPeriodSeconds"))...)
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

// ValidateHook returns every problem of one hook.
func ValidateHook(hook *Hook, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if hook.Version != nil && *hook.Version != HookVersionV1 && *hook.Version != HookVersionV2 {
		errs = append(errs, field.NotSupported(path.Child("version"), *hook.Version, []HookVersion{HookVersionV1, HookVersionV2}))
	}
	if hook.Webhook == nil {
		return append(errs, field.Required(path.Child("webhook"), ""))
	}
	return append(errs, validateWebhook(hook.Webhook, path.Child("webhook"))...)
}

var (
	childMethods      = []ChildUpdateMethod{ChildUpdateOnDelete, ChildUpdateRecreate, ChildUpdateInPlace, ChildUpdateRollingRecreate, ChildUpdateRollingInPlace}
	attachmentMethods = []ChildUpdateMethod{ChildUpdateOnDelete, ChildUpdateRecreate, ChildUpdateInPlace}
)

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

// resourceKey identifies a resource rule for duplicate detection.
func resourceKey(rule ResourceRule) string {
	return rule.APIVersion + "/" + rule.Resource
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

func validateHooks(hooks *Hooks, path *field.Path) field.ErrorList {
	if hooks == nil || hooks.Sync == nil {
		return field.ErrorList{field.Required(path.Child("sync"), "a sync hook is required")}
	}
	var errs field.ErrorList
	errs = append(errs, ValidateHook(hooks.Sync, path.Child("sync"))...)
	if hooks.Finalize != nil {
		errs = append(errs, ValidateHook(hooks.Finalize, path.Child("finalize"))...)
	}
	if hooks.Customize != nil {
		errs = append(errs, ValidateHook(hooks.Customize, path.Child("customize"))...)
	}
	return errs
}

func validateResyncPeriod(seconds *int32, path *field.Path) field.ErrorList {
	if seconds != nil && *seconds < 1 {
		return field.ErrorList{field.Invalid(path, *seconds, "must be at least 1 when set")}
	}
	return nil
}

func validateWebhook(w *Webhook, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case w.URL != nil && w.Service != nil:
		errs = append(errs, field.Invalid(path, "url and service", "exactly one of url and service must be set"))
	case w.URL == nil && w.Service == nil:
		errs = append(errs, field.Required(path, "exactly one of url and service must be set"))
	case w.URL != nil:
		u, err := url.Parse(*w.URL)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(path.Child("url"), *w.URL, err.Error()))
		case u.Scheme != "http" && u.Scheme != "https":
			errs = append(errs, field.Invalid(path.Child("url"), *w.URL, "must be an absolute http or https URL"))
		case u.Host == "":
			errs = append(errs, field.Invalid(path.Child("url"), *w.URL, "must name a host"))
		}
	default:
		s := w.Service
		sp := path.Child("service")
		if s.Name == "" {
			errs = append(errs, field.Required(sp.Child("name"), ""))
		}
		if s.Namespace == "" {
			errs = append(errs, field.Required(sp.Child("namespace"), ""))
		}
		if s.Port != nil && (*s.Port < 1 || *s.Port > 65535) {
			errs = append(errs, field.Invalid(sp.Child("port"), *s.Port, "must be between 1 and 65535"))
		}
		if s.Protocol != nil && *s.Protocol != "http" && *s.Protocol != "https" {
			errs = append(errs, field.NotSupported(sp.Child("protocol"), *s.Protocol, []string{"http", "https"}))
		}
		if w.Path != nil && *w.Path != "" && !strings.HasPrefix(*w.Path, "/") {
			errs = append(errs, field.Invalid(path.Child("path"), *w.Path, "must start with /"))
		}
	}
	if w.Timeout != nil && w.Timeout.Duration <= 0 {
		errs = append(errs, field.Invalid(path.Child("timeout"), w.Timeout.Duration.String(), "must be positive"))
	}
	if m := w.ResponseUnMarshallMode; m != nil && *m != ResponseUnMarshallModeLoose && *m != ResponseUnMarshallModeStrict {
		errs = append(errs, field.NotSupported(path.Child("responseUnMarshallMode"), *m, []ResponseUnMarshallMode{ResponseUnMarshallModeLoose, ResponseUnMarshallModeStrict}))
	}
	if e := w.Etag; e != nil {
		if v := e.CacheTimeoutSeconds; v != nil && *v < 1 {
			errs = append(errs, field.Invalid(path.Child("etag", "cacheTimeoutSeconds"), *v, "must be at least 1"))
		}
		if v := e.CacheCleanupSeconds; v != nil && *v < 1 {
			errs = append(errs, field.Invalid(path.Child("etag", "cacheCleanupSeconds"), *v, "must be at least 1"))
		}
	}
	if ca := w.CABundle; ca != nil {
		errs = append(errs, validateCABundle(ca, path.Child("caBundle"))...)
	}
	if t := w.ClientTLS; t != nil {
		errs = append(errs, validateSecretReference(t.SecretRef, path.Child("clientTLS", "secretRef"))...)
	}
	if w.Authorization != nil && w.BasicAuth != nil {
		errs = append(errs, field.Forbidden(path.Child("basicAuth"), "authorization and basicAuth are mutually exclusive"))
	}
	if a := w.Authorization; a != nil {
		ap := path.Child("authorization")
		if a.Type != AuthorizationBearer {
			errs = append(errs, field.NotSupported(ap.Child("type"), a.Type, []AuthorizationType{AuthorizationBearer}))
		}
		errs = append(errs, validateSecretReference(SecretReference{Name: a.SecretRef.Name, Namespace: a.SecretRef.Namespace}, ap.Child("secretRef"))...)
	}
	if b := w.BasicAuth; b != nil {
		errs = append(errs, validateSecretReference(b.SecretRef, path.Child("basicAuth", "secretRef"))...)
	}
	return errs
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
