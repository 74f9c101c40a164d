package finalizer

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
