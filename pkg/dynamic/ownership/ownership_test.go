package ownership

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

var (
	parentGVK     = schema.GroupVersionKind{Group: "ctl.example.com", Version: "v1", Kind: "Thing"}
	configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

func configMap(name string, labelSet map[string]string, owner *metav1.OwnerReference) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("v1")
	obj.SetKind("ConfigMap")
	obj.SetNamespace("ns")
	obj.SetName(name)
	obj.SetUID(types.UID("uid-" + name))
	obj.SetResourceVersion("1")
	obj.SetLabels(labelSet)
	if owner != nil {
		obj.SetOwnerReferences([]metav1.OwnerReference{*owner})
	}
	return obj
}

func withUID(obj *unstructured.Unstructured, uid types.UID) *unstructured.Unstructured {
	obj.SetUID(uid)
	return obj
}

func parent() *unstructured.Unstructured {
	p := &unstructured.Unstructured{}
	p.SetGroupVersionKind(parentGVK)
	p.SetNamespace("ns")
	p.SetName("p")
	p.SetUID("parent-uid")
	return p
}

// claim runs a Claimer over candidates stored in a fake client and returns
// the names claimed, the patches made (by object name) and how often
// canAdopt ran.
func claim(t *testing.T, p *unstructured.Unstructured, canAdoptErr error, candidates ...*unstructured.Unstructured) (claimed []string, patched map[string]bool, checks int, err error) {
	t.Helper()
	objs := make([]runtime.Object, len(candidates))
	for i, c := range candidates {
		objs[i] = c.DeepCopy()
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{configMapsGVR: "ConfigMapList"}, objs...)
	patched = map[string]bool{}
	client.PrependReactor("patch", "configmaps", func(action k8stesting.Action) (bool, runtime.Object, error) {
		patched[action.(k8stesting.PatchAction).GetName()] = true
		return false, nil, nil
	})
	claimer := NewClaimer(p, parentGVK, labels.SelectorFromSet(labels.Set{"app": "p"}), func(context.Context) error {
		checks++
		return canAdoptErr
	})
	got, err := claimer.Claim(context.Background(), client.Resource(configMapsGVR), candidates)
	for _, obj := range got {
		claimed = append(claimed, obj.GetName())
	}
	return claimed, patched, checks, err
}

func TestClaim(t *testing.T) {
	p := parent()
	ours := ptr.To(ControllerRef(p, parentGVK))
	theirs := &metav1.OwnerReference{APIVersion: "v1", Kind: "Other", Name: "o", UID: "other-uid", Controller: ptr.To(true)}
	match := map[string]string{"app": "p"}
	noMatch := map[string]string{"app": "q"}

	cases := []struct {
		name        string
		candidate   *unstructured.Unstructured
		deleting    bool
		wantClaimed bool
		wantPatch   bool
		wantChecks  int
	}{
		{"owned and matching is kept", configMap("a", match, ours), false, true, false, 0},
		{"owned but not matching is released", configMap("a", noMatch, ours), false, false, true, 0},
		{"owned, not matching, parent deleting: kept", configMap("a", noMatch, ours), true, true, false, 0},
		{"matching orphan is adopted", configMap("a", match, nil), false, true, true, 1},
		{"orphan not matching is ignored", configMap("a", noMatch, nil), false, false, false, 0},
		{"orphan while the parent is deleting is ignored", configMap("a", match, nil), true, false, false, 0},
		{"another controller's child is never touched", configMap("a", match, theirs), false, false, false, 0},
		{"the parent itself, matching its own selector, is never adopted", withUID(configMap("a", match, nil), "parent-uid"), false, false, false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := parent()
			if tc.deleting {
				p.SetDeletionTimestamp(ptr.To(metav1.Now()))
			}
			claimed, patched, checks, err := claim(t, p, nil, tc.candidate)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(claimed) == 1; got != tc.wantClaimed {
				t.Errorf("claimed = %v, want claimed %v", claimed, tc.wantClaimed)
			}
			if patched["a"] != tc.wantPatch {
				t.Errorf("patched = %v, want %v", patched["a"], tc.wantPatch)
			}
			if checks != tc.wantChecks {
				t.Errorf("canAdopt ran %d times, want %d", checks, tc.wantChecks)
			}
		})
	}
}

func TestAdoptionChecksTheParentOnceAndStopsOnFailure(t *testing.T) {
	match := map[string]string{"app": "p"}
	claimed, _, checks, err := claim(t, parent(), nil, configMap("a", match, nil), configMap("b", match, nil))
	if err != nil || len(claimed) != 2 || checks != 1 {
		t.Fatalf("claimed %v with %d checks (err %v), want both with one check", claimed, checks, err)
	}

	replaced := errors.New("parent replaced")
	claimed, patched, checks, err := claim(t, parent(), replaced, configMap("a", match, nil), configMap("b", match, nil))
	if !errors.Is(err, replaced) {
		t.Errorf("err = %v, want it to wrap the canAdopt error", err)
	}
	if len(claimed) != 0 || len(patched) != 0 || checks != 1 {
		t.Errorf("claimed %v, patched %v, checks %d: want nothing adopted after one failed check", claimed, patched, checks)
	}
}

func TestAdoptedChildCarriesTheControllerRef(t *testing.T) {
	p := parent()
	orphan := configMap("a", map[string]string{"app": "p"}, nil)
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{configMapsGVR: "ConfigMapList"}, orphan.DeepCopy())
	claimed, err := NewClaimer(p, parentGVK, labels.Everything(), nil).Claim(context.Background(), client.Resource(configMapsGVR), []*unstructured.Unstructured{orphan})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("Claim = %v, %v", claimed, err)
	}
	stored, err := client.Resource(configMapsGVR).Namespace("ns").Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := metav1.GetControllerOf(stored)
	if ref == nil || ref.UID != p.GetUID() || ref.Kind != "Thing" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("stored controller ref = %+v", ref)
	}
	if ref := metav1.GetControllerOf(stored); ref == nil || ref.UID != p.GetUID() {
		t.Errorf("controller reference after adoption = %v, want the parent's", ref)
	}
}
