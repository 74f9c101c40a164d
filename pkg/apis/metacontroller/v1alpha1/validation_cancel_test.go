package v1alpha1

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestHookTimeoutMaximum: a webhook timeout up to MaxHookTimeout is
// accepted, a longer one is an invalid spec naming the field and the
// maximum.
func TestHookTimeoutMaximum(t *testing.T) {
	for _, d := range []time.Duration{MaxHookTimeout, MaxHookTimeout + time.Second} {
		cc := validComposite()
		cc.Spec.Hooks.Sync.Webhook.Timeout = &metav1.Duration{Duration: d}
		errs := ValidateCompositeController(cc)
		if d <= MaxHookTimeout {
			checkErrors(t, errs, "")
			continue
		}
		checkErrors(t, errs, "spec.hooks.sync.webhook.timeout")
		if msg := errs.ToAggregate().Error(); !strings.Contains(msg, "at most 5m0s") {
			t.Errorf("message %q does not give the maximum", msg)
		}
	}
}

// TestInvalidURLHidesCredentials: the error of an invalid webhook URL,
// which reaches the log, an Event and the Ready condition, shows neither
// its user information nor its query's values.
func TestInvalidURLHidesCredentials(t *testing.T) {
	for _, u := range []string{"ftp://user:hunter2@h/sync?token=hunter3", "http://user:hunter2@[::1/sync", "http://user:hunter2@/sync?token=hunter3"} {
		cc := validComposite()
		cc.Spec.Hooks.Sync.Webhook.URL = ptr.To(u)
		errs := ValidateCompositeController(cc)
		checkErrors(t, errs, "spec.hooks.sync.webhook.url")
		if msg := errs.ToAggregate().Error(); strings.Contains(msg, "hunter") {
			t.Errorf("%s: the message shows a credential: %s", u, msg)
		}
	}
}
