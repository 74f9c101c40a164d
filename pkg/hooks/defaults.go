/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hooks

import (
	"time"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// Timeout returns the timeout a call of the webhook w is bounded by, as
// v1alpha1.SetDefaults_Hook defaults it: its timeout, or
// v1alpha1.DefaultHookTimeout when it sets none (or one that is not
// positive).
func Timeout(w *v1alpha1.Webhook) time.Duration {
	if w.Timeout != nil && w.Timeout.Duration > 0 {
		return w.Timeout.Duration
	}
	return v1alpha1.DefaultHookTimeout
}

// ResponseMode returns how the answers of hook are decoded, as
// v1alpha1.SetDefaults_Hook defaults it: its webhook's
// responseUnMarshallMode, else loose for v1 and strict for v2.
func ResponseMode(hook *v1alpha1.Hook) v1alpha1.ResponseUnMarshallMode {
	if m := hook.Webhook.ResponseUnMarshallMode; m != nil {
		return *m
	}
	if hook.Version != nil && *hook.Version == v1alpha1.HookVersionV2 {
		return v1alpha1.ResponseUnMarshallModeStrict
	}
	return v1alpha1.ResponseUnMarshallModeLoose
}
