package decorator

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/inmemory"
	"github.com/metactl/metactl/internal/ruletest"
	"github.com/metactl/metactl/pkg/hooks"
)

// TestDesiredAttachments: the check of a sync hook's attachments, as a
// sync makes it (Offline, then Desired), for a DecoratorController of
// configmaps and clusterthings with attachment resources secrets and
// clusterthings: an attachment gets the object's namespace, its
// controller reference and this decorator's annotation; namespaces,
// scopes, kinds and duplicates refuse the whole answer.
func TestDesiredAttachments(t *testing.T) {
	c := ruleDecorator(t, []any{
		map[string]any{"apiVersion": "v1", "resource": "configmaps"},
		map[string]any{"apiVersion": "test.metactl.io/v1", "resource": "clusterthings"},
	}, []any{
		map[string]any{"apiVersion": "v1", "resource": "secrets"},
		map[string]any{"apiVersion": "test.metactl.io/v1", "resource": "clusterthings"},
	})
	cm := inmemory.Object("v1", "ConfigMap", "ns", "decorated", nil, nil)
	cluster := inmemory.Object("test.metactl.io/v1", "ClusterThing", "", "decorated", nil, nil)
	secret := func(namespace, name string) *unstructured.Unstructured {
		return inmemory.Object("v1", "Secret", namespace, name, nil, nil)
	}
	clusterThing := func(name string) *unstructured.Unstructured {
		return inmemory.Object("test.metactl.io/v1", "ClusterThing", "", name, nil, nil)
	}
	for _, tc := range []struct {
		name        string
		obj         *unstructured.Unstructured
		attachments []*unstructured.Unstructured
		// want are the desired attachments as "Kind key", sorted; err,
		// when set, is in the refusal.
		want []string
		err  string
	}{
		{name: "an attachment gets the object's namespace", obj: cm, attachments: []*unstructured.Unstructured{secret("", "s")},
			want: []string{"Secret ns/s"}},
		{name: "attachments of a cluster-scoped object, in any namespace or none", obj: cluster,
			attachments: []*unstructured.Unstructured{secret("a", "s"), secret("b", "s"), clusterThing("c")},
			want:        []string{"ClusterThing c", "Secret a/s", "Secret b/s"}},
		{name: "another namespace", obj: cm, attachments: []*unstructured.Unstructured{secret("other", "s")},
			err: "differs from the owner's namespace"},
		{name: "a cluster-scoped attachment of a namespaced object", obj: cm, attachments: []*unstructured.Unstructured{secret("", "s"), clusterThing("c")},
			err: "cannot be owned by a namespaced object"},
		{name: "no namespace under a cluster-scoped object", obj: cluster, attachments: []*unstructured.Unstructured{secret("", "s")},
			err: "needs metadata.namespace"},
		{name: "a kind that is not an attachment resource", obj: cm, attachments: []*unstructured.Unstructured{inmemory.Object("v1", "Service", "", "svc", nil, nil)},
			err: "not a declared resource"},
		{name: "a duplicate", obj: cm, attachments: []*unstructured.Unstructured{secret("", "s"), secret("ns", "s")},
			err: "duplicate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sync, err := c.Offline(tc.obj)
			if err != nil {
				t.Fatalf("Offline: %v", err)
			}
			var got []string
			for key, a := range ruletest.Desired(t, sync, &hooks.DecoratorSyncResponse{Attachments: tc.attachments}, tc.err) {
				got = append(got, key)
				if ref := metav1.GetControllerOf(a); ref == nil || ref.UID != tc.obj.GetUID() || ref.Kind != tc.obj.GetKind() {
					t.Errorf("%s has controller %v, want the decorated object", key, ref)
				}
				if !c.isAttachment(a) {
					t.Errorf("%s has annotations %v, without %s=rules", key, a.GetAnnotations(), AttachmentAnnotation)
				}
			}
			if tc.err != "" {
				return
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("desired %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := c.Offline(inmemory.Object("v1", "Secret", "ns", "s", nil, nil)); err == nil || !strings.Contains(err.Error(), "not one of the decorated resources") {
		t.Errorf("Offline of a Secret: %v, want an error saying it is not decorated", err)
	}
}

// TestAttachmentEventsEnqueueTheirObject: which decorated objects an
// event of an attachment queues (ownerKeys, by its controller reference):
// the object of the reference's group and kind, in the attachment's
// namespace (none for a cluster-scoped object), and only for this
// decorator's attachments.
func TestAttachmentEventsEnqueueTheirObject(t *testing.T) {
	c := ruleDecorator(t, []any{
		map[string]any{"apiVersion": "v1", "resource": "configmaps"},
		map[string]any{"apiVersion": "test.metactl.io/v1", "resource": "clusterthings"},
	}, []any{map[string]any{"apiVersion": "v1", "resource": "secrets"}})
	ours := map[string]string{AttachmentAnnotation: "rules"}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		ref         metav1.OwnerReference
		want        []string
	}{
		{"of a ConfigMap", ours, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "a"},
			[]string{"0|ns/a"}},
		{"of a cluster-scoped object, whatever the attachment's namespace", ours, metav1.OwnerReference{APIVersion: "test.metactl.io/v2", Kind: "ClusterThing", Name: "a"},
			[]string{"1|a"}},
		{"another decorator's", map[string]string{AttachmentAnnotation: "other"}, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "a"}, nil},
		{"without the annotation", nil, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "a"}, nil},
		{"a kind not decorated", ours, metav1.OwnerReference{APIVersion: "v1", Kind: "Service", Name: "a"}, nil},
		{"the kind in another group", ours, metav1.OwnerReference{APIVersion: "other.io/v1", Kind: "ConfigMap", Name: "a"}, nil},
		{"an unreadable apiVersion", ours, metav1.OwnerReference{APIVersion: "a/b/c", Kind: "ConfigMap", Name: "a"}, nil},
	} {
		attachment := inmemory.Object("v1", "Secret", "ns", "s", nil, tc.annotations)
		var got []string
		for _, key := range c.ownerKeys(attachment, &tc.ref) {
			got = append(got, key.String())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: keys %q, want %q", tc.name, got, tc.want)
		}
	}
}
