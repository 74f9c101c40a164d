package plan

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/jsondiff"
)

// WriteText prints the report for a person: per controller, each child
// with its action and field changes, the object's changes, the Events,
// the hook calls and whether the hook settled, and a summary line.
func WriteText(w io.Writer, r *Report) error {
	ew := &errWriter{w: w}
	what := r.Object.String()
	if !r.Exists {
		what += " (not created yet)"
	}
	for i, c := range r.Controllers {
		if i > 0 {
			ew.printf("\n")
		}
		ew.printf("%s %s, for %s:\n", c.Controller.Kind, c.Controller.Name, what)
		if c.Finalizing {
			ew.printf("  finalizing: the finalize hook is called\n")
		}
		ew.printf("  hook calls: %s; %s\n", calls(c.HookCalls), settled(c))
		if c.Error != "" {
			ew.printf("  error: %s\n", c.Error)
		}
		if len(c.Children) == 0 {
			ew.printf("  children: none\n")
		} else {
			ew.printf("  children:\n")
		}
		for _, ch := range c.Children {
			line := fmt.Sprintf("    %s %s: %s", ch.Kind, name(ch.ObjectRef), ch.Action)
			if ch.Error != "" {
				line += " (refused: " + ch.Error + ")"
			}
			ew.printf("%s\n", line)
			ew.changes("      ", ch.Changes)
		}
		if len(c.Object) == 0 {
			ew.printf("  %s: no change\n", r.Object.Kind)
		} else {
			ew.printf("  %s:\n", r.Object.Kind)
			ew.changes("    ", c.Object)
		}
		if len(c.Events) > 0 {
			ew.printf("  events:\n")
			for _, e := range c.Events {
				ew.printf("    %s %s on %s: %s\n", e.Type, e.Reason, e.Object, e.Message)
			}
		}
		ew.printf("  %s\n", summary(c, r.Object.Kind))
	}
	return ew.err
}

func name(r ObjectRef) string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}

func calls(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var hooks []string
	for h := range m {
		hooks = append(hooks, h)
	}
	sort.Strings(hooks)
	var parts []string
	for _, h := range hooks {
		parts = append(parts, fmt.Sprintf("%d %s", m[h], h))
	}
	return strings.Join(parts, ", ")
}

func settled(c *ControllerPlan) string {
	switch {
	case c.Rolling:
		return "settled: not checked (rolling update: one revision per sync; the next revision is the next sync's)"
	case c.Settled:
		return "settled (a call with the resulting state asks for nothing more)"
	case c.Error == "":
		return fmt.Sprintf("does not settle in %d calls (the hook still asks for changes)", engine.MaxRounds)
	default:
		return "not settled (the sync failed)"
	}
}

// summary is the last line of a controller's plan.
func summary(c *ControllerPlan, kind string) string {
	counts := map[string]int{}
	for _, ch := range c.Children {
		counts[ch.Action]++
	}
	s := fmt.Sprintf("Plan: %d to create, %d to update, %d to replace, %d to delete, %d unchanged",
		counts[Create], counts[Update], counts[Replace], counts[Delete], counts[Unchanged])
	if len(c.Object) > 0 {
		s += fmt.Sprintf("; %d change(s) to the %s", len(c.Object), kind)
	}
	switch {
	case c.Error != "":
		s += ". Plan failed."
	case !c.Changed:
		s += ". No changes."
	default:
		s += "."
	}
	return s
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

func (e *errWriter) changes(indent string, cs []jsondiff.Change) {
	if e.err == nil {
		e.err = jsondiff.Write(e.w, indent, cs)
	}
}
