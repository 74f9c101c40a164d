package explain

import (
	"context"
	"encoding/json"
	"net/http"
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
