package related

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/internal/trigger"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/dynamic/informer"
	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

var namespacesResource = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// Caller calls a controller's hooks. The controller's own caller (see
// engine.HookCaller), so that the customize hook's calls count as the
// sync hook's do: in metrics, and in the credential errors the controller
// object reports. The call is a wait of w, the sync's: other syncs run
// meanwhile (nil: none to tell); opts are the sync's (its hold of the
// answers, whether it is a retry: hookclient.CallOptions).
type Caller interface {
	Call(ctx context.Context, w loop.Waiter, name string, hook *v1alpha1.Hook, request any, response hooks.Response, opts hookclient.CallOptions) error
}

// Options configure a Resolver of parents queued as keys of type K.
type Options[K comparable] struct {
	// Object is the controller object as the user wrote it; hooks get it.
	Object *unstructured.Unstructured
	// Customize is the customize hook. Its own version sets the namespace
	// rules of its answers (unset is v1).
	Customize *v1alpha1.Hook
	// Hooks calls the customize hook.
	Hooks     Caller
	Resources *discovery.ResourceMap
	Informers *informer.Factory
	// Enqueue asks for a sync of a parent, by its queue key, for a
	// related object's change (trigger.CauseRelated).
	Enqueue func(key K, t trigger.Trigger)
	// MaxObjects is the most related objects the rules may select for
	// one parent; more fails its sync. Default: DefaultMaxObjects.
	MaxObjects int
	// MaxRules is the most rules (relatedResources) one customize answer
	// may declare; an answer with more fails the parent's sync and is not
	// kept. Default: DefaultMaxRules.
	MaxRules int
	// MaxResources is the most distinct resources the rules of all the
	// controller's parents may have the Resolver watch at once (an
	// informer each, of every namespace; namespaces count when a rule
	// selects them by label); a parent whose rules would make more fails
	// its sync, and no informer is started for it. 0 means
	// DefaultMaxResources; negative, none.
	MaxResources int
	// MayRead, when set, is asked before the objects of a rule are
	// served, with the rule's resource and namespace ("" for every
	// namespace, as a namespace selector or no namespace rule reads), and,
	// for a namespace selector, about namespaces ("" too); its error fails
	// the sync. It is set for a controller that acts as a ServiceAccount,
	// whose rights then bound what its rules reach. Nil (a controller that
	// reads as metactl): the rules of a namespaced parent may read
	// namespaced resources in the parent's namespace only; a rule that
	// reads elsewhere fails the sync with an *OutsideNamespaceError.
	MayRead func(ctx context.Context, res *discovery.Resource, namespace string) error
	// AnswerTTL is how long a customize answer is kept while the parent's
	// UID, generation and labels stay the same: a sync after that asks the
	// hook again, so an answer that depends on what no generation counts
	// (a ConfigMap's data, a Namespace's annotations, the time) is
	// refreshed. Default: DefaultAnswerTTL.
	AnswerTTL time.Duration
	// Now tells the time, for AnswerTTL. Default: time.Now.
	Now func() time.Time
}

// DefaultAnswerTTL is the default of Options.AnswerTTL: 20 minutes, the
// lifetime metacontroller gives its customize answers.
const DefaultAnswerTTL = 20 * time.Minute

// mayRead asks Options.MayRead about what rl reads: its resource, in its
// namespace or every one, and, for a rule that selects namespaces by
// label, the namespaces (listed and watched to match their labels).
func (r *Resolver[K]) mayRead(ctx context.Context, rl *rule) error {
	if err := r.opts.MayRead(ctx, rl.res, rl.namespace); err != nil {
		return err
	}
	if rl.namespaces == nil {
		return nil
	}
	res, err := r.opts.Resources.Get(ctx, "v1", namespacesResource.Resource)
	if err != nil {
		return fmt.Errorf("namespaceSelector: %w", err)
	}
	return r.opts.MayRead(ctx, res, "")
}

// DefaultMaxObjects is the default of Options.MaxObjects, as many as the
// children one answer may ask for (v1alpha1.MaxAnswerObjects).
const DefaultMaxObjects = v1alpha1.MaxAnswerObjects

// DefaultMaxRules is the default of Options.MaxRules. A rule selects by
// names, labels and namespaces at once, so a parent needs about one per
// resource it reads.
const DefaultMaxRules = 100

// DefaultMaxResources is the default of Options.MaxResources.
const DefaultMaxResources = 32

// TooManyRulesError fails the sync of a parent whose customize answer
// declares more rules than Options.MaxRules.
type TooManyRulesError struct{ Rules, Limit int }

func (e *TooManyRulesError) Error() string {
	return fmt.Sprintf("the customize hook answered %d relatedResources rules, more than the limit of %d per answer (--max-related-rules): "+
		"merge the rules of one resource (a rule takes a list of names and a label selector), or ask the platform to raise --max-related-rules", e.Rules, e.Limit)
}

// TooManyResourcesError fails the sync of a parent whose customize rules
// would have the controller watch more distinct related resources than
// Options.MaxResources.
type TooManyResourcesError struct {
	// Resources are what the controller would watch for related objects
	// with this parent's rules, Limit the most it may.
	Resources []string
	Limit     int
}

func (e *TooManyResourcesError) Error() string {
	return fmt.Sprintf("the customize rules of this controller's parents would watch %d distinct resources (%s), more than the %d this controller may watch for related objects (--max-controller-resources, less the resources of its spec); "+
		"no watch was started for this parent: declare fewer resources, or ask the platform to raise --max-controller-resources",
		len(e.Resources), strings.Join(e.Resources, ", "), e.Limit)
}

// Counter counts the related objects of a sync before they are decoded
// (engine.Target.CountRequest); its error fails the sync and nothing is
// decoded.
type Counter func(ctx context.Context, objs []*informer.Object) error

// Resolver serves one controller's customize hook.
type Resolver[K comparable] struct {
	opts Options[K]

	mu        sync.Mutex
	answers   map[K]answer                                  // customize answers by queue key
	declared  map[schema.GroupVersionResource]map[K][]*rule // index: resource → parent key → rules
	informers map[schema.GroupVersionResource]*informer.Informer
	// nsSelectors counts the declared rules that select namespaces by
	// label: while there are any, the namespaces informer is kept.
	nsSelectors int
	closed      bool
}

// answer is one cached customize answer of a parent, valid for its UID,
// generation and labels until expires.
type answer struct {
	uid        types.UID
	generation int64
	labels     map[string]string
	expires    time.Time
	rules      []v1alpha1.RelatedResourceRule
}

// answers reports whether a is the answer for parent at now.
func (a answer) answers(parent *unstructured.Unstructured, now time.Time) bool {
	return a.uid == parent.GetUID() && a.generation == parent.GetGeneration() &&
		maps.Equal(a.labels, parent.GetLabels()) && now.Before(a.expires)
}

// rule is one related-resource rule of one parent, resolved.
type rule struct {
	res        *discovery.Resource
	names      []string
	labels     labels.Selector // nil: any
	namespaces labels.Selector // nil: see namespace
	namespace  string          // "" with namespaces nil: every namespace
}

// New returns a Resolver; it starts informers as rules need them, and
// releases each once no rule of any parent uses it.
func New[K comparable](opts Options[K]) *Resolver[K] {
	if opts.MaxObjects <= 0 {
		opts.MaxObjects = DefaultMaxObjects
	}
	if opts.AnswerTTL <= 0 {
		opts.AnswerTTL = DefaultAnswerTTL
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxRules <= 0 {
		opts.MaxRules = DefaultMaxRules
	}
	switch {
	case opts.MaxResources == 0:
		opts.MaxResources = DefaultMaxResources
	case opts.MaxResources < 0:
		opts.MaxResources = 0
	}
	return &Resolver[K]{
		opts:      opts,
		answers:   map[K]answer{},
		declared:  map[schema.GroupVersionResource]map[K][]*rule{},
		informers: map[schema.GroupVersionResource]*informer.Informer{},
	}
}

// Related returns the objects the customize hook declares for parent (whose
// queue key is key), keyed like children in a request of a hook of version
// (the sync or the finalize hook, whichever receives them), and records the
// declarations so that changes to those objects re-sync the parent. Its
// waits, on the hook and on new informers' caches, are waits of w, the
// sync's (loop.Waiter; nil: none to tell). The customize hook is called
// with opts, the sync's (hookclient.CallOptions). The objects selected are
// counted with count (nil: not counted) before any is decoded.
func (r *Resolver[K]) Related(ctx context.Context, w loop.Waiter, opts hookclient.CallOptions, key K, parent *unstructured.Unstructured, parentNamespaced bool, version v1alpha1.HookVersion, count Counter) (hooks.ObjectMap, error) {
	declarations, err := r.declarations(ctx, w, opts, key, parent)
	if err != nil {
		return nil, err
	}
	rules := make([]*rule, 0, len(declarations))
	for i, d := range declarations {
		rl, err := r.resolve(ctx, d, parent, parentNamespaced)
		if err != nil {
			return nil, fmt.Errorf("relatedResources[%d]: %w", i, err)
		}
		if r.opts.MayRead != nil {
			if err := r.mayRead(ctx, rl); err != nil {
				return nil, fmt.Errorf("relatedResources[%d]: %w", i, err)
			}
		}
		rules = append(rules, rl)
	}
	if err := r.register(key, rules); err != nil {
		return nil, err
	}
	// A resource declared for the first time has a new informer: wait for
	// its first list, so that the hook never sees a partial set; but not
	// forever (a resource metactl may not list never syncs).
	// The wait is one of w: other syncs run meanwhile.
	var waitErr error
	wait := func() { waitErr = r.waitForCaches(ctx, rules) }
	if w == nil {
		wait()
	} else {
		w.WhileWaiting(wait)
	}
	if waitErr != nil {
		return nil, waitErr
	}

	// The objects are counted before any is decoded; an object two rules
	// of one resource select counts, and is decoded, once.
	type selection struct {
		gvr schema.GroupVersionResource
		uid types.UID
	}
	selected := make([][]*informer.Object, len(rules))
	seen := map[selection]bool{}
	for i, rl := range rules {
		gvr := rl.res.GroupVersionResource()
		for _, obj := range r.selectObjects(rl, r.informerFor(gvr)) {
			if !Delivered(version, parentNamespaced, parent.GetNamespace(), obj.GetNamespace()) {
				continue
			}
			if s := (selection{gvr, obj.GetUID()}); !seen[s] {
				seen[s] = true
				selected[i] = append(selected[i], obj)
			}
		}
		if len(seen) > r.opts.MaxObjects {
			return nil, fmt.Errorf("relatedResources[%d] (%s): the rules select %d related objects up to this one, more than the limit of %d per parent (--max-related-objects)",
				i, gvr.GroupResource(), len(seen), r.opts.MaxObjects)
		}
	}
	if count != nil {
		all := make([]*informer.Object, 0, len(seen))
		for _, objs := range selected {
			all = append(all, objs...)
		}
		if err := count(ctx, all); err != nil {
			return nil, err
		}
	}
	out := hooks.ObjectMap{}
	for i, rl := range rules {
		out.EnsureKey(rl.res.APIVersion, rl.res.Kind)
		for _, obj := range informer.DecodeAll(selected[i]) {
			out.Insert(version, parentNamespaced, obj)
		}
	}
	return out, nil
}

// Delivered reports whether a related object in namespace objNamespace
// ("" for a cluster-scoped one) is delivered to a hook of version for a
// parent in parentNamespace. A v1 hook keys a namespaced parent's objects
// by bare name, so it gets those of the parent's own namespace only:
// objects of other namespaces and cluster-scoped ones, which a v2
// customize hook may select, are left out (as metacontroller leaves them
// out), and no two of one kind can share a key.
func Delivered(version v1alpha1.HookVersion, parentNamespaced bool, parentNamespace, objNamespace string) bool {
	return version == v1alpha1.HookVersionV2 || !parentNamespaced || objNamespace == parentNamespace
}

// Forget drops what is known of a parent that is gone, and releases the
// informers only its rules used.
func (r *Resolver[K]) Forget(key K) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.answers, key)
	r.unregisterLocked(key)
	r.releaseUnusedLocked()
}

// ForgetIf is Forget of every parent whose key forget reports: for a
// sharded replica, the parents of the buckets it gave up, which raise no
// delete event. forget is called with the Resolver's lock held; it must
// not call the Resolver.
func (r *Resolver[K]) ForgetIf(forget func(key K) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := map[K]bool{}
	for key := range r.answers {
		if forget(key) {
			keys[key] = true
		}
	}
	for _, byParent := range r.declared {
		for key := range byParent {
			if forget(key) {
				keys[key] = true
			}
		}
	}
	for key := range keys {
		delete(r.answers, key)
		r.unregisterLocked(key)
	}
	r.releaseUnusedLocked()
}

// Informers returns the resources whose informers the Resolver holds.
func (r *Resolver[K]) Informers() []schema.GroupVersionResource {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]schema.GroupVersionResource, 0, len(r.informers))
	for gvr := range r.informers {
		out = append(out, gvr)
	}
	return out
}

// Close releases the informers the Resolver started.
func (r *Resolver[K]) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for _, inf := range r.informers {
		inf.Release()
	}
	r.informers = map[schema.GroupVersionResource]*informer.Informer{}
}

// declarations returns the customize answer for parent, from the cache when
// the parent's UID, generation and labels have not changed and the answer
// is younger than Options.AnswerTTL.
func (r *Resolver[K]) declarations(ctx context.Context, w loop.Waiter, opts hookclient.CallOptions, key K, parent *unstructured.Unstructured) ([]v1alpha1.RelatedResourceRule, error) {
	r.mu.Lock()
	cached, ok := r.answers[key]
	r.mu.Unlock()
	if ok && cached.answers(parent, r.opts.Now()) {
		return cached.rules, nil
	}
	response := &hooks.CustomizeResponse{}
	request := &hooks.CustomizeRequest{Controller: r.opts.Object, Parent: parent}
	if err := r.opts.Hooks.Call(ctx, w, "customize", r.opts.Customize, request, response, opts); err != nil {
		return nil, err
	}
	if n := len(response.RelatedResources); n > r.opts.MaxRules {
		// Not kept: the next sync asks again.
		return nil, &TooManyRulesError{Rules: n, Limit: r.opts.MaxRules}
	}
	r.mu.Lock()
	r.answers[key] = answer{
		uid: parent.GetUID(), generation: parent.GetGeneration(), labels: parent.GetLabels(),
		expires: r.opts.Now().Add(r.opts.AnswerTTL), rules: response.RelatedResources,
	}
	r.mu.Unlock()
	return response.RelatedResources, nil
}

// resolve checks a declaration against discovery and the namespace rules.
func (r *Resolver[K]) resolve(ctx context.Context, d v1alpha1.RelatedResourceRule, parent *unstructured.Unstructured, parentNamespaced bool) (*rule, error) {
	res, err := r.opts.Resources.Get(ctx, d.APIVersion, d.Resource)
	if err != nil {
		return nil, err
	}
	rl := &rule{res: res, names: d.Names}
	if d.LabelSelector != nil {
		if rl.labels, err = metav1.LabelSelectorAsSelector(d.LabelSelector); err != nil {
			return nil, fmt.Errorf("labelSelector: %w", err)
		}
	}
	if !res.Namespaced {
		if d.NamespaceSelector != nil {
			// As metacontroller, which fails such a sync: selecting
			// namespaces for objects that have none is a mistake.
			return nil, fmt.Errorf("namespaceSelector on %s, a cluster-scoped resource: its objects are in no namespace; remove the namespaceSelector", res.Name)
		}
		return rl, nil
	}
	if parentNamespaced && r.customizeVersion() != v1alpha1.HookVersionV2 && d.Namespace != "" && d.Namespace != parent.GetNamespace() {
		return nil, fmt.Errorf("namespace %q is not the parent's namespace %q: a v1 customize hook selects only in a namespaced parent's own namespace; set the customize hook's version to v2 to select in another", d.Namespace, parent.GetNamespace())
	}
	if ns, ok := Namespace(d, parent.GetNamespace(), parentNamespaced, r.customizeVersion()); ok {
		rl.namespace = ns
	} else if d.NamespaceSelector != nil {
		if rl.namespaces, err = metav1.LabelSelectorAsSelector(d.NamespaceSelector); err != nil {
			return nil, fmt.Errorf("namespaceSelector: %w", err)
		}
	}
	// Else neither: every namespace, names or not, whatever the parent's
	// scope (rl.namespace "" with rl.namespaces nil).
	if r.opts.MayRead == nil && parentNamespaced && (rl.namespaces != nil || rl.namespace != parent.GetNamespace()) {
		return nil, &OutsideNamespaceError{Resource: res.GroupVersionResource().GroupResource().String(),
			Parent: parent.GetNamespace(), Namespace: rl.namespace, Selector: rl.namespaces != nil}
	}
	return rl, nil
}

// OutsideNamespaceError is a customize rule of a namespaced parent of a
// controller that reads as metactl (Options.MayRead nil) that would read a
// namespaced resource outside the parent's namespace. Without this
// boundary, whoever may create a parent could have metactl read, with its
// own rights, any namespace's objects (another team's or kube-system's
// Secrets) into the hook's request.
type OutsideNamespaceError struct {
	// Resource is the rule's resource, as group-resource.
	Resource string
	// Parent is the parent's namespace.
	Parent string
	// Namespace is the namespace the rule names; "" with Selector false
	// is every namespace.
	Namespace string
	// Selector: the rule selects namespaces by label.
	Selector bool
}

func (e *OutsideNamespaceError) Error() string {
	where := "in every namespace"
	switch {
	case e.Selector:
		where = "in the namespaces its namespaceSelector selects"
	case e.Namespace != "":
		where = "in namespace " + e.Namespace
	}
	return fmt.Sprintf("the rule reads %s %s, outside the parent's namespace %s: a controller without annotation metactl.io/service-account reads "+
		"the related objects of a namespaced parent in the parent's namespace only (annotate the controller object with a ServiceAccount "+
		"allowed to read them, or read them in %s)", e.Resource, where, e.Parent, e.Parent)
}

// Namespace is the one namespace in which rule d of a customize hook of
// the given version selects the objects of a namespaced resource for a
// parent in parentNamespace: the parent's own for a namespaced parent
// under v1 (its namespaceSelector is ignored; resolve refuses a rule
// naming another namespace), else
// the rule's namespace. ok is false when there is no one namespace: the
// rule selects namespaces by its namespaceSelector, or, without one, every
// namespace.
func Namespace(d v1alpha1.RelatedResourceRule, parentNamespace string, parentNamespaced bool, version v1alpha1.HookVersion) (namespace string, ok bool) {
	switch {
	case parentNamespaced && version != v1alpha1.HookVersionV2:
		return parentNamespace, true
	case d.Namespace != "":
		return d.Namespace, true
	}
	return "", false
}

// customizeVersion is the customize hook's own version, which sets the
// namespace rules of its answers.
func (r *Resolver[K]) customizeVersion() v1alpha1.HookVersion {
	if r.opts.Customize == nil || r.opts.Customize.Version == nil {
		return v1alpha1.HookVersionV1
	}
	return *r.opts.Customize.Version
}

// register replaces the declarations of parent key in the index, starts
// the informers they need and releases those no rule uses any more. When
// the resources declared, this parent's rules with those of the other
// parents, would be more than Options.MaxResources it changes nothing and
// returns a *TooManyResourcesError.
func (r *Resolver[K]) register(key K, rules []*rule) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.checkResourcesLocked(key, rules); err != nil {
		return err
	}
	r.unregisterLocked(key)
	defer r.releaseUnusedLocked()
	for _, rl := range rules {
		gvr := rl.res.GroupVersionResource()
		if r.declared[gvr] == nil {
			r.declared[gvr] = map[K][]*rule{}
		}
		r.declared[gvr][key] = append(r.declared[gvr][key], rl)
		r.ensureInformerLocked(gvr)
		if rl.namespaces != nil {
			r.nsSelectors++
			r.ensureInformerLocked(namespacesResource)
		}
	}
	return nil
}

// checkResourcesLocked returns a *TooManyResourcesError when the
// resources the other parents' rules declare and those of rules, for
// parent key, are more than Options.MaxResources together.
func (r *Resolver[K]) checkResourcesLocked(key K, rules []*rule) error {
	resources := map[schema.GroupVersionResource]bool{}
	for gvr, byParent := range r.declared {
		for k, rls := range byParent {
			if k == key {
				continue
			}
			resources[gvr] = true
			for _, rl := range rls {
				if rl.namespaces != nil {
					resources[namespacesResource] = true
				}
			}
		}
	}
	for _, rl := range rules {
		resources[rl.res.GroupVersionResource()] = true
		if rl.namespaces != nil {
			resources[namespacesResource] = true
		}
	}
	if len(resources) <= r.opts.MaxResources {
		return nil
	}
	names := make([]string, 0, len(resources))
	for gvr := range resources {
		names = append(names, gvr.GroupResource().String())
	}
	slices.Sort(names)
	return &TooManyResourcesError{Resources: names, Limit: r.opts.MaxResources}
}

// unregisterLocked drops the declarations of parent key from the index.
func (r *Resolver[K]) unregisterLocked(key K) {
	for gvr, byParent := range r.declared {
		for _, rl := range byParent[key] {
			if rl.namespaces != nil {
				r.nsSelectors--
			}
		}
		delete(byParent, key)
		if len(byParent) == 0 {
			delete(r.declared, gvr)
		}
	}
}

// releaseUnusedLocked releases the informers of resources that no rule
// declares, keeping that of namespaces while a rule selects namespaces by
// label. A parent whose rules need one again starts it again.
func (r *Resolver[K]) releaseUnusedLocked() {
	for gvr, inf := range r.informers {
		if _, used := r.declared[gvr]; used || (gvr == namespacesResource && r.nsSelectors > 0) {
			continue
		}
		inf.Release()
		delete(r.informers, gvr)
	}
}

func (r *Resolver[K]) ensureInformerLocked(gvr schema.GroupVersionResource) *informer.Informer {
	if inf, ok := r.informers[gvr]; ok || r.closed {
		return inf
	}
	// Every namespace, whatever buckets the Factory holds: a rule may
	// select objects of any namespace (docs/scaling.md).
	inf := r.opts.Informers.AcquireWhole(gvr)
	r.informers[gvr] = inf
	// Namespaces may be related objects themselves, and they decide which
	// objects namespaceSelectors select.
	isNamespaces := gvr == namespacesResource
	changed := func(objs ...any) {
		// One enqueue per parent: two in a row may become two syncs.
		r.objectChanged(gvr, objs...)
		if isNamespaces {
			r.namespaceChanged(gvr, objs...)
		}
	}
	_ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { changed(obj) },
		UpdateFunc: func(oldObj, obj any) {
			if o, n := informer.ObjectOf(oldObj), informer.ObjectOf(obj); o != nil && n != nil && o.ResourceVersion == n.ResourceVersion {
				return // a resync: nothing changed
			}
			changed(oldObj, obj)
		},
		DeleteFunc: func(obj any) { changed(obj) },
	})
	return inf
}

func (r *Resolver[K]) informerFor(gvr schema.GroupVersionResource) *informer.Informer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ensureInformerLocked(gvr)
}

// selectObjects returns the cached objects a rule selects, undecoded.
func (r *Resolver[K]) selectObjects(rl *rule, inf *informer.Informer) []*informer.Object {
	if inf == nil {
		return nil
	}
	var candidates []*informer.Object
	if len(rl.names) > 0 && (rl.namespace != "" || !rl.res.Namespaced) {
		for _, name := range rl.names {
			if obj, ok := inf.GetMeta(rl.namespace, name); ok {
				candidates = append(candidates, obj)
			}
		}
	} else {
		candidates = inf.ListMeta(rl.namespace, rl.labels)
	}
	matched := candidates[:0:0]
	for _, obj := range candidates {
		if r.matches(rl, obj) {
			matched = append(matched, obj)
		}
	}
	return matched
}

// matches reports whether a rule selects obj.
func (r *Resolver[K]) matches(rl *rule, obj metav1.Object) bool {
	if len(rl.names) > 0 && !slices.Contains(rl.names, obj.GetName()) {
		return false
	}
	if rl.labels != nil && !rl.labels.Matches(informer.LabelsOf(obj)) {
		return false
	}
	if !rl.res.Namespaced {
		return true
	}
	if rl.namespace != "" {
		return obj.GetNamespace() == rl.namespace
	}
	if rl.namespaces != nil {
		r.mu.Lock()
		nsInf := r.informers[namespacesResource]
		r.mu.Unlock()
		if nsInf == nil {
			return false
		}
		ns, ok := nsInf.GetMeta("", obj.GetNamespace())
		return ok && rl.namespaces.Matches(informer.LabelsOf(ns))
	}
	return true
}

// objectChanged re-syncs, once each, the parents whose declarations select
// any of objs (an update's old and new versions).
func (r *Resolver[K]) objectChanged(gvr schema.GroupVersionResource, objs ...any) {
	var changed []*informer.Object
	for _, obj := range objs {
		if o := informer.ObjectOf(obj); o != nil {
			changed = append(changed, o)
		}
	}
	if len(changed) == 0 {
		return
	}
	r.mu.Lock()
	byParent := r.declared[gvr]
	snapshot := make(map[K][]*rule, len(byParent))
	for key, rules := range byParent {
		snapshot[key] = rules
	}
	r.mu.Unlock()
	// The trigger is named only for a parent that selects the object:
	// most events of a related informer concern no parent.
	var t trigger.Trigger
	for key, rules := range snapshot {
		if r.selectsAny(rules, changed) {
			if t.Cause == "" {
				t = relatedTrigger(gvr, objs...)
			}
			r.opts.Enqueue(key, t)
		}
	}
}

// relatedTrigger is the trigger of a change of a related object of gvr,
// objs its versions (the same object).
func relatedTrigger(gvr schema.GroupVersionResource, objs ...any) trigger.Trigger {
	t := trigger.Trigger{Cause: trigger.CauseRelated}
	for _, obj := range objs {
		if o := informer.ObjectOf(obj); o != nil {
			t.Object = trigger.ObjectName(gvr.GroupResource().String(), o.GetNamespace(), o.GetName())
			break
		}
	}
	return t
}

func (r *Resolver[K]) selectsAny(rules []*rule, objs []*informer.Object) bool {
	for _, rl := range rules {
		for _, o := range objs {
			if r.matches(rl, o) {
				return true
			}
		}
	}
	return false
}

// namespaceChanged re-syncs parents with namespace selectors when a
// namespace's labels change (it may enter or leave their selection).
func (r *Resolver[K]) namespaceChanged(gvr schema.GroupVersionResource, objs ...any) {
	r.mu.Lock()
	var keys []K
	for _, byParent := range r.declared {
		for key, rules := range byParent {
			for _, rl := range rules {
				if rl.namespaces != nil {
					keys = append(keys, key)
					break
				}
			}
		}
	}
	r.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	t := relatedTrigger(gvr, objs...)
	for _, key := range keys {
		r.opts.Enqueue(key, t)
	}
}

// waitForCaches waits, up to 30 seconds, until the informers of rules
// (and of namespaces, for rules that select namespaces) have listed.
func (r *Resolver[K]) waitForCaches(ctx context.Context, rules []*rule) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, rl := range rules {
		inf := r.informerFor(rl.res.GroupVersionResource())
		if inf != nil && !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return fmt.Errorf("waiting for the cache of %s: %w", rl.res.GroupVersionResource(), ctx.Err())
		}
		if rl.namespaces != nil {
			if ns := r.informerFor(namespacesResource); ns != nil && !cache.WaitForCacheSync(ctx.Done(), ns.HasSynced) {
				return fmt.Errorf("waiting for the cache of namespaces: %w", ctx.Err())
			}
		}
	}
	return nil
}
