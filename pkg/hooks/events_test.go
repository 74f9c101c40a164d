/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hooks

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// TestAnswersCarryEvents: both kinds of answer decode "events", in loose
// and strict mode, and not as an unknown key.
func TestAnswersCarryEvents(t *testing.T) {
	events := `"events":[{"type":"Warning","reason":"BackupFailed","message":"disk full"},{"reason":"Ready"}]`
	want := []Event{{Type: "Warning", Reason: "BackupFailed", Message: "disk full"}, {Type: "Normal", Reason: "Ready"}}
	for _, mode := range []v1alpha1.ResponseUnMarshallMode{v1alpha1.ResponseUnMarshallModeLoose, v1alpha1.ResponseUnMarshallModeStrict} {
		var c CompositeSyncResponse
		if err := c.DecodeHookResponse([]byte(`{"children":[],`+events+`}`), mode); err != nil {
			t.Fatalf("%s: composite: %v", mode, err)
		}
		if diff := cmp.Diff(want, c.Events); diff != "" || c.UnknownFields != nil {
			t.Errorf("%s: composite events (-want +got):\n%s unknown %v", mode, diff, c.UnknownFields)
		}
		var d DecoratorSyncResponse
		if err := d.DecodeHookResponse([]byte(`{"attachments":[],`+events+`}`), mode); err != nil {
			t.Fatalf("%s: decorator: %v", mode, err)
		}
		if diff := cmp.Diff(want, d.Events); diff != "" || d.UnknownFields != nil {
			t.Errorf("%s: decorator events (-want +got):\n%s unknown %v", mode, diff, d.UnknownFields)
		}
	}
}

// TestInvalidEventsRefuseTheAnswer: an answer with an invalid event is
// invalid whole, with a message naming the entry and field.
func TestInvalidEventsRefuseTheAnswer(t *testing.T) {
	many := make([]string, MaxEvents+1)
	for i := range many {
		many[i] = fmt.Sprintf(`{"reason":"R%d"}`, i)
	}
	for _, tc := range []struct{ events, want string }{
		{`[{"reason":"A"},{"type":"Warn","reason":"B"}]`, `events[1].type "Warn": must be Normal or Warning`},
		{`[{"type":"Normal"}]`, `events[0].reason is required`},
		{`[{"reason":"Two words"}]`, `events[0].reason "Two words": must have no white space`},
		{`[{"reason":"` + strings.Repeat("r", MaxEventReasonLength+1) + `"}]`, `events[0].reason is 129 characters long, at most 128`},
		{`[{"reason":"A","message":3}]`, `events[0].message is a number, want a string`},
		{`["Ready"]`, `events[0] is a string, want a JSON object`},
		{`[{"reason":"Done"},{"type":"Warning","reason":"SyncError","message":"forged"}]`, `events[1].reason "SyncError" is one of metactl's own`},
		{`[{"reason":"hooknotsettled"}]`, `events[0].reason "hooknotsettled" is one of metactl's own`},
		{`[{"reason":"ChildNotUpdated"}]`, `choose another, such as "HookChildNotUpdated"`},
		{`[` + strings.Join(many, ",") + `]`, `events: 21 entries, at most 20 per answer`},
	} {
		var c CompositeSyncResponse
		err := c.DecodeHookResponse([]byte(`{"children":[],"events":`+tc.events+`}`), v1alpha1.ResponseUnMarshallModeLoose)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("composite events %.60s: err %v, want %q", tc.events, err, tc.want)
		}
		if c.Children != nil || c.Status != nil || c.Events != nil {
			t.Errorf("composite events %.60s: the refused answer was kept: %+v", tc.events, c)
		}
		var d DecoratorSyncResponse
		err = d.DecodeHookResponse([]byte(`{"attachments":[],"events":`+tc.events+`}`), v1alpha1.ResponseUnMarshallModeStrict)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("decorator events %.60s: err %v, want %q", tc.events, err, tc.want)
		}
	}
	// Exactly MaxEvents, and a null list, are fine.
	var c CompositeSyncResponse
	if err := c.DecodeHookResponse([]byte(`{"children":[],"events":[`+strings.Join(many[:MaxEvents], ",")+`]}`), v1alpha1.ResponseUnMarshallModeLoose); err != nil || len(c.Events) != MaxEvents {
		t.Errorf("%d events: err %v, got %d", MaxEvents, err, len(c.Events))
	}
	if err := c.DecodeHookResponse([]byte(`{"children":[],"events":null}`), v1alpha1.ResponseUnMarshallModeStrict); err != nil || c.Events != nil {
		t.Errorf("null events: err %v, got %v", err, c.Events)
	}
}

// TestLongEventMessageIsCut: a message over MaxEventMessageBytes is cut at
// a rune boundary and ends with "...".
func TestLongEventMessageIsCut(t *testing.T) {
	msg := strings.Repeat("é", MaxEventMessageBytes) // two bytes each
	events, err := CheckEvents(&[]any{map[string]any{"reason": "Long", "message": msg}})
	if err != nil {
		t.Fatal(err)
	}
	got := events[0].Message
	if len(got) > MaxEventMessageBytes || !strings.HasSuffix(got, "...") || !utf8.ValidString(got) || !strings.HasPrefix(msg, strings.TrimSuffix(got, "...")) {
		t.Errorf("cut message: %d bytes, valid %v, %q...", len(got), utf8.ValidString(got), got[len(got)-10:])
	}
	exact := strings.Repeat("a", MaxEventMessageBytes)
	if events, _ := CheckEvents(&[]any{map[string]any{"reason": "Exact", "message": exact}}); events[0].Message != exact {
		t.Error("a message of exactly the limit was cut")
	}
}
