package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

// TestUnsettledReportsOncePerObjectUntilSettled: the Event is recorded on
// an object's first unsettled sync, not on the retries after it, and again
// after the object has settled in between.
func TestUnsettledReportsOncePerObjectUntilSettled(t *testing.T) {
	recorder := record.NewFakeRecorder(10)
	u := &Unsettled{Controller: "c", Kind: "compositecontroller", Recorder: recorder}
	a := &corev1.ConfigMap{}
	u.Report(a, "ns/a")
	u.Report(a, "ns/a")
	u.Report(a, "ns/b")
	u.Settled("ns/a")
	u.Report(a, "ns/a")
	if got := len(recorder.Events); got != 3 {
		t.Errorf("Events = %d, want 3 (a, b, a after settling)", got)
	}
}
