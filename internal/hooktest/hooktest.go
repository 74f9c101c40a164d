package hooktest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/redact"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/composite"
	"github.com/metactl/metactl/pkg/decorator"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// Options say what to test.
type Options struct {
	// Controller is the CompositeController or DecoratorController as
	// written (its YAML decoded).
	Controller *unstructured.Unstructured
	// Parent is a sample parent (decorated object); nil makes a minimal
	// one of the parent resource's kind.
	Parent *unstructured.Unstructured
	// HookURL, when set, replaces the URL of the sync and finalize hooks;
	// CustomizeHookURL that of the customize hook (default: HookURL's
	// host with the hook's own path). A URL without a path is a base:
	// each hook keeps its own path. The rule is v1alpha1.OverrideHookURLs,
	// shared with metactl plan.
	HookURL, CustomizeHookURL string
	// Resources resolves the controller's resources: the cluster's
	// discovery, or OfflineResources.
	Resources *discovery.ResourceMap
	// Offline says Resources were not resolved by a cluster (for the
	// report).
	Offline bool
	// Notes are added to the report's notes (how resources were
	// resolved).
	Notes []string
	// HTTPClient calls the hooks; nil is hookclient.DefaultHTTPClient's
	// transport.
	HTTPClient *http.Client
}

// SetupError is an error that keeps the test from running at all: an
// invalid controller or parent, a hook without an address this machine
// can call, a hook that could not be reached by any request.
type SetupError struct{ Err error }

func (e *SetupError) Error() string { return e.Err.Error() }
func (e *SetupError) Unwrap() error { return e.Err }

func setupErrorf(format string, args ...any) error {
	return &SetupError{Err: fmt.Errorf(format, args...)}
}

// kind is what hooktest needs of composite.Controller and
// decorator.Controller.
type kind interface {
	Offline(parent *unstructured.Unstructured) (engine.Sync, error)
	Resources() []*engine.Watched
	Dependents() *children.Declared
	// Finalizer is the finalizer metactl puts on the parents
	// (engine.Engine's).
	Finalizer() string
}

// tester is one run.
type tester struct {
	opts     Options
	report   *Report
	client   *hookclient.Client
	capture  *capture
	kind     kind
	kindName string
	name     string
	// answers checks the list of children (attachments) as the engine does.
	answers *engine.Answers
	// sync, finalize, customize are the hooks, URLs overridden; nil when
	// absent.
	sync, finalize, customize *v1alpha1.Hook
	version                   v1alpha1.HookVersion
	// parentRes is the parent's (decorated object's) resource.
	parentRes *engine.Watched
	// answered counts the calls that got an HTTP answer.
	answered int
	// unreachable is the first error of a hook that could not be reached.
	unreachable error
	// ownStatus is the sample object's own status, which every request
	// gives the hook when parentRes.HookGetsRealStatus (nil: none).
	ownStatus any
}

// Run tests the controller's hooks: it sends them the requests listed in
// docs/hook-test.md and checks their answers as metactl's reconciler
// does. It returns a *SetupError when the test cannot run.
func Run(ctx context.Context, opts Options) (*Report, error) {
	t := &tester{opts: opts, report: &Report{Resources: "cluster", Notes: append([]string(nil), opts.Notes...)}}
	if opts.Offline {
		t.report.Resources = "offline"
	}
	if err := t.setup(ctx); err != nil {
		return nil, err
	}
	parent, err := t.parent()
	if err != nil {
		return nil, err
	}
	if err := t.run(ctx, parent); err != nil {
		return nil, err
	}
	if t.answered == 0 && t.unreachable != nil {
		return nil, &SetupError{Err: fmt.Errorf("no request reached the hook: %w", t.unreachable)}
	}
	t.report.finish()
	return t.report, nil
}

// setup builds the controller as metactl would (its spec checked, its
// resources resolved) and the hooks to call.
func (t *tester) setup(ctx context.Context) error {
	obj := t.opts.Controller
	if obj == nil {
		return setupErrorf("no controller")
	}
	// --hook-url and --customize-hook-url, by the rule metactl plan
	// shares.
	obj, err := v1alpha1.OverrideHookURLs(obj, t.opts.HookURL, t.opts.CustomizeHookURL)
	if err != nil {
		return &SetupError{Err: err}
	}
	t.kindName, t.name = obj.GetKind(), obj.GetName()
	t.report.Kind, t.report.Controller = t.kindName, t.name
	copts := engine.Options{Resources: t.opts.Resources}
	var hks v1alpha1.Hooks
	switch {
	case obj.GetAPIVersion() != v1alpha1.SchemeGroupVersion.String():
		return setupErrorf("the controller's apiVersion is %q, want %s", obj.GetAPIVersion(), v1alpha1.SchemeGroupVersion)
	case t.kindName == "CompositeController":
		c, err := composite.New(ctx, obj, copts)
		if err != nil {
			return &SetupError{Err: fmt.Errorf("CompositeController %s: %w%s", t.name, err, t.resolveHint(err))}
		}
		cc := &v1alpha1.CompositeController{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, cc); err != nil {
			return &SetupError{Err: err}
		}
		v1alpha1.SetDefaults_CompositeController(cc)
		hks = cc.Spec.Hooks.Hooks
		t.kind = c
		t.answers = &engine.Answers{Resource: t.kindName, Controller: t.name, List: "children", Annotation: engine.AbsentChildrenAnnotation, Object: obj}
	case t.kindName == "DecoratorController":
		d, err := decorator.New(ctx, obj, copts)
		if err != nil {
			return &SetupError{Err: fmt.Errorf("DecoratorController %s: %w%s", t.name, err, t.resolveHint(err))}
		}
		dc := &v1alpha1.DecoratorController{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, dc); err != nil {
			return &SetupError{Err: err}
		}
		v1alpha1.SetDefaults_DecoratorController(dc)
		hks = *dc.Spec.Hooks
		t.kind = d
		t.answers = &engine.Answers{Resource: t.kindName, Controller: t.name, List: "attachments", Annotation: engine.AbsentAttachmentsAnnotation, Object: obj}
	default:
		return setupErrorf("the file's kind is %q, want CompositeController or DecoratorController", t.kindName)
	}
	if t.sync, err = t.hook("sync", hks.Sync); err != nil {
		return err
	}
	if t.finalize, err = t.hook("finalize", hks.Finalize); err != nil {
		return err
	}
	if t.customize, err = t.hook("customize", hks.Customize); err != nil {
		return err
	}
	t.version = *t.sync.Version
	t.capture = &capture{}
	base := t.opts.HTTPClient
	if base == nil {
		base = &http.Client{Transport: hookclient.NewTransport()}
	}
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	t.capture.next = rt
	hc := *base
	hc.Transport = t.capture
	t.client = hookclient.NewClient(hookclient.Options{HTTPClient: &hc})
	return nil
}

// resolveHint says how to fix a controller whose resources could not be
// resolved; "" for another error.
func (t *tester) resolveHint(err error) string {
	if !discovery.IsNotFound(err) {
		return ""
	}
	if t.opts.Offline {
		return " (offline: pass the resource's CustomResourceDefinition with --crd FILE, or a --kubeconfig whose cluster serves it)"
	}
	return " (install the resource's CustomResourceDefinition in the cluster, kubectl apply -f crd.yaml, or test offline with --offline --crd FILE)"
}

// hook returns a copy of h (its URL already overridden: see
// v1alpha1.OverrideHookURLs), checked; nil when h is nil.
func (t *tester) hook(name string, h *v1alpha1.Hook) (*v1alpha1.Hook, error) {
	if h == nil {
		return nil, nil
	}
	h = h.DeepCopy()
	w := h.Webhook
	if w.URL == nil && w.Service != nil {
		flag := "--hook-url"
		if name == "customize" {
			flag = "--customize-hook-url (or --hook-url)"
		}
		return nil, setupErrorf("the %s hook's webhook names the in-cluster Service %s/%s, which hook test does not call: run the hook where this machine can reach it and pass %s (a URL without a path, such as http://127.0.0.1:8080, keeps each hook's own path)",
			name, w.Service.Namespace, w.Service.Name, flag)
	}
	// Every call is answered in full: with etag, the second of two
	// equal requests could be answered 304 from the ETag cache, and the
	// two answers could not be compared.
	w.Etag = nil
	if w.CABundle != nil || w.ClientTLS != nil || w.Authorization != nil || w.BasicAuth != nil {
		t.report.Notes = append(t.report.Notes, fmt.Sprintf("the %s hook's webhook sets caBundle, clientTLS, authorization or basicAuth: hook test reads no Secret or ConfigMap and calls it without them (a hook that requires them answers 401 or fails TLS)", name))
		w.CABundle, w.ClientTLS, w.Authorization, w.BasicAuth = nil, nil, nil, nil
	}
	addr, err := w.Address()
	if err != nil {
		return nil, setupErrorf("the %s hook's webhook: %w", name, err)
	}
	t.report.Hooks = append(t.report.Hooks, Hook{Name: name, URL: redact.URL(addr), Version: string(*h.Version), Mode: string(hooks.ResponseMode(h)), Timeout: hooks.Timeout(w).String()})
	return h, nil
}

// fakeUID is the UID of the parent hook test makes up, when the sample
// has none.
const fakeUID = "7e57e57e-0000-4000-8000-000000000001"

// parent returns the parent (decorated object) of the requests: the
// sample, or a minimal object of the parent resource, completed with what
// an object read from the API server has (namespace, uid, generation,
// creationTimestamp), without status.
func (t *tester) parent() (*unstructured.Unstructured, error) {
	synced := t.kind.Resources()
	var p *unstructured.Unstructured
	if t.opts.Parent != nil {
		p = t.opts.Parent.DeepCopy()
		for _, s := range synced {
			if s.GroupVersionKind() == p.GroupVersionKind() {
				t.parentRes = s
			}
		}
		if t.parentRes == nil {
			var want []string
			for _, s := range synced {
				want = append(want, s.APIVersion+" "+s.Kind)
			}
			return nil, setupErrorf("the sample parent is a %s %s, want %s", p.GetAPIVersion(), p.GetKind(), strings.Join(want, " or "))
		}
	} else {
		t.parentRes = synced[0]
		p = &unstructured.Unstructured{Object: map[string]any{}}
		p.SetAPIVersion(t.parentRes.APIVersion)
		p.SetKind(t.parentRes.Kind)
		p.SetName("hook-test")
		if t.kindName == "DecoratorController" {
			t.selectMinimal(p)
		}
		t.report.Notes = append(t.report.Notes, fmt.Sprintf("no --parent: the requests carry a minimal %s without spec; pass a sample parent (--parent FILE) to test what the hook does with one", t.parentRes.Kind))
	}
	if t.parentRes.Namespaced && p.GetNamespace() == "" {
		p.SetNamespace("default")
	}
	if !t.parentRes.Namespaced {
		p.SetNamespace("")
	}
	if p.GetUID() == "" {
		p.SetUID(fakeUID)
	}
	if p.GetGeneration() == 0 {
		p.SetGeneration(1)
	}
	if p.GetResourceVersion() == "" {
		p.SetResourceVersion("1")
	}
	if ts := p.GetCreationTimestamp(); ts.IsZero() {
		p.SetCreationTimestamp(metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	}
	if !t.parentRes.HookGetsRealStatus() {
		// A new parent: no status yet. A decorated built-in object keeps
		// its own, which its hook is always given.
		unstructured.RemoveNestedField(p.Object, "status")
	}
	return p, nil
}

// selectMinimal gives a made-up decorated object the labels and
// annotations its controller's first resource rule selects.
func (t *tester) selectMinimal(p *unstructured.Unstructured) {
	dc := &v1alpha1.DecoratorController{}
	if runtime.DefaultUnstructuredConverter.FromUnstructured(t.opts.Controller.Object, dc) != nil {
		return
	}
	for _, rule := range dc.Spec.Resources {
		if rule.Resource != t.parentRes.Name {
			continue
		}
		if rule.LabelSelector != nil && len(rule.LabelSelector.MatchLabels) > 0 {
			p.SetLabels(rule.LabelSelector.MatchLabels)
		}
		if rule.AnnotationSelector != nil && len(rule.AnnotationSelector.MatchAnnotations) > 0 {
			p.SetAnnotations(rule.AnnotationSelector.MatchAnnotations)
		}
		return
	}
}

// capture is the transport of the hook calls: it keeps the body of the
// last answer, for the checks that read it whole (determinism, and what
// an undecodable answer is).
type capture struct {
	next http.RoundTripper
	body bytes.Buffer
}

func (c *capture) RoundTrip(req *http.Request) (*http.Response, error) {
	c.body.Reset()
	resp, err := c.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &teeBody{r: io.TeeReader(resp.Body, &c.body), c: resp.Body}
	return resp, nil
}

type teeBody struct {
	r io.Reader
	c io.Closer
}

func (b *teeBody) Read(p []byte) (int, error) { return b.r.Read(p) }
func (b *teeBody) Close() error               { return b.c.Close() }

// call is one hook call's outcome.
type call struct {
	// body is the answer as sent (nil when none came).
	body []byte
	err  error
	d    time.Duration
}

// do calls hook with request, decoding into response.
func (t *tester) do(ctx context.Context, name string, hook *v1alpha1.Hook, request any, response hooks.Response) call {
	start := time.Now()
	err := t.client.Call(ctx, t.name, name, hook, request, response, hookclient.CallOptions{})
	c := call{err: err, d: time.Since(start)}
	// A hook that answered, even too slowly, was reached.
	var ue *hookclient.UnreachableError
	switch {
	case !errors.As(err, &ue):
		t.answered++
		c.body = bytes.Clone(t.capture.body.Bytes())
	case ue.Timeout():
		t.answered++
	case t.unreachable == nil:
		t.unreachable = err
	}
	return c
}

// classify reports a failed call as a finding of request, unless ctx
// ended (the error is then not the hook's).
func (t *tester) classify(ctx context.Context, hookName string, hook *v1alpha1.Hook, request string, c call, response hooks.Response) {
	if ctx.Err() != nil {
		return
	}
	var (
		ue *hookclient.UnreachableError
		se *hookclient.StatusError
	)
	switch {
	case errors.As(c.err, &ue) && ue.Timeout():
		t.report.add(Error, CheckTimeout, hookName, request, fmt.Sprintf("no answer within the hook's timeout (%s)", hooks.Timeout(hook.Webhook)), nil)
	case errors.As(c.err, &ue):
		t.report.add(Error, CheckUnreachable, hookName, request, ue.Error(), nil)
	case errors.As(c.err, &se):
		t.report.add(Error, CheckHTTPStatus, hookName, request, se.Error(), nil)
	default:
		t.report.add(Error, answerCheck(c.body, hook, response), hookName, request, c.err.Error(), nil)
	}
}

// answerCheck names what is wrong with an answer pkg/hooks refused.
func answerCheck(body []byte, hook *v1alpha1.Hook, response hooks.Response) string {
	if !json.Valid(body) {
		return CheckInvalidJSON
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return CheckNotObject
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) == nil {
		if s, ok := top["status"]; ok {
			if v := bytes.TrimSpace(s); len(v) > 0 && v[0] != '{' && !bytes.Equal(v, []byte("null")) {
				return CheckStatusNotObject
			}
		}
	}
	// An answer that strict mode refuses and loose mode reads has
	// unknown (or duplicate) fields.
	if hooks.ResponseMode(hook) == v1alpha1.ResponseUnMarshallModeStrict && response.DecodeHookResponse(body, v1alpha1.ResponseUnMarshallModeLoose) == nil {
		return CheckUnknownFields
	}
	if _, ok := response.(*hooks.CustomizeResponse); ok {
		return CheckRelatedResources // a rule pkg/hooks refuses
	}
	return CheckInvalidAnswer
}
