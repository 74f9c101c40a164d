package engine

import (
	"testing"
	"time"

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
	u.Report(a, keyOf("ns/a"))
	u.Report(a, keyOf("ns/a"))
	u.Report(a, keyOf("ns/b"))
	u.Settled(keyOf("ns/a"))
	u.Report(a, keyOf("ns/a"))
	if got := len(recorder.Events); got != 3 {
		t.Errorf("Events = %d, want 3 (a, b, a after settling)", got)
	}
}

// TestFinish: a settled sync returns the answer's resync delay; an
// unsettled one returns errNotSettled and still asks for the answer's
// resync.
func TestFinish(t *testing.T) {
	u := &Unsettled{Controller: "c", Kind: "compositecontroller", Recorder: record.NewFakeRecorder(10)}
	var asked []time.Duration
	addAfter := func(_ Key, d time.Duration) { asked = append(asked, d) }
	if d, err := u.finish(&corev1.ConfigMap{}, keyOf("ns/a"), true, 1500*time.Millisecond, addAfter); err != nil || d != 1500*time.Millisecond || len(asked) != 0 {
		t.Errorf("settled: (%v, %v), asked %v; want (1.5s, nil), nothing asked", d, err, asked)
	}
	if d, err := u.finish(&corev1.ConfigMap{}, keyOf("ns/a"), false, 2*time.Second, addAfter); !IsNotSettled(err) || d != 0 || len(asked) != 1 || asked[0] != 2*time.Second {
		t.Errorf("unsettled: (%v, %v), asked %v; want (0, errNotSettled), 2s asked", d, err, asked)
	}
}
