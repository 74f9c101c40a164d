/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hooks

import (
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// The seed corpus is in testdata/fuzz/<target>/. Run a target with e.g.
//
//	go test ./pkg/hooks -run '^$' -fuzz '^FuzzDecodeCompositeResponse$' -fuzztime 30s

func fuzzMode(strictMode bool) v1alpha1.ResponseUnMarshallMode {
	if strictMode {
		return v1alpha1.ResponseUnMarshallModeStrict
	}
	return v1alpha1.ResponseUnMarshallModeLoose
}

// checkObjects fails unless every object has what a hook must return.
func checkObjects(t *testing.T, what string, objs []*unstructured.Unstructured) {
	t.Helper()
	for i, o := range objs {
		if o == nil || o.Object == nil {
			t.Fatalf("%s[%d] is nil", what, i)
		}
		if o.GetAPIVersion() == "" || o.GetKind() == "" || o.GetName() == "" {
			t.Fatalf("%s[%d] accepted without apiVersion, kind or name: %v", what, i, o.Object)
		}
	}
}

// checkDecode runs the properties every response type must have: success
// implies a well-formed result (check), a failure leaves the receiver
// zero, whatever strict mode accepts loose mode accepts identically, and a
// decoded response encodes to a body that decodes again.
func checkDecode[T any, P interface {
	*T
	Response
}](t *testing.T, data []byte, mode v1alpha1.ResponseUnMarshallMode, check func(*T)) {
	var r T
	if err := P(&r).DecodeHookResponse(data, mode); err != nil {
		if !reflect.ValueOf(r).IsZero() {
			t.Fatalf("error %v, but the response was not reset: %+v", err, r)
		}
		return
	}
	check(&r)
	if mode == v1alpha1.ResponseUnMarshallModeStrict {
		var l T
		if err := P(&l).DecodeHookResponse(data, v1alpha1.ResponseUnMarshallModeLoose); err != nil {
			t.Fatalf("strict accepts, loose refuses: %v", err)
		}
		if !reflect.DeepEqual(r, l) {
			t.Fatalf("strict and loose disagree:\n%+v\n%+v", r, l)
		}
	}
	again, err := json.Marshal(&r)
	if err != nil {
		t.Fatalf("re-encoding: %v", err)
	}
	var r2 T
	if err := P(&r2).DecodeHookResponse(again, mode); err != nil {
		t.Fatalf("re-encoded response %s does not decode: %v", again, err)
	}
	check(&r2)
}

func FuzzDecodeCompositeResponse(f *testing.F) {
	f.Add([]byte(`{"status":{"a":1},"children":[`+childCM+`],"resyncAfterSeconds":1,"finalized":true}`), true)
	f.Add([]byte(`{"status":null,"children":null}`), false)
	f.Fuzz(func(t *testing.T, data []byte, strictMode bool) {
		checkDecode(t, data, fuzzMode(strictMode), func(r *CompositeSyncResponse) {
			if r.Status == nil {
				t.Fatal("nil status after a successful decode")
			}
			checkObjects(t, "children", r.Children)
		})
	})
}

func FuzzDecodeDecoratorResponse(f *testing.F) {
	f.Add([]byte(`{"labels":{"a":"b","c":null},"annotations":{},"status":{},"attachments":[`+childCM+`]}`), true)
	f.Add([]byte(`{"status":null}`), false)
	f.Fuzz(func(t *testing.T, data []byte, strictMode bool) {
		checkDecode(t, data, fuzzMode(strictMode), func(r *DecoratorSyncResponse) {
			checkObjects(t, "attachments", r.Attachments)
		})
	})
}

func FuzzDecodeCustomizeResponse(f *testing.F) {
	f.Add([]byte(`{"relatedResources":[{"apiVersion":"v1","resource":"configmaps","labelSelector":{"matchLabels":{"a":"b"}}}]}`), true)
	f.Add([]byte(`{"relatedResources":[{"apiVersion":"v1","resource":"secrets","names":["a"],"namespace":"ns"}]}`), false)
	f.Fuzz(func(t *testing.T, data []byte, strictMode bool) {
		checkDecode(t, data, fuzzMode(strictMode), func(r *CustomizeResponse) {
			for i := range r.RelatedResources {
				if errs := v1alpha1.ValidateRelatedResourceRule(&r.RelatedResources[i], field.NewPath("relatedResources").Index(i)); len(errs) > 0 {
					t.Fatalf("invalid rule accepted: %v", errs)
				}
			}
		})
	})
}
