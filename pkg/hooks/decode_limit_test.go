/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hooks

import (
	"strings"
	"testing"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// objectsAnswer is an answer whose list key holds n copies of item, the
// rest of the answer (after the list) being tail.
func objectsAnswer(key string, n int, item, tail string) []byte {
	var b strings.Builder
	b.WriteString(`{"status":{"a":"x\"],[{"},"` + key + `":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(item)
	}
	b.WriteString("]" + tail)
	return []byte(b.String())
}

// TestDecodeStopsAtObjectLimit: an answer asking for more than
// v1alpha1.MaxAnswerObjects children or attachments is refused, naming the limit, as soon as the
// list is found too long: what follows is never looked at (here, invalid
// JSON), and none of its objects is decoded (a few allocations, not one
// per object).
func TestDecodeStopsAtObjectLimit(t *testing.T) {
	for _, tc := range []struct {
		key      string
		response func() Response
	}{
		{"children", func() Response { return &CompositeSyncResponse{} }},
		{"attachments", func() Response { return &DecoratorSyncResponse{} }},
	} {
		t.Run(tc.key, func(t *testing.T) {
			for _, mode := range bothModes {
				body := objectsAnswer(tc.key, v1alpha1.MaxAnswerObjects+1, childCM, `, this is not JSON`)
				err := tc.response().DecodeHookResponse(body, mode)
				if err == nil || !strings.Contains(err.Error(), "more than the limit of 10000 "+tc.key) {
					t.Fatalf("%s: err = %v, want the limit of 10000 %s", mode, err, tc.key)
				}
				allocs := testing.AllocsPerRun(3, func() { _ = tc.response().DecodeHookResponse(body, mode) })
				if allocs > 20 {
					t.Errorf("%s: refusing the answer took %.0f allocations: its objects were decoded", mode, allocs)
				}
			}
			// At the limit, the answer decodes.
			body := objectsAnswer(tc.key, v1alpha1.MaxAnswerObjects, childCM, `}`)
			if err := tc.response().DecodeHookResponse(body, strict); err != nil {
				t.Fatalf("at the limit: %v", err)
			}
		})
	}
}

// TestCheckListLength: the scan counts the elements of the named
// top-level list only, whatever the other values hold, and leaves
// malformed JSON to the decoder.
func TestCheckListLength(t *testing.T) {
	long := strings.Repeat(" ", 100)
	for _, tc := range []struct {
		name, body string
		refused    bool
	}{
		{"three", `{"children":[1,2,3]}`, true},
		{"two", `{"children":[1,2]}`, false},
		{"empty", `{"children":[]}`, false},
		{"null", `{"children":null}`, false},
		{"nested lists do not count", `{"children":[[1,2,3,4],{"a":[5,6]}]}`, false},
		{"strings with brackets and escapes", `{"children":["],\"[",{"x":"\\"},"a\\\\"]}`, true},
		{"another key", `{"status":{"children":[1,2,3]},"kids":[1,2,3,4]}`, false},
		{"escaped key", `{"childr\u0065n":[1,2,3]}`, true},
		{"any occurrence", `{"children":[1,2,3],"children":[]}`, true},
		{"key after others", `{"status":{"a":[1,2,3,4]},"x":"}","n":-1.5e3,"t":true,"children":[{},{},{}]}`, true},
		{"malformed", `{"children":[1 2 3 4]}`, false},
		{"truncated", `{"children":[1,2`, false},
		{"not an object", `[1,2,3,4]`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Padded: the scan skips bodies too short for maxItems+1
			// elements.
			err := checkListLength([]byte(tc.body+long), "children", 2)
			if (err != nil) != tc.refused {
				t.Errorf("checkListLength(%s) = %v, want refused %v", tc.body, err, tc.refused)
			}
		})
	}
}
