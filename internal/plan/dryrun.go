package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// DryRun is the one place where metactl plan keeps its promise to write
// nothing: wrapped around the transport of every API client of the plan
// (rest.Config.Wrap), it sends each request whose method may write (any
// but GET, HEAD and OPTIONS) with dryRun=All, whatever code path makes
// it, so that the API server runs admission, defaulting and validation
// and persists nothing; and it records each such request for the report.
//
// The API server reads the options of a create, update or patch from the
// query, but those of a DELETE (of an object or a collection) from its
// body when it has one, ignoring the query: a DELETE's DeleteOptions body
// gets "dryRun": ["All"] too (one is made when the request has none). A
// write whose body is not a JSON (object, for a DELETE) cannot be checked
// or rewritten: it is refused here, never sent (see dryRunBody).
// Safe for concurrent use.
type DryRun struct {
	// Simulate, when set, may answer a write itself instead of sending
	// it (the writes to a parent that does not exist yet: see Plan);
	// ok false sends it.
	Simulate func(w *Write) (code int, body []byte, ok bool)

	mu     sync.Mutex
	writes []Write
	// deleted are the objects a dry-run DELETE deleted (by deletedKey),
	// since ForgetDeletes: a create of one of them is simulated.
	deleted map[string]bool
}

// deletedKey names the object namespace/name of group/version/resource.
func deletedKey(group, version, resource, namespace, name string) string {
	return group + "/" + version + "/" + resource + "/" + namespace + "/" + name
}

// ForgetDeletes forgets the dry-run DELETEs so far: another controller's
// plan starts from the live state.
func (d *DryRun) ForgetDeletes() {
	d.mu.Lock()
	d.deleted = nil
	d.mu.Unlock()
}

// recreated answers a create (POST) of an object a dry-run DELETE
// deleted before: the API server, which still has the object, would
// refuse it (409 AlreadyExists), where the real create, after the real
// delete, would be made (the Recreate update method). The answer is the
// object sent, in w's namespace (Write.Simulated).
func (d *DryRun) recreated(w *Write) (int, []byte, bool) {
	if w.Method != http.MethodPost || w.Name != "" || w.Subresource != "" || len(w.Request) == 0 {
		return 0, nil, false
	}
	obj := map[string]any{}
	if json.Unmarshal(w.Request, &obj) != nil {
		return 0, nil, false
	}
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	d.mu.Lock()
	deleted := name != "" && d.deleted[deletedKey(w.Group, w.Version, w.Resource, w.Namespace, name)]
	d.mu.Unlock()
	if !deleted {
		return 0, nil, false
	}
	if w.Namespace != "" {
		meta["namespace"] = w.Namespace
	}
	body, err := json.Marshal(obj)
	if err != nil {
		return 0, nil, false
	}
	return http.StatusCreated, body, true
}

// Write is one write request of the plan, sent as a dry run (or
// simulated), and its answer.
type Write struct {
	// Method is the HTTP method: POST (create), PUT (update), PATCH,
	// DELETE.
	Method string `json:"method"`
	// Path is the request's URL path, as the API server names the
	// object ("/api/v1/namespaces/default/configmaps/a").
	Path string `json:"path"`
	// Group, Version, Resource, Namespace, Name and Subresource are
	// read from Path; Name is empty for a create.
	Group       string `json:"group,omitempty"`
	Version     string `json:"version"`
	Resource    string `json:"resource"`
	Namespace   string `json:"namespace,omitempty"`
	Name        string `json:"name,omitempty"`
	Subresource string `json:"subresource,omitempty"`
	// ContentType is the request body's type (the patch type of a
	// PATCH).
	ContentType string `json:"contentType,omitempty"`
	// Request is the request body as sent; Response the answer's; each
	// absent when it is empty or not JSON.
	Request json.RawMessage `json:"request,omitempty"`
	// Code is the answer's HTTP status code; 0 when none came (Error).
	Code     int             `json:"code"`
	Response json.RawMessage `json:"response,omitempty"`
	// Error is why no answer came.
	Error string `json:"error,omitempty"`
	// Simulated: the plan answered the request itself, nothing was sent
	// (a write to a parent not yet created, or the create of a child a
	// dry-run DELETE of the same plan deleted: the Recreate method).
	Simulated bool `json:"simulated,omitempty"`
}

// IsWrite reports whether an HTTP method may write: any but GET, HEAD
// and OPTIONS.
func IsWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// Wrap returns rt with the dry run enforced; its signature fits
// rest.Config.Wrap.
func (d *DryRun) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if !IsWrite(req.Method) {
			return rt.RoundTrip(req)
		}
		return d.roundTrip(rt, req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func (d *DryRun) roundTrip(rt http.RoundTripper, req *http.Request) (*http.Response, error) {
	// A RoundTripper must not change the request it is given: a copy
	// goes out, with dryRun=All (replacing any dryRun already there).
	out := req.Clone(req.Context())
	q := out.URL.Query()
	q.Set("dryRun", "All")
	out.URL.RawQuery = q.Encode()
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		_ = req.Body.Close()
	}
	body, rewriteErr := dryRunBody(req.Method, body)
	if rewriteErr == nil && len(body) > 0 {
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		out.ContentLength = int64(len(body))
		if req.Method == http.MethodDelete {
			out.Header.Set("Content-Type", "application/json")
		}
	}
	w := Write{Method: req.Method, Path: out.URL.Path, ContentType: out.Header.Get("Content-Type"), Request: asJSON(body)}
	w.Group, w.Version, w.Resource, w.Namespace, w.Name, w.Subresource = ParsePath(w.Path)
	if rewriteErr != nil {
		// Never sent: a write that cannot be made a dry run for sure is
		// not made at all.
		err := fmt.Errorf("metactl plan did not send %s %s: %w", req.Method, out.URL.Path, rewriteErr)
		w.Error = err.Error()
		d.add(w)
		return nil, err
	}
	code, respBody, ok := d.recreated(&w)
	if !ok && d.Simulate != nil {
		code, respBody, ok = d.Simulate(&w)
	}
	if ok {
		w.Code, w.Response, w.Simulated = code, asJSON(respBody), true
		d.add(w)
		return &http.Response{
			StatusCode: code, Status: http.StatusText(code), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header:        http.Header{"Content-Type": []string{"application/json"}},
			Body:          io.NopCloser(bytes.NewReader(respBody)),
			ContentLength: int64(len(respBody)), Request: out,
		}, nil
	}

	resp, err := rt.RoundTrip(out)
	if err != nil {
		w.Error = err.Error()
		d.add(w)
		return nil, err
	}
	respBody, err = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		w.Error = err.Error()
		d.add(w)
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	w.Code, w.Response = resp.StatusCode, asJSON(respBody)
	if w.Method == http.MethodDelete && w.Name != "" && w.Subresource == "" && w.Code < 300 {
		d.mu.Lock()
		if d.deleted == nil {
			d.deleted = map[string]bool{}
		}
		d.deleted[deletedKey(w.Group, w.Version, w.Resource, w.Namespace, w.Name)] = true
		d.mu.Unlock()
	}
	d.add(w)
	return resp, nil
}

func (d *DryRun) add(w Write) {
	d.mu.Lock()
	d.writes = append(d.writes, w)
	d.mu.Unlock()
}

// Writes returns the write requests recorded since the mark (see Mark).
func (d *DryRun) Writes(mark int) []Write {
	d.mu.Lock()
	defer d.mu.Unlock()
	if mark > len(d.writes) {
		return nil
	}
	return append([]Write(nil), d.writes[mark:]...)
}

// Mark returns the number of write requests recorded so far, to read
// those after it with Writes.
func (d *DryRun) Mark() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.writes)
}

// deleteOptionsDryRun is the body of a DELETE sent without one.
const deleteOptionsDryRun = `{"kind":"DeleteOptions","apiVersion":"v1","dryRun":["All"]}`

// dryRunBody returns the body a write of method goes out with: a DELETE's
// DeleteOptions with dryRun ["All"] (made when body is empty); another
// write's body unchanged (its dryRun is the query's). An error when the
// body is not JSON (protobuf, say), or a DELETE's is not a JSON object:
// the write cannot be known to be a dry run.
func dryRunBody(method string, body []byte) ([]byte, error) {
	if method != http.MethodDelete {
		if len(body) > 0 && !json.Valid(body) {
			return nil, errors.New("its body is not JSON, so plan cannot tell it is a dry run")
		}
		return body, nil
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return []byte(deleteOptionsDryRun), nil
	}
	opts := map[string]any{}
	if err := json.Unmarshal(body, &opts); err != nil {
		return nil, fmt.Errorf("its body is not a JSON DeleteOptions, so plan cannot make it a dry run: %w", err)
	}
	if opts == nil { // "null"
		opts = map[string]any{}
	}
	opts["dryRun"] = []string{"All"}
	out, err := json.Marshal(opts)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// asJSON returns body when it is JSON, else nil.
func asJSON(body []byte) json.RawMessage {
	if len(body) == 0 || !json.Valid(body) {
		return nil
	}
	return json.RawMessage(body)
}

// ParsePath reads an API server resource path:
// /api/VERSION/[namespaces/NS/]RESOURCE[/NAME[/SUBRESOURCE]] or
// /apis/GROUP/VERSION/...; a path "/api/v1/namespaces/NAME" is the
// namespace NAME itself.
func ParsePath(path string) (group, version, resource, namespace, name, subresource string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		version, parts = parts[1], parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		group, version, parts = parts[1], parts[2], parts[3:]
	default:
		return "", "", "", "", "", ""
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		namespace, parts = parts[1], parts[2:]
	}
	if len(parts) > 0 {
		resource = parts[0]
	}
	if len(parts) > 1 {
		name = parts[1]
	}
	if len(parts) > 2 {
		subresource = strings.Join(parts[2:], "/")
	}
	if resource == "" && namespace == "" && len(parts) == 0 {
		return group, version, "", "", "", ""
	}
	return group, version, resource, namespace, name, subresource
}
