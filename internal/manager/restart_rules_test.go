package manager

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/rbac"
)

// TestChangedAnnotationRestarts: which annotation changes of a controller
// object restart its controller (changedAnnotation against the values it
// was built with): a change, addition or removal of the service-account,
// synced-condition, record or apply-strategy annotation, named in the
// Stopped Event; not a change of any other annotation. Fast twin of the
// Stopped Events the integration tests TestApplyStrategyAnnotation,
// TestSyncedConditionAnnotationAndOption and TestRecordAnnotation wait
// for.
func TestChangedAnnotationRestarts(t *testing.T) {
	obj := func(annotations map[string]string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{}
		o.SetAnnotations(annotations)
		return o
	}
	built := restartValues(obj(map[string]string{engine.RecordAnnotation: "true", "unrelated": "a"}))
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        string
	}{
		{"unchanged", map[string]string{engine.RecordAnnotation: "true", "unrelated": "a"}, ""},
		{"another annotation changed", map[string]string{engine.RecordAnnotation: "true", "unrelated": "b"}, ""},
		{"record removed", nil, engine.RecordAnnotation},
		{"record changed", map[string]string{engine.RecordAnnotation: "false"}, engine.RecordAnnotation},
		{"synced condition added", map[string]string{engine.RecordAnnotation: "true", engine.SyncedConditionAnnotation: "true"}, engine.SyncedConditionAnnotation},
		{"apply strategy added", map[string]string{engine.RecordAnnotation: "true", engine.ApplyStrategyAnnotation: "ServerSide"}, engine.ApplyStrategyAnnotation},
		{"account added", map[string]string{engine.RecordAnnotation: "true", rbac.ServiceAccountAnnotation: "ns/sa"}, rbac.ServiceAccountAnnotation},
	} {
		if got := changedAnnotation(built, obj(tc.annotations)); got != tc.want {
			t.Errorf("%s: changedAnnotation = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestStartRetryDelayDoubles: a controller whose start-up failed waits
// 500ms before the next, doubling with each failure in a row, at most
// Options.MaxRetryDelay (loop's default when unset). The integration test
// TestStuckStartDoesNotHoldOthers only sees StartFailed controllers
// started again.
func TestStartRetryDelayDoubles(t *testing.T) {
	m := &Manager{opts: Options{MaxRetryDelay: 3 * time.Second}}
	for count, want := range map[int]time.Duration{1: 500 * time.Millisecond, 2: time.Second, 3: 2 * time.Second, 4: 3 * time.Second, 20: 3 * time.Second} {
		if got := m.startRetryDelay(count); got != want {
			t.Errorf("after %d failures: %v, want %v", count, got, want)
		}
	}
	unset := &Manager{}
	if got, want := unset.startRetryDelay(100), unset.startRetryDelay(99); got != want || got <= 3*time.Second {
		t.Errorf("the default cap: %v after 100 failures and %v after 99, want the same, above 3s", got, want)
	}
}

// TestStartBackoffIsPerVersion: the backoff after failed start-ups holds
// for the version of the controller object that failed (its UID,
// generation and account); a new generation, a new account or a
// recreated object may start at once, and the failures counted before are
// forgotten. The integration test TestStuckStartDoesNotHoldOthers sees
// only the failures.
func TestStartBackoffIsPerVersion(t *testing.T) {
	const key = "CompositeController/c"
	obj := func(uid types.UID, generation int64, account string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{}
		o.SetUID(uid)
		o.SetGeneration(generation)
		if account != "" {
			o.SetAnnotations(map[string]string{rbac.ServiceAccountAnnotation: account})
		}
		return o
	}
	for _, tc := range []struct {
		name string
		obj  *unstructured.Unstructured
		wait bool
	}{
		{"the version that failed", obj("u1", 1, "ns/sa"), true},
		{"a new generation", obj("u1", 2, "ns/sa"), false},
		{"another account", obj("u1", 1, "ns/other"), false},
		{"a recreated object", obj("u2", 1, "ns/sa"), false},
	} {
		m := &Manager{opts: Options{MaxRetryDelay: time.Hour}, startFailures: map[string]*startFailure{}}
		r := &runningController{uid: "u1", generation: 1, account: "ns/sa"}
		m.recordStartFailure(key, r)
		if _, count := m.recordStartFailure(key, r); count != 2 {
			t.Errorf("%s: %d failures in a row, want 2", tc.name, count)
		}
		if got := m.startBackoff(key, tc.obj); (got > 0) != tc.wait {
			t.Errorf("%s: startBackoff = %v, want waiting %v", tc.name, got, tc.wait)
		}
		if _, count := m.recordStartFailure(key, &runningController{uid: tc.obj.GetUID(), generation: tc.obj.GetGeneration(),
			account: tc.obj.GetAnnotations()[rbac.ServiceAccountAnnotation]}); tc.wait != (count == 3) {
			t.Errorf("%s: the next failure is number %d in a row", tc.name, count)
		}
	}
}

// TestHasFinalizeHook: only a controller object that declares a finalize
// hook gets CleanupFinalizer (hasFinalizeHook). The integration test TestDeletedCompositeControllerLeavesNoFinalizers
// checks that a CompositeController with a finalize hook carries it.
func TestHasFinalizeHook(t *testing.T) {
	for _, tc := range []struct {
		hooks map[string]any
		want  bool
	}{
		{map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": "https://h/sync"}}}, false},
		{map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": "https://h/sync"}},
			"finalize": map[string]any{"webhook": map[string]any{"url": "https://h/finalize"}}}, true},
		{nil, false},
	} {
		obj := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
		if tc.hooks != nil {
			obj.Object["spec"] = map[string]any{"hooks": tc.hooks}
		}
		if got := hasFinalizeHook(obj); got != tc.want {
			t.Errorf("hooks %v: hasFinalizeHook = %v, want %v", tc.hooks, got, tc.want)
		}
	}
}
