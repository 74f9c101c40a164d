package v1alpha1

import (
	"errors"
	"fmt"
	"net/url"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// OverrideHookURLs returns a copy of ctrl, a CompositeController or
// DecoratorController as written (decoded from YAML or JSON, not
// defaulted), with its hooks called elsewhere: the one rule of the
// --hook-url and --customize-hook-url flags of `metactl plan` and
// `metactl hook test`.
//
//   - hookURL replaces the address of the sync and finalize hooks;
//     customizeHookURL that of the customize hook. Each must be an
//     absolute http or https URL.
//   - A URL without a path ("http://127.0.0.1:8080") is a base: each hook
//     keeps its own path (that of its url, or its webhook.path; else
//     /sync, /finalize, /customize).
//   - Without customizeHookURL, the customize hook is called at hookURL's
//     scheme and host, with its own path (hookURL's path is the sync
//     hook's).
//   - A hook called elsewhere carries no credentials: its caBundle,
//     clientTLS, authorization and basicAuth are dropped, and it takes
//     nothing from spec.endpointConfigs (whose host could match the new
//     address); its timeout, responseUnMarshallMode, etag and version are
//     kept. A hook left where it is keeps its credentials: the
//     endpointConfigs entry that applies to it (see EndpointConfigFor) is
//     written into its webhook before spec.endpointConfigs is removed.
//
// With neither URL, ctrl is returned unchanged (a copy).
func OverrideHookURLs(ctrl *unstructured.Unstructured, hookURL, customizeHookURL string) (*unstructured.Unstructured, error) {
	ctrl = ctrl.DeepCopy()
	if hookURL == "" && customizeHookURL == "" {
		return ctrl, nil
	}
	base, err := parseHookURL(hookURL)
	if err != nil {
		return nil, err
	}
	customize, err := parseHookURL(customizeHookURL)
	if err != nil {
		return nil, err
	}
	if customize == nil && base != nil {
		customize = &url.URL{Scheme: base.Scheme, User: base.User, Host: base.Host}
	}
	rawConfigs, _, _ := unstructured.NestedSlice(ctrl.Object, "spec", "endpointConfigs")
	configs := make([]EndpointConfig, len(rawConfigs))
	for i, raw := range rawConfigs {
		entry, ok := raw.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("spec.endpointConfigs[%d]: not an object", i)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(entry, &configs[i]); err != nil {
			return nil, fmt.Errorf("spec.endpointConfigs[%d]: %w", i, err)
		}
	}
	for _, h := range []struct {
		name string
		to   *url.URL
	}{{"sync", base}, {"finalize", base}, {"customize", customize}} {
		webhook, found, err := unstructured.NestedMap(ctrl.Object, "spec", "hooks", h.name, "webhook")
		if err != nil {
			return nil, fmt.Errorf("spec.hooks.%s.webhook: %w", h.name, err)
		}
		if !found {
			continue
		}
		typed := &Webhook{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(webhook, typed); err != nil {
			return nil, fmt.Errorf("spec.hooks.%s.webhook: %w", h.name, err)
		}
		if h.to == nil {
			// Left where it is: its credentials from endpointConfigs
			// written in, as they would be found.
			if i := EndpointConfigFor(typed, configs); i >= 0 {
				entry := rawConfigs[i].(map[string]any)
				for _, k := range credentialFields {
					if v, ok := entry[k]; ok {
						webhook[k] = runtime.DeepCopyJSONValue(v)
					}
				}
			}
		} else {
			u := *h.to
			if u.Path == "" || u.Path == "/" {
				u.Path, u.RawPath = ownPath(h.name, typed), ""
			}
			delete(webhook, "service")
			delete(webhook, "path")
			for _, k := range credentialFields {
				delete(webhook, k)
			}
			webhook["url"] = u.String()
		}
		if err := unstructured.SetNestedMap(ctrl.Object, webhook, "spec", "hooks", h.name, "webhook"); err != nil {
			return nil, err
		}
	}
	unstructured.RemoveNestedField(ctrl.Object, "spec", "endpointConfigs")
	return ctrl, nil
}

// credentialFields are a webhook's connection settings that an
// endpointConfigs entry supplies (as JSON fields): the ones
// setDefaultsCommon copies from the entry for the hook's host, reproduced
// here on the unstructured object.
var credentialFields = []string{"caBundle", "clientTLS", "authorization", "basicAuth"}

// parseHookURL parses an override URL; nil for "".
func parseHookURL(s string) (*url.URL, error) {
	if s == "" {
		return nil, nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		shown := "(unparsable)"
		if err == nil {
			shown = u.Redacted()
		}
		return nil, errors.New("hook URL " + shown + ": want an absolute http or https URL")
	}
	return u, nil
}

// ownPath is the path a hook keeps under a URL without one: its url's,
// else its webhook.path, else /NAME.
func ownPath(name string, w *Webhook) string {
	switch {
	case w.URL != nil:
		if own, err := url.Parse(*w.URL); err == nil && own.Path != "" && own.Path != "/" {
			return own.Path
		}
	case w.Path != nil && *w.Path != "":
		return *w.Path
	}
	return "/" + name
}
