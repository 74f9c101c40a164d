package finalizer

import (
	"errors"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestHeldByGarbageCollector(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		deleting   bool
		finalizers []string
		want       bool
	}{
		{true, []string{metav1.FinalizerDeleteDependents}, true},
		{true, []string{"example.com/x", metav1.FinalizerOrphanDependents}, true},
		{true, []string{"example.com/x"}, false},
		{false, []string{metav1.FinalizerDeleteDependents}, false},
	} {
		obj := &metav1.ObjectMeta{Finalizers: tc.finalizers}
		if tc.deleting {
			obj.DeletionTimestamp = &now
		}
		if got := HeldByGarbageCollector(obj); got != tc.want {
			t.Errorf("deleting=%v finalizers=%v: %v, want %v", tc.deleting, tc.finalizers, got, tc.want)
		}
	}
}

func TestRemainingFindsEveryResource(t *testing.T) {
	a := &RemainingError{Resource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Finalizer: "f", Err: errors.New("forbidden")}
	b := &RemainingError{Resource: schema.GroupVersionResource{Group: "x.io", Version: "v1", Resource: "things"}, Finalizer: "f", Err: errors.New("unavailable")}
	got := Remaining(fmt.Errorf("cleanup: %w", errors.Join(a, errors.New("other"), b)))
	if len(got) != 2 || got[0] != a || got[1] != b {
		t.Errorf("Remaining found %v, want both", got)
	}
	if Remaining(nil) != nil || Remaining(errors.New("plain")) != nil {
		t.Error("Remaining found something in an error without any")
	}
}
