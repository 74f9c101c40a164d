package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/metactl/metactl/internal/hookrecord"
	"github.com/metactl/metactl/internal/jsondiff"
	"github.com/metactl/metactl/internal/redact"
	"github.com/metactl/metactl/internal/textcut"
	"github.com/metactl/metactl/pkg/dynamic/secretdigest"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// DefaultTimeout bounds each call when Options.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// Hooks are the names of the hooks a call may be recorded for.
var Hooks = []string{"sync", "finalize", "customize"}

// Options say where to send the calls and how.
type Options struct {
	// HookURL is the URL of every hook; HookURLFor overrides it per hook name
	// ("sync", "finalize", "customize"). A URL with no path (or "/")
	// gets the path of the hook in the recorded controller object (its
	// webhook's path, or the path of its webhook's url), so one address
	// serves a hook whose sync and customize answer on different paths.
	// A call whose hook has no URL is skipped.
	HookURL    string
	HookURLFor map[string]string
	// Timeout bounds each call, answer read included; zero means
	// DefaultTimeout.
	Timeout time.Duration
	// Ignore are paths of the answer (as jsondiff writes them: ".status.time",
	// `.children["v1/ConfigMap/ns/name"].metadata.annotations`) whose
	// changes are not differences: the path itself and everything below
	// it.
	Ignore []string
	// Update rewrites the recorded answer of each call whose answer
	// differs with the new one (Secret data as digests); such calls are
	// reported as Updated rather than Differs.
	Update bool
	// Client sends the calls; nil means a client of its own, without
	// proxies from the environment or cookies, that follows no redirect.
	Client *http.Client
}

// Status is what came of one call.
type Status string

const (
	// Same: the answer equals the recorded one.
	Same Status = "same"
	// Differs: the answer differs from the recorded one.
	Differs Status = "differs"
	// Updated: the answer differed, and the recorded one was replaced by
	// it (Options.Update).
	Updated Status = "updated"
	// Failed: the hook gave no usable answer: no connection, a timeout,
	// a status other than 200 (a redirect included: none is followed),
	// an answer too large or not JSON.
	Failed Status = "failed"
	// Skipped: the call was not sent, as it was recorded without an
	// answer or its hook has no URL.
	Skipped Status = "skipped"
)

// Result is what came of one recorded call.
type Result struct {
	// File is the recorded call's file in the set's directory.
	File string `json:"file"`
	// Hook is the hook called: "sync", "finalize" or "customize".
	Hook string `json:"hook"`
	// Controller and Object are those of the recorded call.
	Controller string `json:"controller,omitempty"`
	Object     string `json:"object,omitempty"`
	// URL is where the request was sent; empty when skipped.
	URL string `json:"url,omitempty"`
	// Status is what came of the call.
	Status Status `json:"status"`
	// Reason says why a call failed or was skipped.
	Reason string `json:"reason,omitempty"`
	// Code is the HTTP status of the answer; 0 when none came or the
	// call was skipped.
	Code int `json:"code,omitempty"`
	// DurationSeconds is how long the hook took to answer.
	DurationSeconds float64 `json:"durationSeconds,omitempty"`
	// Changes are the fields of the recorded answer that the new one
	// changes (Differs, Updated), ordered by path.
	Changes []jsondiff.Change `json:"changes,omitempty"`
	// Ignored counts the changes left out by Options.Ignore.
	Ignored int `json:"ignored,omitempty"`

	// reached is false when the call failed before any connection to
	// the hook was made.
	reached bool
}

// Summary counts the results by status.
type Summary struct {
	Calls   int `json:"calls"`
	Same    int `json:"same"`
	Differs int `json:"differs"`
	Updated int `json:"updated"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
}

// Report is what came of replaying a recorded set.
type Report struct {
	// Dir is the recorded set's directory.
	Dir string `json:"dir"`
	// Results has one entry per recorded call, in their order.
	Results []Result `json:"results"`
	// Summary counts them.
	Summary Summary `json:"summary"`
}

// ErrNoCalls is returned by Run for a directory without recorded calls.
var ErrNoCalls = errors.New("no recorded calls")

// Run sends every recorded call in dir to its hook, one at a time, and
// compares the answers with the recorded ones. It fails only when dir
// cannot be read or holds no calls, when ctx ends, or when an update
// cannot be written; what came of each call is in the Report.
func Run(ctx context.Context, dir string, opts Options) (*Report, error) {
	files, err := hookrecord.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the recorded set: %w", err)
	}
	if len(files) == 0 {
		if sets := subSets(dir); len(sets) > 0 {
			// metactl dev --record-dir DIR keeps a set per controller.
			return nil, fmt.Errorf("%w in %s, but in its folders %s: give one of them", ErrNoCalls, dir, strings.Join(sets, ", "))
		}
		return nil, fmt.Errorf("%w in %s (files named NNNN-HOOK.json, such as 0001-sync.json)", ErrNoCalls, dir)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Client == nil {
		// A redirect is not followed: replay contacts only the URLs it
		// is given, and a 3xx is the hook's answer, which fails.
		opts.Client = &http.Client{Transport: &http.Transport{Proxy: nil, DisableCompression: true},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	r := &Report{Dir: dir, Results: make([]Result, 0, len(files))}
	for _, f := range files {
		res, answer := replayOne(ctx, f, &opts)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if res.Status == Differs && opts.Update {
			if err := update(dir, f, answer); err != nil {
				return nil, err
			}
			res.Status = Updated
		}
		r.Results = append(r.Results, res)
		r.count(res.Status)
	}
	return r, nil
}

func (r *Report) count(s Status) {
	r.Summary.Calls++
	switch s {
	case Same:
		r.Summary.Same++
	case Differs:
		r.Summary.Differs++
	case Updated:
		r.Summary.Updated++
	case Failed:
		r.Summary.Failed++
	case Skipped:
		r.Summary.Skipped++
	}
}

// Sent is the number of calls sent to a hook (those not skipped).
func (r *Report) Sent() int { return r.Summary.Calls - r.Summary.Skipped }

// Reached is the number of calls that connected to their hook, whatever
// came of them.
func (r *Report) Reached() int {
	n := 0
	for _, res := range r.Results {
		if res.Status != Skipped && res.reached {
			n++
		}
	}
	return n
}

// replayOne sends one recorded call and compares its answer; it returns
// the new answer (Secret data as digests) when there is one.
func replayOne(ctx context.Context, f hookrecord.File, opts *Options) (Result, []byte) {
	res := Result{File: f.Name, Hook: f.Hook, Controller: f.Controller, Object: f.Object, reached: true}
	if len(f.Response) == 0 {
		res.Status, res.Reason = Skipped, "recorded without an answer"
		if f.Error != "" {
			res.Reason += " (" + textcut.Cut(oneLine(f.Error), jsondiff.MaxValueBytes) + ")"
		}
		return res, nil
	}
	target, err := hookURL(opts, f.Hook, f.Request)
	if err != nil {
		res.Status, res.Reason = Skipped, err.Error()
		return res, nil
	}
	res.URL = target
	var recorded any
	if err := decode(f.Response, &recorded); err != nil {
		res.Status, res.Reason = Skipped, "the recorded answer is not JSON: "+err.Error()
		return res, nil
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, f.Request); err != nil {
		res.Status, res.Reason = Skipped, "the recorded request is not JSON: "+err.Error()
		return res, nil
	}
	body, code, took, err := send(ctx, opts, target, compact.Bytes())
	res.Code, res.DurationSeconds = code, took.Seconds()
	if err != nil {
		var op *net.OpError
		res.reached = !(errors.As(err, &op) && op.Op == "dial")
		res.Status, res.Reason = Failed, err.Error()
		return res, nil
	}
	if code != http.StatusOK {
		res.Status, res.Reason = Failed, fmt.Sprintf("HTTP %d %s", code, http.StatusText(code))
		if text := errorBody(body); text != "" {
			res.Reason += ": " + text
		}
		return res, nil
	}
	var answer any
	err = decode(body, &answer)
	if err == nil {
		body, err = hookrecord.DigestSecrets(body)
	}
	if err == nil {
		err = decode(body, &answer)
	}
	if err != nil {
		res.Status, res.Reason = Failed, "the answer is not JSON: "+err.Error()
		return res, nil
	}
	for _, c := range jsondiff.Diff(keyLists(saltedAlike(recorded)), keyLists(saltedAlike(answer))) {
		if ignored(c.Path, opts.Ignore) {
			res.Ignored++
			continue
		}
		res.Changes = append(res.Changes, c)
	}
	res.Status = Same
	if len(res.Changes) > 0 {
		res.Status = Differs
	}
	return res, body
}

// send POSTs request to target and returns the answer's body, bounded by
// hookclient.DefaultMaxResponseBytes, its status and how long it took.
func send(ctx context.Context, opts *Options, target string, request []byte) ([]byte, int, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(request))
	if err != nil {
		return nil, 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "metactl-replay")
	start := time.Now()
	resp, err := opts.Client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, 0, time.Since(start), fmt.Errorf("no answer within %v (--request-timeout)", opts.Timeout)
		}
		return nil, 0, time.Since(start), err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, hookclient.DefaultMaxResponseBytes+1))
	took := time.Since(start)
	switch {
	case errors.Is(err, context.DeadlineExceeded) || (err != nil && ctx.Err() != nil):
		return nil, resp.StatusCode, took, fmt.Errorf("the answer was not read within %v (--request-timeout)", opts.Timeout)
	case err != nil:
		return nil, resp.StatusCode, took, fmt.Errorf("reading the answer: %w", err)
	case int64(len(body)) > hookclient.DefaultMaxResponseBytes:
		return nil, resp.StatusCode, took, fmt.Errorf("the answer exceeds the limit of %d bytes", hookclient.DefaultMaxResponseBytes)
	}
	return body, resp.StatusCode, took, nil
}

// subSets returns the folders of dir that hold recorded calls.
func subSets(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if files, err := hookrecord.ReadDir(filepath.Join(dir, e.Name())); err == nil && len(files) > 0 {
			out = append(out, e.Name())
		}
	}
	return out
}

// hookURL returns where to send a call of hook: its URL from HookURLFor,
// else HookURL; a URL without a path gets the hook's path from the
// controller object in the recorded request.
func hookURL(opts *Options, hook string, request []byte) (string, error) {
	base, from := opts.HookURLFor[hook], "--hook-url-for"
	if base == "" {
		base, from = opts.HookURL, "--hook-url"
	}
	if base == "" {
		return "", fmt.Errorf("no URL for the %s hook (give --hook-url, or --hook-url-for %s=URL)", hook, hook)
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", from, base, err)
	}
	if u.Path == "" || u.Path == "/" {
		if p := recordedPath(hook, request); p != "" {
			u.Path = p
		}
	}
	return u.String(), nil
}

// recordedPath returns the path of hook's webhook in the controller object
// of a recorded request (spec.hooks.HOOK.webhook: its path, else the path
// of its url), or "".
func recordedPath(hook string, request []byte) string {
	var req struct {
		Controller struct {
			Spec struct {
				Hooks map[string]struct {
					Webhook struct {
						URL  string `json:"url"`
						Path string `json:"path"`
					} `json:"webhook"`
				} `json:"hooks"`
			} `json:"spec"`
		} `json:"controller"`
	}
	if json.Unmarshal(request, &req) != nil {
		return ""
	}
	w := req.Controller.Spec.Hooks[hook].Webhook
	if w.Path != "" {
		return w.Path
	}
	// A recorded url has its credentials redacted
	// ("http://<redacted>@host/path"), which redact.ParseURL reads.
	if u, err := redact.ParseURL(w.URL); err == nil && w.URL != "" {
		return u.Path
	}
	return ""
}

// decode decodes one JSON value, numbers as json.Number so that no digit
// is lost; anything after it is an error.
func decode(data []byte, v *any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("more than one JSON value")
	}
	return nil
}

// saltedDigest stands, in a compared answer, for every salted digest
// (secretdigest.Salted: the recorded answer's, made by the process that
// recorded it, and the new answer's, made by this one).
const saltedDigest = secretdigest.SaltedPrefix + "*"

// saltedAlike returns v, a decoded answer, with every string that is a
// salted digest replaced by saltedDigest (maps and lists changed in
// place). Salted digests of two processes cannot be compared: a Secret's
// values compare by their keys only.
func saltedAlike(v any) any {
	switch t := v.(type) {
	case string:
		if secretdigest.IsSalted(t) {
			return saltedDigest
		}
	case map[string]any:
		for k, val := range t {
			t[k] = saltedAlike(val)
		}
	case []any:
		for i, val := range t {
			t[i] = saltedAlike(val)
		}
	}
	return v
}

// setKeys are the top-level keys of an answer whose lists are sets of
// objects.
var setKeys = []string{"children", "attachments"}

// keyLists returns an answer with its lists of children or attachments
// turned into maps keyed by object (jsondiff.ByObjectKey), a null list
// read as an empty one, as metactl reads it; a list that cannot be keyed
// (an item without a kind or name, two items with the same key) stays a
// list, compared by index. answer is not modified.
func keyLists(answer any) any {
	m, ok := answer.(map[string]any)
	if !ok {
		return answer
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	for _, k := range setKeys {
		v, in := out[k]
		if !in {
			continue
		}
		if v == nil {
			v = []any{}
		}
		if list, ok := v.([]any); ok {
			out[k], _ = jsondiff.ByObjectKey(list)
		}
	}
	return out
}

// ignored reports whether path is one of ignore, or below one.
func ignored(path string, ignore []string) bool {
	for _, p := range ignore {
		p = strings.TrimSuffix(p, ".")
		if p == "" {
			continue
		}
		if path == p || (strings.HasPrefix(path, p) && (path[len(p)] == '.' || path[len(p)] == '[')) {
			return true
		}
	}
	return false
}

// errorBody returns the start of a failed answer's body on one line,
// Secret data and URL credentials redacted.
func errorBody(body []byte) string {
	text := strings.TrimSpace(string(body))
	if text == "" {
		return ""
	}
	if json.Valid(body) {
		text = redact.JSON(body)
	} else {
		text = redact.URLs(text)
	}
	return textcut.Cut(oneLine(text), jsondiff.MaxValueBytes)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// update replaces the recorded answer of f with answer, in its file.
func update(dir string, f hookrecord.File, answer []byte) error {
	n, _, ok := hookrecord.ParseFileName(f.Name)
	if !ok || hookrecord.FileName(n, f.Call) != f.Name {
		return fmt.Errorf("updating %s: not named as a recorded call is (%s)", f.Name, hookrecord.FileName(n, f.Call))
	}
	c := f.Call
	c.Response, c.Code, c.Error = answer, http.StatusOK, ""
	if err := hookrecord.WriteDir(dir, n, []hookrecord.Call{c}); err != nil {
		return fmt.Errorf("updating %s: %w", filepath.Join(dir, f.Name), err)
	}
	return nil
}
