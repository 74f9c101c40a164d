package objectclient

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metactl/metactl/pkg/dynamic/informer"
)

func TestObjectCodecDecodesStatus(t *testing.T) {
	data := []byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old","reason":"Expired","code":410}`)
	obj, _, err := objectCodec{}.Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	status, ok := obj.(*metav1.Status)
	if !ok || status.Code != 410 || status.Reason != metav1.StatusReasonExpired {
		t.Errorf("decoded %#v", obj)
	}
	// A custom resource of kind Status is an object like any other.
	custom := []byte(`{"kind":"Status","apiVersion":"example.com/v1","metadata":{"name":"s","resourceVersion":"3"},"spec":{}}`)
	if obj, _, err := (objectCodec{}).Decode(custom, nil, nil); err != nil {
		t.Error(err)
	} else if o, ok := obj.(*informer.Object); !ok || o.Name != "s" {
		t.Errorf("a custom resource of kind Status decoded as %#v", obj)
	}
}

func TestWatchEventCodec(t *testing.T) {
	data := []byte(`{"type":"MODIFIED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"9"},"data":{"type":"x"}}}`)
	var event metav1.WatchEvent
	got, _, err := watchEventCodec{}.Decode(data, nil, &event)
	if err != nil || got != &event {
		t.Fatalf("Decode = %v, %v", got, err)
	}
	if event.Type != "MODIFIED" {
		t.Errorf("type = %q", event.Type)
	}
	obj, _, err := objectCodec{}.Decode(event.Object.Raw, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o := obj.(*informer.Object); o.Name != "a" || o.ResourceVersion != "9" || o.Kind != "ConfigMap" {
		t.Errorf("object = %+v", o)
	}
	for _, bad := range []string{`{"type":"ADDED"}`, `{"type":"ADDED","object":`, `[]`} {
		if _, _, err := (watchEventCodec{}).Decode([]byte(bad), nil, &metav1.WatchEvent{}); err == nil {
			t.Errorf("Decode(%s) accepted it", bad)
		}
	}
}
