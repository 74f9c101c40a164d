/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hooks

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	"github.com/metactl/metactl/internal/textcut"
)

// The limits of the events of one sync (finalize) answer (see
// CheckEvents).
const (
	// MaxEvents is the most events one answer may ask for.
	MaxEvents = 20
	// MaxEventReasonLength is the longest reason, in characters.
	MaxEventReasonLength = 128
	// MaxEventMessageBytes is the longest message kept, in bytes; a
	// longer one is cut (at a rune boundary) and ends with "...".
	MaxEventMessageBytes = 1024
)

// reservedEventReasons are the reasons of the Events metactl itself
// records on the objects it syncs (internal/engine's ReasonSyncError,
// ReasonHookNotSettled, ReasonUnknownAnswerField, ReasonStatusPruned;
// pkg/dynamic/children's ReasonChildWriteWarning, ReasonChildNotUpdated,
// ReasonChildNameTaken, ReasonChildTerminating;
// internal/engine's TestHookEventsCannotUseMetactlReasons checks that the
// list holds them all). A hook may not use them: its Events would pass for
// metactl's, and, through the recorder's spam filter (per object and
// reason), use up the budget of metactl's own.
var reservedEventReasons = []string{
	"SyncError", "HookNotSettled", "UnknownAnswerField", "StatusPruned",
	"ChildWriteWarning", "ChildNotUpdated", "ChildNameTaken", "ChildTerminating",
}

// IsReservedEventReason reports whether reason is one of metactl's own
// Event reasons, which a hook's events may not use, in any case
// ("syncerror" too).
func IsReservedEventReason(reason string) bool {
	for _, r := range reservedEventReasons {
		if strings.EqualFold(r, reason) {
			return true
		}
	}
	return false
}

// Event is one Event a sync (finalize) answer asks metactl to record on
// the parent (decorated object): {"type","reason","message"}.
type Event struct {
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning.
	Type string `json:"type"`
	// Reason is the Event's reason, as the hook gave it.
	Reason string `json:"reason"`
	// Message is the Event's message, at most MaxEventMessageBytes.
	Message string `json:"message"`
}

// CheckEvents reads the "events" list of an answer, as decoded (nil when
// absent or null), and checks it whole: at most MaxEvents entries, each an
// object with a type "Normal" or "Warning" (empty or absent is Normal), a
// reason of at most MaxEventReasonLength characters without white space
// that is not one of metactl's own (IsReservedEventReason), and a string
// message (cut to MaxEventMessageBytes). Other keys of an
// entry are ignored. The error names the first entry and field at fault
// and says what would be valid, and refuses the answer: an answer's
// events are checked with the rest of it, before anything is written.
//
// Its error is an *EventsError: a refusal by metactl's checks of an answer
// the hook gave, not a failure of the hook call (the answer decoded).
func CheckEvents(list *[]any) ([]Event, error) {
	events, err := checkEvents(list)
	if err != nil {
		return nil, &EventsError{Err: err}
	}
	return events, nil
}

func checkEvents(list *[]any) ([]Event, error) {
	if list == nil || len(*list) == 0 {
		return nil, nil
	}
	items := *list
	if len(items) > MaxEvents {
		return nil, fmt.Errorf("events: %d entries, at most %d per answer", len(items), MaxEvents)
	}
	out := make([]Event, len(items))
	for i, item := range items {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("events[%d] is %s, want a JSON object {\"type\",\"reason\",\"message\"}", i, jsonValueKind(item))
		}
		str := func(key string) (string, error) {
			v, ok := m[key]
			if !ok || v == nil {
				return "", nil
			}
			s, ok := v.(string)
			if !ok {
				return "", fmt.Errorf("events[%d].%s is %s, want a string", i, key, jsonValueKind(v))
			}
			return s, nil
		}
		typ, err := str("type")
		if err != nil {
			return nil, err
		}
		switch typ {
		case "":
			typ = corev1.EventTypeNormal
		case corev1.EventTypeNormal, corev1.EventTypeWarning:
		default:
			return nil, fmt.Errorf("events[%d].type %s: must be %s or %s", i, strconv.Quote(typ), corev1.EventTypeNormal, corev1.EventTypeWarning)
		}
		reason, err := str("reason")
		if err != nil {
			return nil, err
		}
		switch {
		case reason == "":
			return nil, fmt.Errorf("events[%d].reason is required: a short CamelCase word, such as %q", i, "BackupFailed")
		case utf8.RuneCountInString(reason) > MaxEventReasonLength:
			return nil, fmt.Errorf("events[%d].reason is %d characters long, at most %d", i, utf8.RuneCountInString(reason), MaxEventReasonLength)
		case strings.IndexFunc(reason, unicode.IsSpace) >= 0:
			return nil, fmt.Errorf("events[%d].reason %s: must have no white space (a short CamelCase word; the details go in the message)", i, strconv.Quote(reason))
		case IsReservedEventReason(reason):
			return nil, fmt.Errorf("events[%d].reason %s is one of metactl's own (%s): choose another, such as %q",
				i, strconv.Quote(reason), strings.Join(reservedEventReasons, ", "), "Hook"+reason)
		}
		message, err := str("message")
		if err != nil {
			return nil, err
		}
		out[i] = Event{Type: typ, Reason: reason, Message: textcut.Cut(message, MaxEventMessageBytes)}
	}
	return out, nil
}
