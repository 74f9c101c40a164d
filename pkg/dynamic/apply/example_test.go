package apply_test

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/pkg/dynamic/apply"
)

func ExampleApply() {
	// The Service as the API server returns it: defaults (clusterIP,
	// protocol) filled in, a label someone else added, a status.
	observed := &unstructured.Unstructured{}
	if err := observed.UnmarshalJSON([]byte(`{
		"apiVersion": "v1", "kind": "Service",
		"metadata": {"name": "web", "namespace": "default", "uid": "6f1c", "resourceVersion": "42",
			"labels": {"app": "web", "team": "blue"}},
		"spec": {"clusterIP": "10.0.0.7", "selector": {"app": "web"},
			"ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]},
		"status": {"loadBalancer": {}}
	}`)); err != nil {
		panic(err)
	}
	// What the sync hook wants now: another target port, a metrics port.
	desired := &unstructured.Unstructured{}
	if err := desired.UnmarshalJSON([]byte(`{
		"apiVersion": "v1", "kind": "Service",
		"metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
		"spec": {"selector": {"app": "web"},
			"ports": [{"name": "http", "port": 80, "targetPort": 9090}, {"name": "metrics", "port": 9100}]}
	}`)); err != nil {
		panic(err)
	}

	result, changed, err := apply.Apply(observed, desired)
	if err != nil {
		panic(err)
	}
	spec, _ := json.Marshal(result.Object["spec"])
	fmt.Println("changed:", changed)
	fmt.Println("labels:", result.GetLabels())
	fmt.Println("spec:", string(spec))
	fmt.Println("last applied:", result.GetAnnotations()[apply.LastAppliedAnnotation])

	// The next round, with the same desired state, has nothing to write.
	_, changed, err = apply.Apply(result, desired)
	if err != nil {
		panic(err)
	}
	fmt.Println("changed again:", changed)

	// Output:
	// changed: true
	// labels: map[app:web team:blue]
	// spec: {"clusterIP":"10.0.0.7","ports":[{"name":"http","port":80,"protocol":"TCP","targetPort":9090},{"name":"metrics","port":9100}],"selector":{"app":"web"}}
	// last applied: {"apiVersion":"v1","kind":"Service","metadata":{"labels":{"app":"web"},"name":"web","namespace":"default"},"spec":{"ports":[{"name":"http","port":80,"targetPort":9090},{"name":"metrics","port":9100}],"selector":{"app":"web"}}}
	// changed again: false
}
