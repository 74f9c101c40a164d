/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hooks

import (
	"time"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// Timeout returns the timeout Call applies to a call of the webhook w:
// its timeout, or v1alpha1.DefaultHookTimeout when it sets none (or one
// that is not positive).
func Timeout(w *v1alpha1.Webhook) time.Duration { return hookTimeout(w) }

// ResponseMode returns how Call decodes the answers of hook: its
// webhook's responseUnMarshallMode, else loose for v1 and strict for v2.
func ResponseMode(hook *v1alpha1.Hook) v1alpha1.ResponseUnMarshallMode { return responseMode(hook) }
