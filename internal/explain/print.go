package explain

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/metactl/metactl/internal/history"
	"github.com/metactl/metactl/internal/trigger"
)

// Print writes a as people read it, like kubectl describe: the
// controller, a state line, the recent syncs, the dependents. now is the
// reference for "in 12s".
func Print(out io.Writer, a *Answer, now time.Time) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	p := func(format string, args ...any) {
		// The hook's text (condition messages, errors) and the API
		// server's reach the terminal escaped.
		for i, arg := range args {
			switch v := arg.(type) {
			case string:
				args[i] = escape(v)
			case fmt.Stringer:
				args[i] = escape(v.String())
			}
		}
		fmt.Fprintf(w, format+"\n", args...)
	}
	p("Object:\t%s", a.Object)
	role := "leader"
	if !a.Process.Leading {
		role = "standby, or another replica holds the object's bucket: knows no controller"
	}
	p("Answered by:\tmetactl %s (%s)", a.Process.Name, role)
	if len(a.Controllers) == 0 {
		p("Controller:\t%s", noController(a))
		for _, ns := range a.NotSelected {
			p("\t%s %s syncs this resource but does not select it: %s", ns.Kind, ns.Name, ns.Selector)
		}
		return w.Flush()
	}
	for i, c := range a.Controllers {
		if i > 0 {
			p("")
		}
		printController(p, c, now)
	}
	return w.Flush()
}

func noController(a *Answer) string {
	switch {
	case !a.Process.Leading:
		return "unknown: ask the leader (sharded: the holder of the object's bucket)"
	case len(a.NotSelected) > 0:
		return "none: no controller selects it"
	case a.Watched && !a.InCache:
		return "none: not in the cache of the controllers that sync this resource (deleted, or not seen yet)"
	default:
		return "none: no CompositeController or DecoratorController of this metactl syncs this resource (check the controller's parentResource or resources, and that it is Ready: kubectl get compositecontrollers,decoratorcontrollers)"
	}
}

// printController prints, with p, controller c's part of the answer: its
// state, its rollout, its recent syncs and its dependents.
func printController(p func(string, ...any), c Controller, now time.Time) {
	p("Controller:\t%s %s (%s)", c.Kind, c.Name, c.Role)
	p("State:\t%s", stateLine(c.State, now))
	if !c.State.SyncingSince.IsZero() {
		p("\tsyncing now, for %s", describeDuration(now.Sub(c.State.SyncingSince)))
	}
	if !c.State.QueuedSince.IsZero() {
		p("\tqueued for %s: waiting for a worker (each controller syncs at most --workers objects at once)", describeDuration(now.Sub(c.State.QueuedSince)))
	}
	if c.Rollout != nil {
		p("Rollout:\t%s", rolloutLine(c.Rollout))
	}
	p("")
	printSyncs(p, c.Syncs, c.Kept)
	p("")
	noun := "Children"
	if c.Role == RoleDecorated {
		noun = "Attachments"
	}
	printDependents(p, noun, c.Dependents)
}

// rolloutLine is the one-line summary of r: "Updated=STATUS REASON:
// MESSAGE", without the reason or message when empty.
func rolloutLine(r *Rollout) string {
	line := "Updated=" + r.Status
	if r.Reason != "" {
		line += " " + r.Reason
	}
	if r.Message != "" {
		line += ": " + r.Message
	}
	return line
}

// printSyncs prints, with p, the table of syncs (newest first), each row
// followed by the sync's hook calls and writes.
func printSyncs(p func(string, ...any), syncs []*history.Sync, kept *Kept) {
	if note := keptNote(kept); note != "" {
		p("Record kept:\t%s", note)
	}
	if len(syncs) == 0 {
		p("Recent syncs:\tnone recorded (since metactl started, or evicted)")
		return
	}
	p("Recent syncs (newest first):")
	// Aligned by hand: the lines of each sync's calls and writes
	// between its rows would end a tabwriter's column block.
	rows := [][4]string{{"TIME", "TRIGGERS", "DURATION", "OUTCOME"}}
	for _, s := range syncs {
		rows = append(rows, [4]string{s.Start.UTC().Format(time.TimeOnly), escape(triggers(s.Triggers)), describeDuration(s.Duration), escape(outcome(s.Outcome))})
	}
	var width [3]int
	for _, r := range rows {
		for i := range width {
			width[i] = max(width[i], len(r[i]))
		}
	}
	p("%s", syncRow(rows[0], width))
	for i, s := range syncs {
		p("%s", syncRow(rows[i+1], width))
		printSyncDetail(p, s)
	}
}

// syncRow is the line of a row of the table of syncs, its first three
// columns padded to width.
func syncRow(r [4]string, width [3]int) string {
	return strings.TrimRight(fmt.Sprintf("  %-*s  %-*s  %-*s  %s", width[0], r[0], width[1], r[1], width[2], r[2], r[3]), " ")
}

// printSyncDetail prints, with p, the hook calls and the writes of s, a
// line each.
func printSyncDetail(p func(string, ...any), s *history.Sync) {
	for _, call := range s.Calls {
		line := fmt.Sprintf("    hook %s: %s in %s", call.Hook, call.Result, describeDuration(call.Duration))
		// The error that ended the sync is in its row already.
		if call.Error != "" && !strings.Contains(s.Outcome.Error, call.Error) {
			line += ": " + call.Error
		}
		p("%s", line)
	}
	for _, wr := range s.Writes {
		line := fmt.Sprintf("    %s %s %s", wr.Verb, wr.Target, wr.Object)
		if wr.Error != "" {
			line += ": " + wr.Error
		}
		p("%s", line)
	}
}

// printDependents prints, with p, the table of dependents under noun
// ("Children", "Attachments"), with a column of revisions when any has
// one.
func printDependents(p func(string, ...any), noun string, dependents []Dependent) {
	if len(dependents) == 0 {
		p("%s:\tnone", noun)
		return
	}
	p("%s:", noun)
	revisions := slices.ContainsFunc(dependents, func(d Dependent) bool { return d.Revision != "" })
	if revisions {
		p("  RESOURCE\tNAME\tSTATE\tREVISION")
	} else {
		p("  RESOURCE\tNAME\tSTATE")
	}
	for _, d := range dependents {
		name := d.Name
		if d.Namespace != "" {
			name = d.Namespace + "/" + d.Name
		}
		if !revisions {
			p("  %s\t%s\t%s", d.Resource, name, d.State)
			continue
		}
		rev := d.Revision
		if rev != "" && d.Latest {
			rev += " (latest)"
		}
		p("  %s\t%s\t%s\t%s", d.Resource, name, d.State, rev)
	}
}

// stateLine is the one-line summary of s: "Synced", or "Failing:
// HookFailed <error>, attempt 4, next attempt in 12s (at 15:04:05Z)".
func stateLine(s State, now time.Time) string {
	var b strings.Builder
	b.WriteString(s.Phase)
	switch s.Phase {
	case PhaseUnknown:
		return "no sync recorded, and not failing"
	case PhaseQueued:
		return "Queued: no sync recorded yet; waiting in the work queue for its first sync"
	case PhaseSynced:
	default:
		b.WriteString(":")
		if s.Reason != "" {
			b.WriteString(" " + s.Reason)
		}
		if s.Error != "" {
			b.WriteString(" " + s.Error)
		}
		if s.Attempt > 0 {
			fmt.Fprintf(&b, ", attempt %d", s.Attempt)
		}
	}
	if !s.NextAttempt.IsZero() {
		sep := ", "
		if s.Phase == PhaseSynced {
			sep = "; "
		}
		in := s.NextAttempt.Sub(now)
		if in > 0 {
			fmt.Fprintf(&b, "%snext attempt in %s (at %s)", sep, describeDuration(in), s.NextAttempt.UTC().Format(time.RFC3339))
		} else {
			fmt.Fprintf(&b, "%snext attempt due now (was at %s)", sep, s.NextAttempt.UTC().Format(time.RFC3339))
		}
	}
	return b.String()
}

func triggers(ts []trigger.Trigger) string {
	if len(ts) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(ts))
	for _, t := range ts {
		parts = append(parts, t.String())
	}
	return strings.Join(parts, ", ")
}

func outcome(o history.Outcome) string {
	s := o.Result
	if o.Reason != "" && o.Result != history.ResultSuccess {
		s += " " + o.Reason
	}
	if o.Error != "" {
		s += ": " + o.Error
	}
	return s
}

// escape writes the characters of s that a terminal would not print as
// text (control characters: escape sequences, carriage returns, newlines;
// invalid UTF-8) as Go escapes ("\x1b", "\n", "\xff"), and leaves the
// others, a backslash included, as they are: the text of a hook's answer
// or error cannot move the cursor, recolour or rewrite what explain
// prints.
func escape(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r == utf8.RuneError || !unicode.IsPrint(r) })
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for rest := s[i:]; rest != ""; {
		r, n := utf8.DecodeRuneInString(rest)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, "\\x%02x", rest[0])
		case unicode.IsPrint(r):
			b.WriteString(rest[:n])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		rest = rest[n:]
	}
	return b.String()
}

// keptNote says what the record keeps of each object: "the last 20
// syncs of each object within 32 KiB, and its last failure; 4 MiB for all
// (--history-max-bytes)", or "" when unknown.
func keptNote(k *Kept) string {
	if k == nil || k.SyncsPerObject == 0 {
		return ""
	}
	return fmt.Sprintf("the last %d syncs of each object within %d KiB, and its last failure; %d MiB for all (--history-max-bytes)",
		k.SyncsPerObject, k.BytesPerObject>>10, k.Bytes>>20)
}
