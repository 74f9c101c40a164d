package composite

import (
	"context"
	"crypto/sha1" // metacontroller names revisions by a SHA-1 hash: a name, not a security measure
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/history"
	"github.com/metactl/metactl/internal/metrics"
	"github.com/metactl/metactl/internal/trigger"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/apply"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/dynamic/ownership"
	dynstatus "github.com/metactl/metactl/pkg/dynamic/status"
	"github.com/metactl/metactl/pkg/hooks"
)

// ConditionUpdated is the parent condition that reports a rolling update;
// its reasons are in reasons.go.
const ConditionUpdated = "Updated"

// Labels of a ControllerRevision that name its parent's resource, so that
// revisions of different parent resources never select each other.
const (
	RevisionLabelAPIGroup = "metacontroller.k8s.io/apiGroup"
	RevisionLabelResource = "metacontroller.k8s.io/resource"
)

// revision is one ControllerRevision of a parent in this sync.
type revision struct {
	name   string
	patch  map[string]any             // the parent fields it records
	parent *unstructured.Unstructured // the parent with those fields
	// object is the revision as stored; nil for a latest revision not yet
	// created.
	object *unstructured.Unstructured
	// children are the children the revision lists, by group and kind,
	// in the stored order.
	children []v1alpha1.ControllerRevisionChildren
	answer   *hooks.CompositeSyncResponse
	wants    map[*children.Resource]children.Set
}

// rollingSync syncs a parent with rolling child resources the way
// metacontroller does, so that either can take over from the other: the
// hook is called once per revision (the parent with that revision's
// fields); each child of a rolling resource belongs to the revision whose
// ControllerRevision lists it, new children to the latest; one child per
// sync moves to the latest revision, in the order of the latest answer,
// and only while every child already on it is there, updated and passes
// the status checks. Every hook answer is checked, and the revisions are
// written, before any child is; the hook is called and the children are
// written through r. It returns the latest revision's answer, its status
// carrying the Updated condition and finalized only when every revision's
// answer is (nil when it failed before writing any child), and whether it
// wrote children or ControllerRevisions.
func (c *Controller) rollingSync(ctx context.Context, r *engine.Round, parent *unstructured.Unstructured, selector labels.Selector) (*hooks.CompositeSyncResponse, bool, error) {
	version := r.Version()
	observed := r.Observed()
	revisions, duplicates, err := c.parentRevisions(ctx, parent, selector)
	if err != nil {
		return nil, false, err
	}
	latest := revisions[0]
	dependents := hooks.ObjectMapOf(version, c.parent.Namespaced, c.children.Resources, observed)
	for _, rev := range revisions {
		rev.answer = &hooks.CompositeSyncResponse{}
		request := c.request(rev.parent, dependents, r.Related(), r.Finalizing())
		if err := r.Call(ctx, request, rev.answer); err != nil {
			return nil, false, fmt.Errorf("revision %s: %w", rev.name, err)
		}
		if rev.wants, err = c.desiredChildren(parent, selector, rev.answer.Children); err != nil {
			return nil, false, engine.InvalidAnswer(fmt.Errorf("invalid %s hook response for revision %s: %w", r.HookName(), rev.name, err))
		}
	}

	owners, cond := c.rollOut(parent, revisions, observed)
	status, err := dynstatus.SetCondition(latest.answer.Status, ConditionUpdated, cond)
	if err != nil {
		return nil, false, engine.InvalidAnswer(fmt.Errorf("invalid %s hook response: %w", r.HookName(), err))
	}
	// Revisions left with no children are forgotten; the latest stays.
	live, gone := []*revision{latest}, duplicates
	for _, rev := range revisions[1:] {
		if countNames(rev.children) > 0 {
			live = append(live, rev)
		} else {
			gone = append(gone, rev.object)
		}
	}
	// Which child belongs to which revision is recorded before any child
	// is written, so that a restart goes on from there.
	revisionsWritten, err := c.writeRevisions(ctx, parent, selector, live, gone)
	if err != nil {
		return nil, false, engine.WriteFailed(err)
	}

	// Children of the latest revision get its answer; those of an older
	// one keep that revision's answer, for as long as the latest wants
	// them at all.
	desired := make(map[*children.Resource]children.Set, len(c.children.Resources))
	for _, res := range c.children.Resources {
		set := make(children.Set, len(latest.wants[res]))
		for key, obj := range latest.wants[res] {
			set[key] = obj
			if rev := owners[res][key]; rev != nil && rev != latest {
				if old, ok := rev.wants[res][key]; ok {
					set[key] = old
				}
			}
		}
		desired[res] = set
	}
	childrenWritten, err := r.Write(ctx, desired)

	response := *latest.answer
	response.Status = status
	// The smallest resync any revision asks for; finalized only when every
	// revision's answer says so, as metacontroller decides it.
	for _, rev := range revisions {
		response.ResyncAfterSeconds = engine.ShortestResync(response.ResyncAfterSeconds, rev.answer.ResyncAfterSeconds)
		response.Finalized = response.Finalized && rev.answer.Finalized
	}
	if cond["status"] != "True" {
		// Look again soon even if nothing else happens: a moved child's
		// health is what the next step waits for.
		if response.ResyncAfterSeconds <= 0 || response.ResyncAfterSeconds > 5 {
			response.ResyncAfterSeconds = 5
		}
	}
	klog.FromContext(ctx).V(4).Info("Rolling update", "revisions", len(live), "reason", cond["reason"], "message", cond["message"])
	return &response, revisionsWritten || childrenWritten, err
}

// revisionOwners is the revision each rolling child belongs to, by its
// resource and key.
type revisionOwners map[*children.Resource]map[string]*revision

// rollingChild is a rolling child of the latest answer: its resource, its
// name and its key.
type rollingChild struct {
	res  *children.Resource
	name string
	key  string
}

// rollOut decides which revision each rolling child belongs to, moving at
// most one child to the latest revision, and returns the owners and the
// Updated condition. It edits the revisions' children lists as
// metacontroller does, so that both record the same state:
//   - A revision keeps a group of names only while the latest revision
//     wants one of them, and no earlier revision (the latest first) claims
//     it; a kept group is kept as it is (claimByRevision).
//   - The latest takes the children it wants that no revision claims, and
//     those whose update would change nothing (takeUnchanged).
//   - The first child of the latest answer not on the latest revision then
//     moves to it, unless a child on the latest revision is missing, not
//     updated or failing its status checks (moveOne).
func (c *Controller) rollOut(parent *unstructured.Unstructured, revisions []*revision, observed map[*children.Resource]children.Set) (revisionOwners, map[string]any) {
	owners := c.claimByRevision(parent, revisions)
	ordered := c.rollingChildren(parent, revisions[0])
	c.takeUnchanged(owners, revisions, ordered, observed)
	return owners, c.moveOne(parent, owners, revisions, ordered, observed)
}

// childKey is the key of the child name of parent.
func childKey(parent *unstructured.Unstructured, name string) string {
	return children.Key(&metav1.ObjectMeta{Namespace: parent.GetNamespace(), Name: name})
}

// claimByRevision returns the owner of each rolling child that a revision
// claims, the latest (revisions[0]) first, each child still wanted by the
// latest revision belonging to the first revision that lists it. A
// revision keeps in its children list only the groups in which it claims
// a child.
func (c *Controller) claimByRevision(parent *unstructured.Unstructured, revisions []*revision) revisionOwners {
	latest := revisions[0]
	owners := make(revisionOwners, len(c.children.Resources))
	for _, res := range c.children.Resources {
		owners[res] = map[string]*revision{}
	}
	for _, rev := range revisions {
		var kept []v1alpha1.ControllerRevisionChildren
		for _, group := range rev.children {
			res := c.rollingResource(group.APIGroup, group.Kind)
			if res == nil {
				continue // no longer a rolling resource
			}
			claims := false
			for _, name := range group.Names {
				k := childKey(parent, name)
				if _, wanted := latest.wants[res][k]; !wanted {
					continue // being deleted: the claim lapses
				}
				if _, taken := owners[res][k]; taken {
					continue
				}
				owners[res][k] = rev
				claims = true
			}
			if claims {
				kept = append(kept, group)
			}
		}
		rev.children = kept
	}
	return owners
}

// rollingChildren returns the rolling children of the latest revision's
// answer, in its order.
func (c *Controller) rollingChildren(parent *unstructured.Unstructured, latest *revision) []rollingChild {
	var ordered []rollingChild
	for _, obj := range latest.answer.Children {
		if res := c.children.ForObject(obj); res != nil && res.Method.IsRolling() {
			ordered = append(ordered, rollingChild{res, obj.GetName(), childKey(parent, obj.GetName())})
		}
	}
	return ordered
}

// takeUnchanged gives the latest revision (revisions[0]) the children of
// ordered that no revision claims, and those on an older revision whose
// update to the latest answer would change nothing (observed has them as
// the latest wants them).
func (c *Controller) takeUnchanged(owners revisionOwners, revisions []*revision, ordered []rollingChild, observed map[*children.Resource]children.Set) {
	latest := revisions[0]
	for _, ch := range ordered {
		switch owner := owners[ch.res][ch.key]; {
		case owner == nil:
			latest.add(ch.res, ch.name)
			owners[ch.res][ch.key] = latest
		case owner != latest:
			if have := observed[ch.res][ch.key]; have != nil {
				if changed, err := c.eng.ChildDiffers(have, latest.wants[ch.res][ch.key]); err == nil && !changed {
					moveToLatest(owners, revisions, ch)
				}
			}
		}
	}
}

// moveOne moves the first child of ordered not on the latest revision
// (revisions[0]) to it, unless a child already on it is not ready
// (latestReady), and returns the Updated condition that results.
func (c *Controller) moveOne(parent *unstructured.Unstructured, owners revisionOwners, revisions []*revision, ordered []rollingChild, observed map[*children.Resource]children.Set) map[string]any {
	latest := revisions[0]
	for _, ch := range ordered {
		if owners[ch.res][ch.key] == latest {
			continue
		}
		if err := c.latestReady(parent, latest, observed); err != nil {
			return condition("False", ReasonRolloutWaiting, err.Error())
		}
		moveToLatest(owners, revisions, ch)
		return condition("False", ReasonRolloutProgressing, fmt.Sprintf("updating %s %s", ch.res.Kind, ch.name))
	}
	return condition("True", ReasonOnLatestRevision, "latest ControllerRevision: "+latest.name)
}

// moveToLatest moves ch from the older revisions' children lists to the
// latest's (revisions[0]), its owner.
func moveToLatest(owners revisionOwners, revisions []*revision, ch rollingChild) {
	for _, rev := range revisions[1:] {
		rev.remove(ch.res, ch.name)
	}
	revisions[0].add(ch.res, ch.name)
	owners[ch.res][ch.key] = revisions[0]
}

// latestReady returns why the rollout cannot go on, or nil: a child the
// latest revision lists (and still wants) that is missing, not updated to
// the latest answer, or failing its status checks. A RollingInPlace child
// that reports a status.observedGeneration must have observed its
// generation.
func (c *Controller) latestReady(parent *unstructured.Unstructured, latest *revision, observed map[*children.Resource]children.Set) error {
	for _, group := range latest.children {
		res := c.rollingResource(group.APIGroup, group.Kind)
		if res == nil {
			continue
		}
		for _, name := range group.Names {
			k := childKey(parent, name)
			want, wanted := latest.wants[res][k]
			if !wanted {
				continue // being deleted
			}
			have := observed[res][k]
			if have == nil {
				return fmt.Errorf("missing child %s %s", res.Kind, name)
			}
			changed, err := c.eng.ChildDiffers(have, want)
			if err != nil {
				return fmt.Errorf("can't check if child %s %s is updated: %w", res.Kind, name, err)
			}
			if changed {
				return fmt.Errorf("child %s %s is not updated yet", res.Kind, name)
			}
			if res.Method == v1alpha1.ChildUpdateRollingInPlace {
				if og, _, _ := unstructured.NestedInt64(have.Object, "status", "observedGeneration"); og > 0 && og < have.GetGeneration() {
					return fmt.Errorf("child %s %s with RollingInPlace update strategy hasn't observed latest spec", res.Kind, name)
				}
			}
			if err := checkStatus(have, c.statusChecks(res)); err != nil {
				return fmt.Errorf("child %s %s failed status check: %w", res.Kind, name, err)
			}
		}
	}
	return nil
}

// checkStatus checks a child's status conditions (the first of each type)
// against the checks.
func checkStatus(obj *unstructured.Unstructured, checks []v1alpha1.StatusConditionCheck) error {
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, check := range checks {
		var cond map[string]any
		for _, c := range conditions {
			if m, ok := c.(map[string]any); ok && m["type"] == check.Type {
				cond = m
				break
			}
		}
		if cond == nil {
			return fmt.Errorf("required condition type missing: %q", check.Type)
		}
		status, _ := cond["status"].(string)
		reason, _ := cond["reason"].(string)
		if check.Status != nil && status != *check.Status {
			return fmt.Errorf("%q condition status is %q (want %q)", check.Type, status, *check.Status)
		}
		if check.Reason != nil && reason != *check.Reason {
			return fmt.Errorf("%q condition reason is %q (want %q)", check.Type, reason, *check.Reason)
		}
	}
	return nil
}

// statusChecks returns the checks of a child resource: those of the entry
// whose update method it has (children.Declare).
func (c *Controller) statusChecks(res *children.Resource) []v1alpha1.StatusConditionCheck {
	if res.StatusChecks == nil {
		return nil
	}
	return res.StatusChecks.Conditions
}

// rollingResource returns the rolling child resource of a group and kind,
// or nil.
func (c *Controller) rollingResource(group, kind string) *children.Resource {
	for _, res := range c.children.Resources {
		if res.Method.IsRolling() && res.Kind == kind && res.GroupVersionKind().Group == group {
			return res
		}
	}
	return nil
}

// add lists a child in the revision, at the end of its group.
func (r *revision) add(res *children.Resource, name string) {
	group := res.GroupVersionKind().Group
	for i := range r.children {
		if g := &r.children[i]; g.APIGroup == group && g.Kind == res.Kind {
			if !slices.Contains(g.Names, name) {
				g.Names = append(g.Names, name)
			}
			return
		}
	}
	r.children = append(r.children, v1alpha1.ControllerRevisionChildren{APIGroup: group, Kind: res.Kind, Names: []string{name}})
}

// remove unlists a child from the revision; its group stays, even empty.
func (r *revision) remove(res *children.Resource, name string) {
	group := res.GroupVersionKind().Group
	for i := range r.children {
		if g := &r.children[i]; g.APIGroup == group && g.Kind == res.Kind {
			if i := slices.Index(g.Names, name); i >= 0 {
				g.Names = slices.Delete(slices.Clone(g.Names), i, i+1)
			}
			return
		}
	}
}

func countNames(groups []v1alpha1.ControllerRevisionChildren) int {
	n := 0
	for _, g := range groups {
		n += len(g.Names)
	}
	return n
}

// parentRevisions claims the parent's ControllerRevisions and returns them
// as revisions, the latest first (the one that records the parent's fields
// as they are now, new if none does), then the others, oldest first. Other
// revisions that record the same fields as the latest are returned apart,
// to be deleted.
func (c *Controller) parentRevisions(ctx context.Context, parent *unstructured.Unstructured, selector labels.Selector) ([]*revision, []*unstructured.Unstructured, error) {
	fieldPaths := c.cc.Spec.ParentResource.RevisionHistory.FieldPaths
	latestPatch, err := revisionPatch(parent, fieldPaths)
	if err != nil {
		return nil, nil, err
	}
	stored, err := c.claimRevisions(ctx, parent, selector)
	if err != nil {
		return nil, nil, fmt.Errorf("claiming ControllerRevisions: %w", err)
	}
	sort.Slice(stored, func(i, j int) bool {
		a, b := stored[i].GetCreationTimestamp(), stored[j].GetCreationTimestamp()
		return a.Before(&b) || (a.Equal(&b) && stored[i].GetName() < stored[j].GetName())
	})
	latest := &revision{patch: latestPatch, parent: parent}
	revisions := []*revision{latest}
	var duplicates []*unstructured.Unstructured
	for _, obj := range stored {
		patch, groups, err := decodeRevision(obj)
		if err != nil {
			return nil, nil, fmt.Errorf("ControllerRevision %s: %w", obj.GetName(), err)
		}
		if apply.Equal(patch, latestPatch) {
			if latest.object != nil {
				duplicates = append(duplicates, obj)
				continue
			}
			latest.name, latest.object, latest.children = obj.GetName(), obj, groups
			continue
		}
		revParent, err := withFields(parent, patch, fieldPaths)
		if err != nil {
			return nil, nil, fmt.Errorf("ControllerRevision %s: %w", obj.GetName(), err)
		}
		revisions = append(revisions, &revision{name: obj.GetName(), patch: patch, parent: revParent, object: obj, children: groups})
	}
	if latest.object == nil {
		if latest.name, err = revisionName(c.parent, parent, latestPatch); err != nil {
			return nil, nil, err
		}
	}
	return revisions, duplicates, nil
}

// decodeRevision returns a stored revision's parentPatch and children.
func decodeRevision(obj *unstructured.Unstructured) (map[string]any, []v1alpha1.ControllerRevisionChildren, error) {
	patch, ok := obj.Object["parentPatch"].(map[string]any)
	if !ok {
		return nil, nil, fmt.Errorf("parentPatch is a %T, not an object", obj.Object["parentPatch"])
	}
	var groups []v1alpha1.ControllerRevisionChildren
	if raw, ok := obj.Object["children"]; ok && raw != nil {
		data, err := json.Marshal(raw)
		if err == nil {
			err = json.Unmarshal(data, &groups)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("children: %w", err)
		}
	}
	return patch, groups, nil
}

// revisionSelector selects the parent's ControllerRevisions: the parent's
// child selector, and the labels naming the parent's resource.
func (c *Controller) revisionSelector(selector labels.Selector) (labels.Selector, error) {
	group, err := labels.NewRequirement(RevisionLabelAPIGroup, selection.Equals, []string{c.parent.GroupVersionResource().Group})
	if err != nil {
		return nil, fmt.Errorf("label %s: %w", RevisionLabelAPIGroup, err)
	}
	resource, err := labels.NewRequirement(RevisionLabelResource, selection.Equals, []string{c.parent.Name})
	if err != nil {
		return nil, fmt.Errorf("label %s: %w", RevisionLabelResource, err)
	}
	return selector.Add(*group, *resource), nil
}

// claimRevisions returns the parent's ControllerRevisions: those it owns,
// and the orphans of its namespace that its revision selector matches,
// which it adopts. Unlike children, an owned revision that the selector
// no longer matches is kept: metacontroller releases it, and then fails
// every sync creating it again (metacontroller issue 194).
func (c *Controller) claimRevisions(ctx context.Context, parent *unstructured.Unstructured, selector labels.Selector) ([]*unstructured.Unstructured, error) {
	revSelector, err := c.revisionSelector(selector)
	if err != nil {
		return nil, err
	}
	claimed := c.revisions.OwnedBy(parent.GetNamespace(), parent.GetUID())
	if parent.GetDeletionTimestamp() != nil {
		return claimed, nil
	}
	orphans := c.revisions.Orphans(parent.GetNamespace(), revSelector)
	if len(orphans) == 0 {
		return claimed, nil
	}
	claimer := ownership.NewClaimer(parent, c.parent.GroupVersionKind(), revSelector, c.canAdopt(parent))
	adopted, err := claimer.Claim(ctx, c.opts.Client.Resource(v1alpha1.ControllerRevisionResource), orphans)
	for _, obj := range adopted {
		history.Wrote(ctx, c.name, "patch", "ownership", revisionObject(obj), nil)
		klog.FromContext(ctx).V(2).Info("Adopted ControllerRevision", "revision", klog.KObj(obj))
	}
	return append(claimed, adopted...), err
}

// writeRevisions deletes the revisions gone (by UID), then creates or
// updates the live ones whose children changed. It stops at the first
// error: the children are written only once their revisions are. A
// revision that exists although the cache does not have it yet (an
// earlier sync wrote it) is read from the API server and used, when it is
// the parent's and records the same fields (else a conflict, retried).
func (c *Controller) writeRevisions(ctx context.Context, parent *unstructured.Unstructured, selector labels.Selector, live []*revision, gone []*unstructured.Unstructured) (wrote bool, err error) {
	client := c.opts.Client.Resource(v1alpha1.ControllerRevisionResource).Namespace(parent.GetNamespace())
	for _, obj := range gone {
		wrote = true
		err := client.Delete(ctx, obj.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(obj.GetUID())}})
		history.Wrote(ctx, c.name, "delete", "revision", revisionObject(obj), err)
		if err != nil && !apierrors.IsNotFound(err) {
			return wrote, fmt.Errorf("deleting ControllerRevision %s: %w", obj.GetName(), err)
		}
		klog.FromContext(ctx).V(4).Info("Deleted ControllerRevision", "revision", obj.GetName())
	}
	for _, rev := range live {
		if rev.object == nil {
			obj, err := c.newRevision(parent, selector, rev)
			if err != nil {
				return wrote, err
			}
			_, err = client.Create(ctx, obj, metav1.CreateOptions{})
			history.Wrote(ctx, c.name, "create", "revision", revisionObject(obj), err)
			if apierrors.IsAlreadyExists(err) {
				// Written by an earlier sync whose write the cache has not
				// seen yet: read it, and go on from it if it is this one.
				if rev.object, err = c.uncachedRevision(ctx, client, parent, rev); err != nil {
					return wrote, err
				}
			} else {
				if err != nil {
					return wrote, fmt.Errorf("creating ControllerRevision %s: %w", rev.name, err)
				}
				wrote = true
				klog.FromContext(ctx).V(4).Info("Created ControllerRevision", "revision", rev.name)
				continue
			}
		}
		_, stored, err := decodeRevision(rev.object)
		if err == nil && sameChildren(stored, rev.children) {
			continue
		}
		updated := rev.object.DeepCopy()
		delete(updated.Object, "children")
		if len(rev.children) > 0 {
			updated.Object["children"] = childrenField(rev.children)
		}
		wrote = true
		_, err = client.Update(ctx, updated, metav1.UpdateOptions{})
		history.Wrote(ctx, c.name, "update", "revision", revisionObject(updated), err)
		if err != nil {
			return wrote, fmt.Errorf("updating ControllerRevision %s: %w", rev.name, err)
		}
		klog.FromContext(ctx).V(4).Info("Updated ControllerRevision", "revision", rev.name, "children", rev.children)
	}
	return wrote, nil
}

// uncachedRevision reads rev, which exists although the cache does not
// have it yet, from the API server. It is a conflict, retried, unless the
// revision read is the parent's and records the same parent fields.
func (c *Controller) uncachedRevision(ctx context.Context, client dynamic.ResourceInterface, parent *unstructured.Unstructured, rev *revision) (*unstructured.Unstructured, error) {
	conflict := func(why string) error {
		return apierrors.NewConflict(v1alpha1.ControllerRevisionResource.GroupResource(), rev.name, errors.New(why))
	}
	metrics.UncachedReads.WithLabelValues(c.name, "revision").Inc()
	obj, err := client.Get(ctx, rev.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, conflict("it was deleted while being created")
	case err != nil:
		return nil, fmt.Errorf("reading ControllerRevision %s: %w", rev.name, err)
	}
	if ref := metav1.GetControllerOfNoCopy(obj); ref == nil || ref.UID != parent.GetUID() {
		return nil, conflict("it exists and is not this parent's")
	}
	if patch, _, err := decodeRevision(obj); err != nil || !apply.Equal(patch, rev.patch) {
		return nil, conflict("it exists and records other parent fields")
	}
	return obj, nil
}

// newRevision is a new ControllerRevision as metacontroller makes it:
// labelled with controller-uid=<uid> when the controller generates
// selectors, else with the labels of the parent's spec.template (and, if
// the parent's selector does not match those, its matchLabels), plus the
// labels naming the parent's resource; the parent its controller.
func (c *Controller) newRevision(parent *unstructured.Unstructured, selector labels.Selector, rev *revision) (*unstructured.Unstructured, error) {
	revLabels := map[string]string{}
	if c.cc.Spec.GenerateSelector != nil && *c.cc.Spec.GenerateSelector {
		revLabels[ControllerUIDLabel] = string(parent.GetUID())
	} else {
		template, _, err := unstructured.NestedStringMap(parent.Object, "spec", "template", "metadata", "labels")
		if err != nil {
			return nil, fmt.Errorf("the parent's spec.template.metadata.labels: %w", err)
		}
		for k, v := range template {
			revLabels[k] = v
		}
		if !selector.Matches(labels.Set(revLabels)) {
			// metacontroller leaves such a revision unlabelled and then
			// loses it (see claimRevisions); the selector's matchLabels
			// let it be adopted again once orphaned.
			matchLabels, _, _ := unstructured.NestedStringMap(parent.Object, "spec", "selector", "matchLabels")
			for k, v := range matchLabels {
				revLabels[k] = v
			}
		}
	}
	revLabels[RevisionLabelAPIGroup] = c.parent.GroupVersionResource().Group
	revLabels[RevisionLabelResource] = c.parent.Name
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion":  v1alpha1.SchemeGroupVersion.String(),
		"kind":        "ControllerRevision",
		"metadata":    map[string]any{"name": rev.name, "namespace": parent.GetNamespace()},
		"parentPatch": rev.patch,
	}}
	obj.SetLabels(revLabels)
	obj.SetOwnerReferences([]metav1.OwnerReference{ownership.ControllerRef(parent, c.parent.GroupVersionKind())})
	if len(rev.children) > 0 {
		obj.Object["children"] = childrenField(rev.children)
	}
	return obj, nil
}

func childrenField(groups []v1alpha1.ControllerRevisionChildren) []any {
	out := make([]any, 0, len(groups))
	for _, g := range groups {
		names := make([]any, len(g.Names))
		for i, n := range g.Names {
			names[i] = n
		}
		out = append(out, map[string]any{"apiGroup": g.APIGroup, "kind": g.Kind, "names": names})
	}
	return out
}

// sameChildren compares two children lists, order included; no list and
// an empty one are the same.
func sameChildren(a, b []v1alpha1.ControllerRevisionChildren) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return apply.Equal(childrenField(a), childrenField(b))
}

// condition is a status condition as metacontroller writes it: type,
// status, reason and message, nothing else.
func condition(status, reason, message string) map[string]any {
	cond := map[string]any{"type": ConditionUpdated, "status": status}
	if reason != "" {
		cond["reason"] = reason
	}
	if message != "" {
		cond["message"] = message
	}
	return cond
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

// withFields returns a copy of parent with each field path a revision
// records replaced by the revision's value; a path the revision does not
// hold keeps the parent's value.
func withFields(parent *unstructured.Unstructured, patch map[string]any, fieldPaths []string) (*unstructured.Unstructured, error) {
	out := parent.DeepCopy()
	for _, p := range fieldPaths {
		path := strings.Split(p, ".")
		v, found, err := unstructured.NestedFieldCopy(patch, path...)
		if err != nil {
			return nil, fmt.Errorf("parentPatch field %s: %w", p, err)
		}
		if found {
			if err := unstructured.SetNestedField(out.Object, v, path...); err != nil {
				return nil, fmt.Errorf("parentPatch field %s: %w", p, err)
			}
		}
	}
	return out, nil
}

// revisionName is metacontroller's name of a revision:
// <resource>.<group>-<hash> (group "core" for the core group; the prefix
// cut to 212 characters), the hash the hex SHA-1 of the parent's UID
// followed by the recorded fields as JSON. The name serves only to create
// a revision idempotently; revisions are found by their fields.
func revisionName(res *discovery.Resource, parent *unstructured.Unstructured, patch map[string]any) (string, error) {
	data, err := json.Marshal(patch)
	if err != nil {
		return "", fmt.Errorf("encoding the revision's fields: %w", err)
	}
	group := res.GroupVersionResource().Group
	if group == "" {
		group = "core"
	}
	prefix := res.Name + "." + group
	if max := 253 - 41; len(prefix) > max {
		prefix = prefix[:max]
	}
	h := sha1.New()
	h.Write([]byte(parent.GetUID()))
	h.Write(data)
	return prefix + "-" + hex.EncodeToString(h.Sum(nil)), nil
}

// revisionObject names a ControllerRevision in the sync's record.
func revisionObject(obj metav1.Object) string {
	return trigger.ObjectName(v1alpha1.ControllerRevisionResource.GroupResource().String(), obj.GetNamespace(), obj.GetName())
}
