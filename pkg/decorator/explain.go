package decorator

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/explain"
)

var _ engine.Explainer = (*Controller)(nil)

// Key returns a decorated object's queue key (engine.Explainer).
func (c *Controller) Key(res *engine.Watched, obj metav1.Object) engine.Key {
	return engine.KeyOf(res, obj)
}

// Selector describes the rules of the resource's spec.resources entries
// (engine.Explainer).
func (c *Controller) Selector(res *engine.Watched) string {
	i := c.index(res)
	if i < 0 {
		return ""
	}
	var rules []string
	for _, r := range c.watched[i].rules {
		rule := "labels " + r.labels.String()
		if r.labels.Empty() {
			rule = "any labels"
		}
		if a := r.annotations; len(a.MatchAnnotations) > 0 || len(a.MatchExpressions) > 0 {
			rule += fmt.Sprintf(" and annotations %v", describeAnnotations(a.MatchAnnotations, len(a.MatchExpressions)))
		}
		rules = append(rules, rule)
	}
	return "spec.resources: " + strings.Join(rules, "; or ")
}

func describeAnnotations(match map[string]string, expressions int) string {
	var parts []string
	for k, v := range match {
		parts = append(parts, k+"="+v)
	}
	slices.Sort(parts)
	if expressions > 0 {
		parts = append(parts, fmt.Sprintf("%d matchExpressions", expressions))
	}
	return strings.Join(parts, ",")
}

// ExplainDependents lists the object's attachments in the cache: those
// it controls that carry this decorator's annotation
// (engine.Explainer).
func (c *Controller) ExplainDependents(obj *unstructured.Unstructured) ([]explain.Dependent, *explain.Rollout) {
	return engine.OwnedDependents(c.attachments, obj, c.isAttachment), nil
}

// index is res's position in c.watched, -1 when it is none of them.
func (c *Controller) index(res *engine.Watched) int {
	return slices.IndexFunc(c.watched, func(w *watchedResource) bool { return w.Watched == res })
}
