package loop_test

import (
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/loop"
)

type refused struct{ err error }

func (r *refused) Error() string    { return "refused: " + r.err.Error() }
func (r *refused) Unwrap() error    { return r.err }
func (r *refused) RefusedConflict() {}

// TestIsTransientConflict: a 409 is a transient conflict, wrapped or not,
// unless an error of its chain is a RefusedConflict.
func TestIsTransientConflict(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "x", fmt.Errorf("changed"))
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"conflict":         {conflict, true},
		"wrapped conflict": {fmt.Errorf("writing: %w", conflict), true},
		"refused":          {fmt.Errorf("writing: %w", &refused{conflict}), false},
		"other":            {fmt.Errorf("boom"), false},
	} {
		if got := loop.IsTransientConflict(tc.err); got != tc.want {
			t.Errorf("%s: IsTransientConflict = %v, want %v", name, got, tc.want)
		}
	}
}
