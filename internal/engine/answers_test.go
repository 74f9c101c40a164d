package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"

	"github.com/metactl/metactl/pkg/hooks"
)

func controllerObject(annotations map[string]string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController", "metadata": map[string]any{"name": "web"}}}
	obj.SetAnnotations(annotations)
	return obj
}

func TestCheckList(t *testing.T) {
	typo := []hooks.UnknownField{{Key: "childern", Suggestion: "children"}}
	for _, tc := range []struct {
		name       string
		annotation map[string]string
		current    map[string]string // nil: Current fails
		absent     bool
		observed   int
		refused    bool
		want       []string
		// other: the answer's unknown keys are x, not the typo.
		other bool
	}{
		{name: "list present", observed: 3},
		{name: "no children to lose", absent: true, other: true},
		{name: "typo on a new parent", absent: true, refused: true, want: []string{
			`sync hook answer refused: it has no "children" list (it has "childern" (did you mean "children"?)), and a key that likely misspells it`,
			`Fix the key`,
			`annotate the CompositeController with metactl.io/absent-children=empty`,
		}},
		{name: "typo on a new parent, read as empty", annotation: map[string]string{AbsentChildrenAnnotation: "empty"}, absent: true},
		{name: "refused by default", absent: true, observed: 2, refused: true, want: []string{
			`sync hook answer refused: it has no "children" list (it has "childern" (did you mean "children"?)), and reading that as an empty list would delete all its children (2); the answer was not applied.`,
			`A hook that means to delete them all answers "children": [].`,
			`annotate the CompositeController with metactl.io/absent-children=empty`,
		}},
		{name: "refuse", annotation: map[string]string{AbsentChildrenAnnotation: "refuse"}, absent: true, observed: 1, refused: true},
		{name: "empty", annotation: map[string]string{AbsentChildrenAnnotation: "empty"}, absent: true, observed: 1},
		{name: "empty set since the start", annotation: nil, current: map[string]string{AbsentChildrenAnnotation: "empty"}, absent: true, observed: 1},
		{name: "empty removed since the start", annotation: map[string]string{AbsentChildrenAnnotation: "empty"}, current: map[string]string{}, absent: true, observed: 1, refused: true},
		{name: "invalid value", current: map[string]string{AbsentChildrenAnnotation: "yes"}, absent: true, observed: 1, refused: true, want: []string{`(its value "yes" is not one of "refuse", "empty")`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &Answers{Resource: "CompositeController", List: "children", Annotation: AbsentChildrenAnnotation, Object: controllerObject(tc.annotation)}
			a.Current = func(context.Context) (*unstructured.Unstructured, error) {
				if tc.current == nil {
					return nil, errors.New("not found")
				}
				return controllerObject(tc.current), nil
			}
			unknown := typo
			if tc.other {
				unknown = []hooks.UnknownField{{Key: "x"}}
			}
			err := a.CheckList(context.Background(), "sync", tc.absent, tc.observed, unknown)
			if isRefusedAnswer(err) != tc.refused || (err != nil && !tc.refused) {
				t.Fatalf("err = %v, want refused %v", err, tc.refused)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message %q lacks %q", err, want)
				}
			}
		})
	}
}

func TestValidateAbsentListAnnotation(t *testing.T) {
	for value, valid := range map[string]bool{"empty": true, "refuse": true, "": false, "Empty": false, "true": false} {
		errs := validateAbsentListAnnotation(map[string]string{AbsentChildrenAnnotation: value}, AbsentChildrenAnnotation)
		if (len(errs) == 0) != valid {
			t.Errorf("%q: errs = %v, want valid %v", value, errs, valid)
		}
	}
	if errs := validateAbsentListAnnotation(nil, AbsentChildrenAnnotation); len(errs) != 0 {
		t.Errorf("no annotation: %v", errs)
	}
}

func TestReportUnknown(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	a := &Answers{Kind: "compositecontroller", Controller: "web", List: "children", Recorder: rec}
	obj := &corev1.ConfigMap{}
	a.reportUnknown(context.Background(), obj, "sync", nil)
	a.reportUnknown(context.Background(), obj, "sync", []hooks.UnknownField{{Key: "childern", Suggestion: "children"}, {Key: "x"}})
	if len(rec.Events) != 1 {
		t.Fatalf("%d Events, want 1 (none without unknown keys)", len(rec.Events))
	}
	want := `Warning UnknownAnswerField compositecontroller web: the sync hook answered with unknown keys "childern" (did you mean "children"?), "x", which metactl ignores; the keys metactl knows are "status", "children", "resyncAfterSeconds", "finalized", "events"`
	if got := <-rec.Events; got != want {
		t.Errorf("Event\n%s\nwant\n%s", got, want)
	}
}
