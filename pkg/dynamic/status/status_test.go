package status

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestFailedPatchTest(t *testing.T) {
	gr := schema.GroupResource{Group: "example.com", Resource: "things"}
	testFailed := apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "patch", gr, "", "the server rejected our request due to an error in our request", 0, false)
	schemaRefused := apierrors.NewInvalid(schema.GroupKind{Group: "example.com", Kind: "Thing"}, "p", field.ErrorList{field.Invalid(field.NewPath("status", "count"), "x", "must be an integer")})
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{testFailed, true},
		{fmt.Errorf("wrapped: %w", testFailed), true},
		{schemaRefused, false},
		{errors.New("not from the server"), false},
	} {
		if got := failedPatchTest(tc.err); got != tc.want {
			t.Errorf("failedPatchTest(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestEqualComparesJSONValues(t *testing.T) {
	cases := []struct {
		have, want map[string]any
		equal      bool
	}{
		{nil, map[string]any{}, true},
		{map[string]any{"n": int64(1)}, map[string]any{"n": float64(1)}, true}, // a hook's 1.0, the server's 1
		{map[string]any{"n": int64(1)}, map[string]any{"n": float64(1.5)}, false},
		{map[string]any{"a": map[string]any{"b": []any{"x"}}}, map[string]any{"a": map[string]any{"b": []any{"x"}}}, true},
		{map[string]any{"a": "x"}, map[string]any{"a": "x", "b": nil}, false},
	}
	for i, tc := range cases {
		if got := Equal(tc.have, tc.want); got != tc.equal {
			t.Errorf("%d: Equal(%v, %v) = %v, want %v", i, tc.have, tc.want, got, tc.equal)
		}
	}
}
