package hookrecord

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Annotation on a CompositeController or DecoratorController turns the
// recording of its hook calls on ("true") or off ("false"), whatever
// metactl's default (on for every controller under `metactl dev
// --record-dir`, else off).
const Annotation = "metactl.io/record"

// Path is where metactl serves a controller's recorded calls, on its
// metrics address, next to /debug/explain.
const Path = "/debug/record"

// Handler serves r's recorded calls at Path: GET with the query parameter
// controller ("compositecontroller/NAME" or "decoratorcontroller/NAME");
// the Set as JSON (200); 404, saying which annotation to set, for a
// controller that does not record, or saying why for every controller
// when r is nil (metactl records nothing); 400 for a request without a
// controller; 405 for another method.
func Handler(r *Recorder) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "record: only GET", http.StatusMethodNotAllowed)
			return
		}
		controller, kind, name, err := controllerOf(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r == nil {
			http.Error(w, "record: this metactl records no hook calls: it runs with --record=false", http.StatusNotFound)
			return
		}
		calls, ok := r.Calls(controller)
		if !ok {
			http.Error(w, NotRecording(kind, name), http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(Set{Controller: controller, Calls: calls})
	})
}

// NotRecording is the message for a controller whose calls are not
// recorded: which annotation to set.
func NotRecording(kind, name string) string {
	return fmt.Sprintf("record: metactl records no hook calls of %s/%s: it runs no such controller, or the controller does not opt in; annotate it %s: \"true\" (kubectl annotate %s %s %s=true) and let it call its hooks",
		kind, name, Annotation, kind, name, Annotation)
}

// controllerOf reads the query parameter controller of req.
func controllerOf(req *http.Request) (controller, kind, name string, err error) {
	controller = req.URL.Query().Get("controller")
	kind, name, ok := strings.Cut(controller, "/")
	if !ok || name == "" || (kind != "compositecontroller" && kind != "decoratorcontroller") {
		return "", "", "", fmt.Errorf("record: controller %q: want compositecontroller/NAME or decoratorcontroller/NAME", controller)
	}
	return controller, kind, name, nil
}

// Attributes returns what a set of recorded calls at Path shows, for the
// guard of metactl's debug endpoints (internal/debugauth): the calls of a
// controller carry its parents (decorated objects) and their children
// (attachments) in every namespace, so its caller must be allowed to list
// each of the resources resources names for it (manager.Manager's
// HookResources), in all namespaces. A controller that resources does not
// know (false: this process runs none of that name) is answered 404
// with NotRecording's message; a request without a controller 400.
func Attributes(resources func(controller string) ([]schema.GroupVersionResource, bool)) func(*http.Request) ([]authorizationv1.ResourceAttributes, error) {
	return func(req *http.Request) ([]authorizationv1.ResourceAttributes, error) {
		controller, kind, name, err := controllerOf(req)
		if err != nil {
			return nil, err
		}
		gvrs, ok := resources(controller)
		if !ok {
			return nil, notFoundError(NotRecording(kind, name))
		}
		attrs := make([]authorizationv1.ResourceAttributes, 0, len(gvrs))
		for _, gvr := range gvrs {
			attrs = append(attrs, authorizationv1.ResourceAttributes{Verb: "list", Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource})
		}
		return attrs, nil
	}
}

// notFoundError is an error answered 404 (its HTTPStatus).
type notFoundError string

func (e notFoundError) Error() string   { return string(e) }
func (e notFoundError) HTTPStatus() int { return http.StatusNotFound }
