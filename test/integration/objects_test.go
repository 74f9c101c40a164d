package integration

import (
	"context"
	"errors"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/metactl/metactl/pkg/dynamic/informer"
	"github.com/metactl/metactl/pkg/dynamic/objectclient"
)

// TestRESTClientWritesAndDecodesAsTheDynamicClient creates and updates a
// ConfigMap through objectclient.Client and checks its answers against what
// client-go's dynamic client reads, and that server errors keep their type.
func TestRESTClientWritesAndDecodesAsTheDynamicClient(t *testing.T) {
	ctx := context.Background()
	c := objectClient(t)

	name := "objects-" + rand.String(6)
	body := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","labels":{"a":"b"}},"data":{"k":"v1"}}`)

	created, err := c.Create(ctx, configMaps, "default", body)
	if err != nil {
		t.Fatal(err)
	}
	if created.Name != name || created.UID == "" || created.ResourceVersion == "" || created.ManagedFields != nil {
		t.Errorf("created metadata = %+v", created.ObjectMeta)
	}
	assertSameAsServer := func(o *informer.Object) {
		t.Helper()
		got, err := o.Unstructured()
		if err != nil {
			t.Fatal(err)
		}
		want, err := env.Dynamic.Resource(configMaps).Namespace("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want.SetManagedFields(nil)
		if !reflect.DeepEqual(got.Object, want.Object) {
			t.Errorf("decoded\n%v\nthe server has\n%v", got.Object, want.Object)
		}
	}
	assertSameAsServer(created)

	if _, err := c.Create(ctx, configMaps, "default", body); !apierrors.IsAlreadyExists(err) {
		t.Errorf("creating it again: %v, want AlreadyExists", err)
	}

	update := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","resourceVersion":"` + created.ResourceVersion + `"},"data":{"k":"v2"}}`)
	updated, err := c.Update(ctx, configMaps, "default", name, update)
	if err != nil {
		t.Fatal(err)
	}
	if updated.ResourceVersion == created.ResourceVersion {
		t.Error("update kept the resourceVersion")
	}
	assertSameAsServer(updated)
	if _, err := c.Update(ctx, configMaps, "default", name, update); !apierrors.IsConflict(err) {
		t.Errorf("updating from a stale resourceVersion: %v, want Conflict", err)
	}
	patched, err := c.Patch(ctx, configMaps, "default", name, types.MergePatchType, []byte(`{"data":{"k":"v3"}}`))
	if err != nil {
		t.Fatal(err)
	}
	assertSameAsServer(patched)
	test := []byte(`[{"op":"test","path":"/metadata/uid","value":"not-its-uid"}]`)
	if _, err := c.Patch(ctx, configMaps, "default", name, types.JSONPatchType, test); !apierrors.IsInvalid(err) {
		t.Errorf("a JSON patch whose test fails: %v, want Invalid", err)
	}
	// The server's message and causes reach the caller.
	invalid := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Not_A_Name"}}`)
	_, err = c.Create(ctx, configMaps, "default", invalid)
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil || len(status.Status().Details.Causes) == 0 {
		t.Errorf("creating an invalid name: %v, want Invalid with causes", err)
	}
	if _, err := c.Update(ctx, configMaps, "default", "absent-"+name, update); !apierrors.IsBadRequest(err) && !apierrors.IsNotFound(err) {
		t.Errorf("updating another name: %v, want BadRequest or NotFound", err)
	}
}

// configMaps is the resource the objectclient tests write.
var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// objectClient is an objectclient.Client of the test control plane.
func objectClient(t *testing.T) *objectclient.Client {
	t.Helper()
	c, err := objectclient.New(env.Config, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
