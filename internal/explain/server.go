package explain

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	authorizationv1 "k8s.io/api/authorization/v1"
)

// Source answers for one object; *manager.Manager is one. It must read
// caches only.
type Source interface {
	Explain(ctx context.Context, req Request) (*Answer, error)
}

// Handler serves src's answers at Path: GET with the query parameters of
// Request.Query; the answer as JSON (200), 400 for a request without a
// resource or name, 405 for another method.
func Handler(src Source) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "explain: only GET", http.StatusMethodNotAllowed)
			return
		}
		req, err := RequestFrom(r.URL.Query())
		if err != nil {
			http.Error(w, "explain: "+err.Error(), http.StatusBadRequest)
			return
		}
		answer, err := src.Explain(r.Context(), req)
		if err != nil {
			http.Error(w, "explain: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(answer)
	})
}

// Attributes is what an answer at Path shows, for the guard of metactl's
// debug endpoints (internal/debugauth): what metactl knows of the object
// asked about (its syncs, their errors, its children's names), so its
// caller must be allowed to get that object. A request without a
// resource or name is an error (400).
func Attributes(r *http.Request) ([]authorizationv1.ResourceAttributes, error) {
	req, err := RequestFrom(r.URL.Query())
	if err != nil {
		return nil, fmt.Errorf("explain: %w", err)
	}
	return []authorizationv1.ResourceAttributes{{Verb: "get", Group: req.Group, Version: req.Version,
		Resource: req.Resource, Namespace: req.Namespace, Name: req.Name}}, nil
}
