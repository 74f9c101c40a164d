package composite

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/ownership"
	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/metrics"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// ConditionUpdated is the parent condition that reports a rolling update.
const ConditionUpdated = "Updated"

// Reasons of the Updated condition.
const (
	ReasonOnLatestRevision = "OnLatestRevision"
	ReasonRollingUpdate    = "RollingUpdate"
	ReasonWaitingForChild  = "WaitingForHealthyChild"
)

// revision is one ControllerRevision of a parent, live in this sync.
type revision struct {
	name   string
	patch  map[string]any                      // the parent fields it records
	object *unstructured.Unstructured          // nil until written
	owned  map[*children.Resource]children.Set // rolling children that belong to it
	answer *hooks.CompositeSyncResponse
	wants  map[*children.Resource]children.Set
}

// rollingSync syncs a parent with rolling child resources: the hook is
// called once per live revision (the parent with that revision's fields),
// and each rolling resource's children move to the latest revision one at
// a time, only while every child already moved passes the status checks.
// Every hook answer is checked before anything is written. It returns the
// latest revision's answer, its status carrying the Updated condition.
func (c *Controller) rollingSync(ctx context.Context, parent *unstructured.Unstructured, selector labels.Selector, observed map[*children.Resource]children.Set, related hooks.ObjectMap) (*hooks.CompositeSyncResponse, error) {
	hook := c.cc.Spec.Hooks.Sync
	latest, revisions, err := c.liveRevisions(parent, observed)
	if err != nil {
		return nil, err
	}
	for _, rev := range revisions {
		revParent := parent
		if rev != latest {
			if revParent, err = withFields(parent, rev.patch); err != nil {
				return nil, fmt.Errorf("revision %s: %w", rev.name, err)
			}
		}
		rev.answer = &hooks.CompositeSyncResponse{}
		request := &hooks.CompositeSyncRequest{
			Controller: c.object, Parent: revParent, Related: related,
			Children: c.children.ObjectMap(observed, *hook.Version, c.parent.Namespaced),
		}
		if err := c.hooks.Call(ctx, "sync", hook, request, rev.answer); err != nil {
			return nil, fmt.Errorf("revision %s: %w", rev.name, err)
		}
		if rev.wants, err = c.desiredChildren(parent, selector, rev.answer.Children); err != nil {
			return nil, fmt.Errorf("invalid sync hook response for revision %s: %w", rev.name, err)
		}
	}

	// Decide, per rolling resource, which children move now and what
	// every child should be.
	desired := make(map[*children.Resource]children.Set, len(c.children.Resources))
	var moving, waiting, pending []string
	for _, res := range c.children.Resources {
		if !res.Method.IsRolling() {
			desired[res] = latest.wants[res]
			continue
		}
		set := children.Set{}
		// New children, and those already on the latest revision.
		for key, obj := range latest.wants[res] {
			if owner := ownerOf(revisions, res, key); owner == nil || owner == latest {
				set[key] = obj
				latest.owned[res][key] = observed[res][key]
			}
		}
		// Children of older revisions keep their revision's state, except
		// one that moves when every moved child is healthy.
		var unhealthy []string
		for key := range latest.owned[res] {
			// A moved child not yet recreated counts as not healthy.
			if obj := observed[res][key]; obj == nil || !healthy(res, obj, c.statusChecks(res)) {
				unhealthy = append(unhealthy, key)
			}
		}
		sort.Strings(unhealthy)
		for _, rev := range revisions {
			if rev == latest {
				continue
			}
			for _, key := range sortedKeys(rev.owned[res]) {
				want, stillWanted := latest.wants[res][key]
				if !stillWanted {
					continue // scaled away: deleted with the rest
				}
				if len(unhealthy) == 0 && len(moving) == 0 {
					set[key] = want
					delete(rev.owned[res], key)
					latest.owned[res][key] = observed[res][key]
					moving = append(moving, res.Kind+" "+key)
					continue
				}
				pending = append(pending, res.Kind+" "+key)
				if old, ok := rev.wants[res][key]; ok {
					set[key] = old
				} else if obs := observed[res][key]; obs != nil {
					set[key] = obs // the old revision no longer describes it; leave it as it is
				}
			}
		}
		for _, key := range unhealthy {
			waiting = append(waiting, res.Kind+" "+key)
		}
		desired[res] = set
	}

	result, err := c.writer.Manage(ctx, c.children.Resources, observed, desired)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	if err := c.writeRevisions(ctx, parent, latest, revisions, result.Observed); err != nil {
		errs = append(errs, err)
	}

	response := latest.answer
	response.Status = withCondition(response.Status, updatedCondition(parent, moving, waiting, pending))
	if len(moving) > 0 || len(pending) > 0 {
		// Look again soon even if nothing else happens: a moved child's
		// health is what the next step waits for.
		if response.ResyncAfterSeconds <= 0 || response.ResyncAfterSeconds > 5 {
			response.ResyncAfterSeconds = 5
		}
	}
	klog.FromContext(ctx).V(4).Info("Rolling update", "moving", moving, "waiting", waiting, "pending", len(pending))
	return response, errors.Join(errs...)
}

// statusChecks returns the checks of a child resource.
func (c *Controller) statusChecks(res *children.Resource) []v1alpha1.StatusConditionCheck {
	for _, rule := range c.cc.Spec.ChildResources {
		if rule.APIVersion == res.APIVersion && rule.Resource == res.Name && rule.UpdateStrategy.StatusChecks != nil {
			return rule.UpdateStrategy.StatusChecks.Conditions
		}
	}
	return nil
}

// liveRevisions returns the latest revision and every live one (the latest
// and those that still own children), oldest first, each with the rolling
// children that belong to it. Children no revision lists belong to the
// latest.
func (c *Controller) liveRevisions(parent *unstructured.Unstructured, observed map[*children.Resource]children.Set) (*revision, []*revision, error) {
	patch, err := revisionPatch(parent, c.cc.Spec.ParentResource.RevisionHistory.FieldPaths)
	if err != nil {
		return nil, nil, err
	}
	latestName, err := revisionName(parent, patch)
	if err != nil {
		return nil, nil, err
	}
	newRevision := func(name string, patch map[string]any, obj *unstructured.Unstructured) *revision {
		rev := &revision{name: name, patch: patch, object: obj, owned: map[*children.Resource]children.Set{}}
		for _, res := range c.children.Resources {
			rev.owned[res] = children.Set{}
		}
		return rev
	}
	var revisions []*revision
	var latest *revision
	stored := c.revisions.OwnedBy(parent.GetUID())
	sort.Slice(stored, func(i, j int) bool {
		a, b := stored[i].GetCreationTimestamp(), stored[j].GetCreationTimestamp()
		return a.Before(&b) || (a.Equal(&b) && stored[i].GetName() < stored[j].GetName())
	})
	for _, obj := range stored {
		var cr v1alpha1.ControllerRevision
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &cr); err != nil {
			continue
		}
		var p map[string]any
		if err := json.Unmarshal(cr.ParentPatch.Raw, &p); err != nil {
			continue
		}
		rev := newRevision(obj.GetName(), p, obj)
		for _, group := range cr.Children {
			for _, res := range c.children.Resources {
				if res.GroupVersionKind().Group != group.APIGroup || res.Kind != group.Kind || !res.Method.IsRolling() {
					continue
				}
				for _, name := range group.Names {
					key := children.Key(&metav1.ObjectMeta{Namespace: parent.GetNamespace(), Name: name})
					rev.owned[res][key] = observed[res][key]
				}
			}
		}
		if obj.GetName() == latestName {
			latest = rev
		}
		revisions = append(revisions, rev)
	}
	if latest == nil {
		latest = newRevision(latestName, patch, nil)
		revisions = append(revisions, latest)
	}
	// Observed rolling children that no revision lists join the latest.
	for _, res := range c.children.Resources {
		if !res.Method.IsRolling() {
			continue
		}
		for key, obj := range observed[res] {
			if ownerOf(revisions, res, key) == nil {
				latest.owned[res][key] = obj
			}
		}
	}
	live := revisions[:0]
	for _, rev := range revisions {
		if rev == latest || rev.ownsAny() {
			live = append(live, rev)
		}
	}
	return latest, live, nil
}

func (r *revision) ownsAny() bool {
	for _, set := range r.owned {
		if len(set) > 0 {
			return true
		}
	}
	return false
}

// ownerOf returns the revision that owns a child, or nil.
func ownerOf(revisions []*revision, res *children.Resource, key string) *revision {
	for _, rev := range revisions {
		if _, ok := rev.owned[res][key]; ok {
			return rev
		}
	}
	return nil
}

// writeRevisions records which children belong to which revision: the
// latest is created or updated, older ones updated, and those left with no
// children deleted. after is the children as written.
func (c *Controller) writeRevisions(ctx context.Context, parent *unstructured.Unstructured, latest *revision, revisions []*revision, after map[*children.Resource]children.Set) error {
	client := c.opts.Client.Resource(v1alpha1.ControllerRevisionResource).Namespace(parent.GetNamespace())
	var errs []error
	for _, rev := range revisions {
		var groups []any
		for _, res := range c.children.Resources {
			if !res.Method.IsRolling() {
				continue
			}
			var names []string
			for key := range rev.owned[res] {
				// A child the latest revision no longer wants is being
				// deleted: it leaves every revision. An old revision's child
				// that is gone meanwhile leaves it too.
				_, wanted := latest.wants[res][key]
				_, exists := after[res][key]
				if wanted && (rev == latest || exists) {
					names = append(names, key[strings.LastIndex(key, "/")+1:])
				}
			}
			if len(names) > 0 {
				sort.Strings(names)
				groups = append(groups, map[string]any{"apiGroup": res.GroupVersionKind().Group, "kind": res.Kind, "names": toAny(names)})
			}
		}
		if rev != latest && len(groups) == 0 {
			if rev.object != nil {
				metrics.ObjectWrites.WithLabelValues(c.name, "delete", "revision").Inc()
				err := client.Delete(ctx, rev.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(rev.object.GetUID())}})
				if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
					errs = append(errs, fmt.Errorf("deleting revision %s: %w", rev.name, err))
				}
			}
			continue
		}
		if groups == nil {
			groups = []any{}
		}
		want := map[string]any{
			"apiVersion": v1alpha1.SchemeGroupVersion.String(),
			"kind":       "ControllerRevision",
			"metadata": map[string]any{
				"name": rev.name, "namespace": parent.GetNamespace(),
				"ownerReferences": []any{ownerRefMap(parent, c)},
			},
			"parentPatch": rev.patch,
			"children":    groups,
		}
		if rev.object == nil {
			metrics.ObjectWrites.WithLabelValues(c.name, "create", "revision").Inc()
			_, err := client.Create(ctx, &unstructured.Unstructured{Object: want}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				errs = append(errs, fmt.Errorf("creating revision %s: %w", rev.name, err))
			}
			continue
		}
		if equalJSON(rev.object.Object["children"], want["children"]) {
			continue
		}
		updated := rev.object.DeepCopy()
		updated.Object["children"] = want["children"]
		metrics.ObjectWrites.WithLabelValues(c.name, "update", "revision").Inc()
		if _, err := client.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("updating revision %s: %w", rev.name, err))
		}
	}
	return errors.Join(errs...)
}

// updatedCondition describes the rollout: on the latest revision, moving,
// or waiting for a moved child to become healthy.
func updatedCondition(parent *unstructured.Unstructured, moving, waiting, pending []string) map[string]any {
	cond := map[string]any{"type": ConditionUpdated, "observedGeneration": parent.GetGeneration()}
	switch {
	case len(pending) == 0 && len(moving) == 0:
		// Every child belongs to the latest revision, healthy or not yet.
		cond["status"], cond["reason"], cond["message"] = "True", ReasonOnLatestRevision, "every child is on the latest revision"
	case len(waiting) > 0:
		cond["status"], cond["reason"] = "False", ReasonWaitingForChild
		cond["message"] = fmt.Sprintf("waiting for %s to pass its status checks; %d children still to move", strings.Join(waiting, ", "), len(pending))
	default:
		cond["status"], cond["reason"] = "False", ReasonRollingUpdate
		cond["message"] = fmt.Sprintf("moving %s to the latest revision; %d children still to move", strings.Join(moving, ", "), len(pending))
	}
	return cond
}

// withCondition returns status with cond replacing any condition of its
// type in status.conditions, keeping the hook's other conditions and
// fields. The transition time is kept when the condition's status did not
// change.
func withCondition(status map[string]any, cond map[string]any) map[string]any {
	out := make(map[string]any, len(status)+1)
	for k, v := range status {
		out[k] = v
	}
	conditions, _ := out["conditions"].([]any)
	var kept []any
	for _, existing := range conditions {
		if m, ok := existing.(map[string]any); ok && m["type"] == cond["type"] {
			continue
		}
		kept = append(kept, existing)
	}
	out["conditions"] = append(kept, cond)
	return out
}

// healthy reports whether a child passes the status checks; for a child
// that reports status.observedGeneration, that must be its generation.
func healthy(res *children.Resource, obj *unstructured.Unstructured, checks []v1alpha1.StatusConditionCheck) bool {
	if og, found, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration"); found && res.Method == v1alpha1.ChildUpdateRollingInPlace && og != obj.GetGeneration() {
		return false
	}
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, check := range checks {
		ok := false
		for _, c := range conditions {
			m, _ := c.(map[string]any)
			if m["type"] != check.Type {
				continue
			}
			status, _ := m["status"].(string)
			reason, _ := m["reason"].(string)
			ok = (check.Status == nil || *check.Status == status) && (check.Reason == nil || *check.Reason == reason)
		}
		if !ok {
			return false
		}
	}
	return true
}

// revisionPatch extracts the parent fields a revision records.
func revisionPatch(parent *unstructured.Unstructured, fieldPaths []string) (map[string]any, error) {
	patch := map[string]any{}
	for _, p := range fieldPaths {
		path := strings.Split(p, ".")
		v, found, err := unstructured.NestedFieldCopy(parent.Object, path...)
		if err != nil {
			return nil, fmt.Errorf("revisionHistory field %s: %w", p, err)
		}
		if found {
			if err := unstructured.SetNestedField(patch, v, path...); err != nil {
				return nil, err
			}
		}
	}
	return patch, nil
}

// withFields returns a copy of parent with a revision's fields in place.
func withFields(parent *unstructured.Unstructured, patch map[string]any) (*unstructured.Unstructured, error) {
	out := parent.DeepCopy()
	var set func(dst, src map[string]any)
	set = func(dst, src map[string]any) {
		for k, v := range src {
			if sm, ok := v.(map[string]any); ok {
				if dm, ok := dst[k].(map[string]any); ok {
					set(dm, sm)
					continue
				}
			}
			dst[k] = runtime.DeepCopyJSONValue(v)
		}
	}
	set(out.Object, patch)
	return out, nil
}

// revisionName is deterministic in the parent's UID and recorded fields.
func revisionName(parent *unstructured.Unstructured, patch map[string]any) (string, error) {
	data, err := json.Marshal(patch)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(append([]byte(parent.GetUID()), data...))
	name := parent.GetName()
	if len(name) > 200 {
		name = name[:200]
	}
	return name + "-" + hex.EncodeToString(sum[:])[:10], nil
}

func ownerRefMap(parent *unstructured.Unstructured, c *Controller) map[string]any {
	ref := ownership.ControllerRef(parent, c.parent.GroupVersionKind())
	return map[string]any{"apiVersion": ref.APIVersion, "kind": ref.Kind, "name": ref.Name, "uid": string(ref.UID),
		"controller": true, "blockOwnerDeletion": true}
}

func sortedKeys(set children.Set) []string {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func equalJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
