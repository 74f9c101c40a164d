package manager

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestSpamKeyByReason(t *testing.T) {
	e := func(reason string) *corev1.Event {
		return &corev1.Event{Type: corev1.EventTypeWarning, Reason: reason,
			InvolvedObject: corev1.ObjectReference{Kind: "Thing", Namespace: "ns", Name: "a", UID: "u"}}
	}
	if spamKeyByReason(e("SyncError")) == spamKeyByReason(e("ChildWriteWarning")) {
		t.Error("two reasons of one object share a spam budget")
	}
	if first, second := spamKeyByReason(e("SyncError")), spamKeyByReason(e("SyncError")); first != second {
		t.Error("one reason of one object does not share its spam budget")
	}
}
