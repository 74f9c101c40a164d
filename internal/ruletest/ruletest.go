// Package ruletest holds the checks that the kinds' tests of their rules
// without an API server (pkg/composite, pkg/decorator) share: of a kind's
// New refusing or accepting a spec, and of a sync's check of a hook's
// answer (engine.Sync's Desired).
package ruletest

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/hooks"
)

// Refusal says what a kind's New must return: an *engine.InvalidSpecError
// (Invalid), an error satisfying discovery.IsNotFound (NotFound), or,
// with neither, no error; Want are in the error's message.
type Refusal struct {
	Invalid, NotFound bool
	Want              []string
}

// CheckNew fails t unless err, New's error, is what r says.
func CheckNew(t *testing.T, err error, r Refusal) {
	t.Helper()
	var invalid *engine.InvalidSpecError
	switch {
	case r.Invalid && !errors.As(err, &invalid):
		t.Fatalf("New: %v, want an InvalidSpecError", err)
	case r.NotFound && !discovery.IsNotFound(err):
		t.Fatalf("New: %v, want a not-found error", err)
	case !r.Invalid && !r.NotFound && err != nil:
		t.Fatalf("New refused a valid spec: %v", err)
	}
	for _, want := range r.Want {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

// Desired returns the dependents sync's Desired makes of response, by
// "Kind key" (children.Key). With refusal set, it fails t unless Desired
// refuses the answer with an error containing refusal, and returns nil.
func Desired(t *testing.T, sync engine.Sync, response hooks.Response, refusal string) map[string]*unstructured.Unstructured {
	t.Helper()
	desired, err := sync.Desired(response)
	if refusal != "" {
		if err == nil || !strings.Contains(err.Error(), refusal) {
			t.Fatalf("error %v, want one containing %q", err, refusal)
		}
		return nil
	}
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	out := map[string]*unstructured.Unstructured{}
	for res, set := range desired {
		for key, obj := range set {
			out[res.Kind+" "+key] = obj
		}
	}
	return out
}
