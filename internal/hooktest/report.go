package hooktest

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/metactl/metactl/internal/jsondiff"
	"github.com/metactl/metactl/internal/textcut"
)

// Severity says whether a finding fails the test.
type Severity string

const (
	// Error: the hook breaks the protocol or metactl refuses its answer;
	// `metactl hook test` exits 2.
	Error Severity = "error"
	// Warning: metactl accepts the answer, but the hook likely does not
	// do what its author means.
	Warning Severity = "warning"
)

// The checks, as Finding.Check names them. docs/hook-test.md lists them
// with their fixes.
const (
	CheckHTTPStatus       = "http-status"
	CheckUnreachable      = "unreachable"
	CheckTimeout          = "timeout"
	CheckInvalidJSON      = "invalid-json"
	CheckNotObject        = "not-object"
	CheckUnknownFields    = "unknown-fields"
	CheckStatusNotObject  = "status-not-object"
	CheckInvalidAnswer    = "invalid-answer"
	CheckAbsentList       = "absent-list"
	CheckInvalidChildren  = "invalid-children"
	CheckNondeterministic = "nondeterministic"
	CheckNotFinalized     = "not-finalized"
	CheckNotFixedPoint    = "not-fixed-point"
	CheckRelatedResources = "related-resources"
)

// fixes says how to fix what each check finds.
var fixes = map[string]string{
	CheckHTTPStatus:       "answer every valid request with HTTP 200 and a JSON object (metactl applies nothing of a non-200 answer and retries the object with backoff)",
	CheckUnreachable:      "the hook closed the connection or could not be reached for this request: look for a crash in its log (a key it reads that this request lacks?)",
	CheckTimeout:          "answer within the webhook's timeout (default 10s), or raise webhook.timeout in the controller",
	CheckInvalidJSON:      "answer a JSON object, with Content-Type application/json",
	CheckNotObject:        "answer a JSON object ({\"status\": ..., \"children\": [...]}), never null, a list or a string",
	CheckUnknownFields:    "answer only the protocol's keys (a misspelt key is ignored in loose mode and refused in strict mode)",
	CheckStatusNotObject:  "answer status as a JSON object, or null / no status",
	CheckInvalidAnswer:    "fix what the message names: each child (attachment) an object with apiVersion, kind and metadata.name; each event with a reason and type Normal or Warning, at most 20 (docs/hooks.md lists the answer's fields)",
	CheckAbsentList:       "always answer the list, [] to delete every child; or annotate the controller with the absent-list annotation the message names",
	CheckInvalidChildren:  "ask only for objects of the declared resources, in the parent's namespace (its own namespace for a namespaced parent), with a valid metadata.name, each once",
	CheckNondeterministic: "answer the same request with the same answer: no timestamps, random values or map iteration order in the answer (lists of children are compared as sets)",
	CheckNotFinalized:     "answer \"finalized\": true once finalizing is true and the children you wait for are gone (given back as metactl writes what you ask for), else the parent is never deleted",
	CheckNotFixedPoint:    "given its own children and the status it asked for, the hook should ask for no change (no timestamps or counters of calls in the status), else metactl syncs the parent again and again",
	CheckRelatedResources: "declare related resources the API server serves, following the rules of relatedResources (names or a selector, namespace or namespaceSelector)",
}

// Finding is one thing the hook got wrong.
type Finding struct {
	// Severity is "error" or "warning".
	Severity Severity `json:"severity"`
	// Check names the check that found it (see the Check constants).
	Check string `json:"check"`
	// Hook is the hook that answered: "sync", "finalize" or "customize".
	Hook string `json:"hook"`
	// Requests are the names of the requests whose answers show it (see
	// Request.Name), in the order sent.
	Requests []string `json:"requests"`
	// Message says what is wrong.
	Message string `json:"message"`
	// Fix says how to fix it.
	Fix string `json:"fix"`
	// Diff are the fields that differ: for nondeterministic, from the
	// first answer to the second; for not-fixed-point, what the last
	// answer changes of what the hook was given (children under
	// .children["Kind key"] or .attachments[...], .status,
	// .metadata.labels, .metadata.annotations).
	Diff []jsondiff.Change `json:"diff,omitempty"`
}

// Request is one request sent (or that could not be built).
type Request struct {
	// Name names the request (see docs/hook-test.md).
	Name string `json:"name"`
	// Hook is the hook it is for: "sync", "finalize" or "customize".
	Hook string `json:"hook"`
	// Description says what the request exercises.
	Description string `json:"description"`
	// Sent is how many times it was sent (2: the same request twice,
	// for determinism); 0 when it could not be built or was not sent.
	Sent int `json:"sent"`
	// Skipped says why it was not sent, when it was not.
	Skipped string `json:"skipped,omitempty"`
	// Milliseconds is the longest of its calls.
	Milliseconds int64 `json:"milliseconds"`
	// OK: every answer to it passed every check.
	OK bool `json:"ok"`
}

// Hook is one hook tested.
type Hook struct {
	// Name is "sync", "finalize" or "customize".
	Name string `json:"name"`
	// URL is the address called (credentials redacted).
	URL string `json:"url"`
	// Version is the hook's protocol version, "v1" or "v2": how objects
	// are keyed in its requests.
	Version string `json:"version"`
	// Mode is how its answers are read: "loose" or "strict".
	Mode string `json:"mode"`
	// Timeout is the hook's timeout, as Go writes a duration ("10s").
	Timeout string `json:"timeout"`
}

// Report is what Run found.
type Report struct {
	// Kind is CompositeController or DecoratorController; Controller its
	// name.
	Kind       string `json:"kind"`
	Controller string `json:"controller"`
	// Resources says where the resources were resolved: "cluster"
	// (discovery) or "offline".
	Resources string `json:"resources"`
	// Notes are what the reader should know about how the test ran
	// (resources guessed offline, a parent made up, requests not built).
	Notes []string `json:"notes,omitempty"`
	// Hooks are the hooks tested.
	Hooks []Hook `json:"hooks"`
	// Requests are the requests, in the order sent.
	Requests []Request `json:"requests"`
	// Findings are what the hook got wrong, errors first.
	Findings []Finding `json:"findings"`
	// Errors and Warnings count the findings of each severity.
	Errors   int `json:"errors"`
	Warnings int `json:"warnings"`
}

// add records a finding for request, merging it with an equal one of
// another request.
func (r *Report) add(sev Severity, check, hook, request, message string, diff []jsondiff.Change) {
	for i := range r.Findings {
		f := &r.Findings[i]
		if f.Severity == sev && f.Check == check && f.Hook == hook && f.Message == message && len(diff) == 0 && len(f.Diff) == 0 {
			if len(f.Requests) == 0 || f.Requests[len(f.Requests)-1] != request {
				f.Requests = append(f.Requests, request)
			}
			return
		}
	}
	r.Findings = append(r.Findings, Finding{Severity: sev, Check: check, Hook: hook, Requests: []string{request}, Message: message, Fix: fixes[check], Diff: diff})
}

// finish orders the findings, errors first, and counts them.
func (r *Report) finish() {
	var errs, warns []Finding
	for _, f := range r.Findings {
		if f.Severity == Error {
			errs = append(errs, f)
		} else {
			warns = append(warns, f)
		}
	}
	r.Findings = append(errs, warns...)
	if r.Findings == nil {
		r.Findings = []Finding{}
	}
	r.Errors, r.Warnings = len(errs), len(warns)
}

// MaxTextMessageBytes bounds a finding's message as WriteText prints it
// (a hook's error page can be long); -o json has it whole.
const MaxTextMessageBytes = 400

// WriteText prints the report for people: the hooks, one line per request,
// then one line per finding with its fix (its differing fields below it).
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s (resources: %s)\n", r.Kind, r.Controller, r.Resources)
	for _, h := range r.Hooks {
		fmt.Fprintf(&b, "  %s hook %s (%s, %s, timeout %s)\n", h.Name, h.URL, h.Version, h.Mode, h.Timeout)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	b.WriteString("\n")
	for _, q := range r.Requests {
		state := "ok  "
		switch worst := r.worst(q); {
		case q.Sent == 0:
			state = "skip"
		case worst == Warning:
			state = "warn"
		case !q.OK || worst == Error:
			state = "FAIL"
		}
		line := fmt.Sprintf("%s %-9s %-22s %s", state, q.Hook, q.Name, q.Description)
		if q.Skipped != "" {
			line += " (" + q.Skipped + ")"
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	if len(r.Findings) > 0 {
		b.WriteString("\n")
	}
	for _, f := range r.Findings {
		fmt.Fprintf(&b, "%s: %s hook [%s] (%s): %s; fix: %s\n", f.Severity, f.Hook, f.Check, strings.Join(f.Requests, ", "), textcut.Cut(f.Message, MaxTextMessageBytes), f.Fix)
		for _, c := range f.Diff {
			b.WriteString("    " + c.String() + "\n")
		}
	}
	fmt.Fprintf(&b, "\n%d %s, %d %s\n", r.Errors, plural(r.Errors, "error", "errors"), r.Warnings, plural(r.Warnings, "warning", "warnings"))
	_, err := io.WriteString(w, b.String())
	return err
}

// worst is the severity of the worst finding that names q; "" when none
// does.
func (r *Report) worst(q Request) Severity {
	var worst Severity
	for _, f := range r.Findings {
		if f.Hook != q.Hook || !slices.Contains(f.Requests, q.Name) {
			continue
		}
		if f.Severity == Error {
			return Error
		}
		worst = f.Severity
	}
	return worst
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
