package composite

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/informer"
)

func parentObject(t *testing.T, generation, selector string) *informer.Object {
	t.Helper()
	o, err := informer.NewObject([]byte(`{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"p","namespace":"ns","uid":"u-1","generation":` +
		generation + `},"spec":{"selector":` + selector + `}}`))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestSelectorOfFollowsTheParentsGeneration(t *testing.T) {
	c := &Controller{cc: &v1alpha1.CompositeController{}}
	a, b := labels.Set{"app": "a"}, labels.Set{"app": "b"}

	s := c.selectorOf(parentObject(t, "1", `{"matchLabels":{"app":"a"}}`))
	if s == nil || !s.Matches(a) || s.Matches(b) {
		t.Fatalf("generation 1: selector %v", s)
	}
	// Same generation: the cached selector, even if the object says
	// otherwise (it cannot, for one generation).
	if s := c.selectorOf(parentObject(t, "1", `{"matchLabels":{"app":"b"}}`)); s == nil || !s.Matches(a) {
		t.Errorf("generation 1 again: selector %v, want the cached one", s)
	}
	if s := c.selectorOf(parentObject(t, "2", `{"matchLabels":{"app":"b"}}`)); s == nil || !s.Matches(b) || s.Matches(a) {
		t.Errorf("generation 2: selector %v, want app=b", s)
	}
	if s := c.selectorOf(parentObject(t, "3", `{}`)); s != nil {
		t.Errorf("an empty spec.selector: %v, want none", s)
	}
	if s := c.selectorOf(parentObject(t, "4", `{"matchExpressions":[{"key":"nope","operator":"DoesNotExist"}]}`)); s != nil {
		t.Errorf("a spec.selector by absence only: %v, want none", s)
	}
	if s := c.selectorOf(parentObject(t, "5", `{"matchExpressions":[{"key":"nope","operator":"DoesNotExist"},{"key":"app","operator":"Exists"}]}`)); s == nil {
		t.Error("a spec.selector with an Exists requirement: none, want it")
	}
	c.forgetSelector("u-1")
	if len(c.selectors.entries) != 0 {
		t.Errorf("forgetSelector left %v", c.selectors.entries)
	}
}
