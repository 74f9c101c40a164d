package apply

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// benchConfigMap returns a ConfigMap with 20 data keys of about 100 bytes,
// as the API server returns it, and a desired state for it.
func benchConfigMap(b *testing.B) (observed, desired *unstructured.Unstructured) {
	var data []string
	for i := range 20 {
		data = append(data, fmt.Sprintf(`"key-%02d": %q`, i, strings.Repeat("v", 100)))
	}
	desiredJSON := `{"apiVersion":"v1","kind":"ConfigMap",
		"metadata":{"name":"app-config","namespace":"prod","labels":{"app":"web","tier":"frontend"}},
		"data":{` + strings.Join(data, ",") + `}}`
	observedJSON := `{"apiVersion":"v1","kind":"ConfigMap",
		"metadata":{"name":"app-config","namespace":"prod","uid":"8c0c9f7e-3b59-4b4e-9d5b-4f3a7f1d2c11",
			"resourceVersion":"123456","creationTimestamp":"2024-05-01T10:00:00Z",
			"labels":{"app":"web","tier":"frontend"},
			"ownerReferences":[{"apiVersion":"example.com/v1","kind":"App","name":"web","uid":"1","controller":true,"blockOwnerDeletion":true}],
			"managedFields":[{"manager":"metactl","operation":"Update","apiVersion":"v1","time":"2024-05-01T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{}}}]},
		"data":{` + strings.Join(data, ",") + `}}`
	return object(b, observedJSON), object(b, desiredJSON)
}

// benchDeployment returns a two-container Deployment as the API server
// returns it (defaults, managedFields, status), and a desired state for it.
func benchDeployment(b *testing.B) (observed, desired *unstructured.Unstructured) {
	desiredJSON := `{"apiVersion":"apps/v1","kind":"Deployment",
	"metadata":{"name":"web","namespace":"prod","labels":{"app":"web"},"annotations":{"owner":"team-a"}},
	"spec":{"replicas":3,"selector":{"matchLabels":{"app":"web"}},
	 "template":{"metadata":{"labels":{"app":"web","version":"v2"}},
	  "spec":{"serviceAccountName":"web",
	   "containers":[
	    {"name":"app","image":"registry.example.com/web:2.3.1","args":["--port=8080","--log-level=info"],
	     "ports":[{"name":"http","containerPort":8080},{"name":"metrics","containerPort":9090}],
	     "env":[{"name":"MODE","value":"prod"},{"name":"DB_HOST","value":"db.prod"},{"name":"DB_PORT","value":"5432"},
	      {"name":"POD_NAME","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}},
	      {"name":"PASSWORD","valueFrom":{"secretKeyRef":{"name":"db","key":"password"}}}],
	     "resources":{"requests":{"cpu":"100m","memory":"128Mi"},"limits":{"memory":"256Mi"}},
	     "readinessProbe":{"httpGet":{"path":"/ready","port":8080}},
	     "volumeMounts":[{"name":"config","mountPath":"/etc/web"},{"name":"cache","mountPath":"/cache"}]},
	    {"name":"proxy","image":"envoyproxy/envoy:v1.30.0","ports":[{"containerPort":15001}]}],
	   "volumes":[{"name":"config","configMap":{"name":"web-config"}},{"name":"cache","emptyDir":{}}]}}}}`
	observedJSON := `{"apiVersion":"apps/v1","kind":"Deployment",
	"metadata":{"name":"web","namespace":"prod","uid":"0d3c9a1e-1b2c-4d5e-8f90-a1b2c3d4e5f6","resourceVersion":"987654",
	 "generation":7,"creationTimestamp":"2024-05-01T10:00:00Z","labels":{"app":"web"},
	 "annotations":{"owner":"team-a","deployment.kubernetes.io/revision":"7"},
	 "ownerReferences":[{"apiVersion":"example.com/v1","kind":"App","name":"web","uid":"1","controller":true,"blockOwnerDeletion":true}],
	 "managedFields":[{"manager":"metactl","operation":"Update","apiVersion":"apps/v1","time":"2024-05-01T10:00:00Z","fieldsType":"FieldsV1",
	   "fieldsV1":{"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{}}}}}}}},
	  {"manager":"kube-controller-manager","operation":"Update","apiVersion":"apps/v1","time":"2024-05-02T10:00:00Z","fieldsType":"FieldsV1",
	   "fieldsV1":{"f:status":{"f:replicas":{},"f:readyReplicas":{}}},"subresource":"status"}]},
	"spec":{"replicas":3,"selector":{"matchLabels":{"app":"web"}},"progressDeadlineSeconds":600,"revisionHistoryLimit":10,
	 "strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":"25%","maxUnavailable":"25%"}},
	 "template":{"metadata":{"creationTimestamp":null,"labels":{"app":"web","version":"v2"}},
	  "spec":{"serviceAccountName":"web","serviceAccount":"web","restartPolicy":"Always","terminationGracePeriodSeconds":30,
	   "dnsPolicy":"ClusterFirst","schedulerName":"default-scheduler","securityContext":{},
	   "containers":[
	    {"name":"app","image":"registry.example.com/web:2.3.1","args":["--port=8080","--log-level=info"],
	     "ports":[{"name":"http","containerPort":8080,"protocol":"TCP"},{"name":"metrics","containerPort":9090,"protocol":"TCP"}],
	     "env":[{"name":"MODE","value":"prod"},{"name":"DB_HOST","value":"db.prod"},{"name":"DB_PORT","value":"5432"},
	      {"name":"POD_NAME","valueFrom":{"fieldRef":{"apiVersion":"v1","fieldPath":"metadata.name"}}},
	      {"name":"PASSWORD","valueFrom":{"secretKeyRef":{"name":"db","key":"password"}}}],
	     "resources":{"requests":{"cpu":"100m","memory":"128Mi"},"limits":{"memory":"256Mi"}},
	     "readinessProbe":{"httpGet":{"path":"/ready","port":8080,"scheme":"HTTP"},"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},
	     "volumeMounts":[{"name":"config","mountPath":"/etc/web"},{"name":"cache","mountPath":"/cache"}],
	     "terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"},
	    {"name":"proxy","image":"envoyproxy/envoy:v1.30.0","ports":[{"containerPort":15001,"protocol":"TCP"}],
	     "resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],
	   "volumes":[{"name":"config","configMap":{"name":"web-config","defaultMode":420}},{"name":"cache","emptyDir":{}}]}}},
	"status":{"observedGeneration":7,"replicas":3,"updatedReplicas":3,"readyReplicas":3,"availableReplicas":3,
	 "conditions":[{"type":"Available","status":"True","lastUpdateTime":"2024-05-02T10:00:00Z","lastTransitionTime":"2024-05-02T10:00:00Z","reason":"MinimumReplicasAvailable","message":"Deployment has minimum availability."},
	  {"type":"Progressing","status":"True","lastUpdateTime":"2024-05-02T10:00:00Z","lastTransitionTime":"2024-05-01T10:00:00Z","reason":"NewReplicaSetAvailable","message":"ReplicaSet \"web-7d9f\" has successfully progressed."}]}}`
	return object(b, observedJSON), object(b, desiredJSON)
}

// BenchmarkApply measures Apply in the steady state (observed already holds
// the desired state and its annotation: no change, the common case of a
// resync) and on a change (one field of desired differs).
func BenchmarkApply(b *testing.B) {
	for _, obj := range []struct {
		name   string
		make   func(*testing.B) (observed, desired *unstructured.Unstructured)
		change []string // path of a string field to change in desired
	}{
		{"ConfigMap", benchConfigMap, []string{"data", "key-07"}},
		{"Deployment", benchDeployment, []string{"metadata", "labels", "app"}},
	} {
		observed, desired := obj.make(b)
		steady, _, err := Apply(observed, desired)
		if err != nil {
			b.Fatal(err)
		}
		changed := desired.DeepCopy()
		if err := unstructured.SetNestedField(changed.Object, "changed", obj.change...); err != nil {
			b.Fatal(err)
		}
		for _, c := range []struct {
			name       string
			desired    *unstructured.Unstructured
			wantChange bool
		}{{"unchanged", desired, false}, {"changed", changed, true}} {
			b.Run(obj.name+"/"+c.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					_, ch, err := Apply(steady, c.desired)
					if err != nil || ch != c.wantChange {
						b.Fatalf("Apply: changed %v, err %v; want changed %v", ch, err, c.wantChange)
					}
				}
			})
		}
	}
}
