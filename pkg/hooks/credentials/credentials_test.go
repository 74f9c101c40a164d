/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package credentials

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

func apierrorsForbidden(resource, name string) error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: resource}, name, errors.New("RBAC says no"))
}

func TestWatchingCredentialSourceWatchesOnlyTheObject(t *testing.T) {
	cs, src := newSource(t,
		secretObj("ns", "wanted", map[string]string{"token": "a"}),
		secretObj("ns", "other", map[string]string{"token": "b"}),
		configMapObj("ns", "wanted", map[string]string{"ca.crt": "c"}),
	)
	ctx := context.Background()
	for range 3 {
		s, err := src.Secret(ctx, "ns", "wanted")
		if err != nil {
			t.Fatal(err)
		}
		if string(s.Data["token"]) != "a" {
			t.Fatalf("Secret data %q", s.Data["token"])
		}
	}
	cm, err := src.ConfigMap(ctx, "ns", "wanted")
	if err != nil || cm.Data["ca.crt"] != "c" {
		t.Fatalf("ConfigMap: %v, %v", cm, err)
	}
	if _, err := src.Secret(ctx, "ns", "absent"); !apierrors.IsNotFound(err) {
		t.Errorf("absent Secret: err = %v, want NotFound", err)
	}
	if _, err := src.ConfigMap(ctx, "elsewhere", "wanted"); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap of another namespace: err = %v, want NotFound", err)
	}

	lists := map[string]int{}
	for _, a := range cs.Actions() {
		var fieldSel string
		switch a := a.(type) {
		case k8stesting.ListAction:
			fieldSel = a.GetListRestrictions().Fields.String()
		case k8stesting.WatchAction:
			fieldSel = a.GetWatchRestrictions().Fields.String()
		default:
			t.Errorf("unexpected %s of %s", a.GetVerb(), a.GetResource().Resource)
			continue
		}
		if a.GetNamespace() == "" || fieldSel == "" {
			t.Errorf("%s of %s in namespace %q with field selector %q: want one object", a.GetVerb(), a.GetResource().Resource, a.GetNamespace(), fieldSel)
		}
		if a.GetVerb() == "list" {
			lists[a.GetNamespace()+"/"+a.GetResource().Resource+"?"+fieldSel]++
		}
	}
	want := map[string]int{
		"ns/secrets?metadata.name=wanted":           1,
		"ns/secrets?metadata.name=absent":           1,
		"ns/configmaps?metadata.name=wanted":        1,
		"elsewhere/configmaps?metadata.name=wanted": 1,
	}
	for k, n := range want {
		if lists[k] != n {
			t.Errorf("lists %v, want %v", lists, want)
			break
		}
	}
	if n := src.Watching(); n != 4 {
		t.Errorf("watching %d objects, want 4", n)
	}

	src.Stop()
	if _, err := src.Secret(ctx, "ns", "wanted"); !errors.Is(err, ErrCredentialSourceStopped) {
		t.Errorf("after Stop: err = %v", err)
	}
	src.Stop() // twice is fine
}

func TestWatchingCredentialSourceWaitIsBoundedByContext(t *testing.T) {
	cs, src := newSource(t)
	// A list that never answers: the watch never syncs.
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	cs.PrependReactor("list", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-block
		return true, &corev1.SecretList{}, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := src.Secret(ctx, "ns", "slow")
	if !errors.Is(err, context.DeadlineExceeded) || apierrors.IsNotFound(err) {
		t.Fatalf("err = %v, want the context's deadline", err)
	}
}

func TestWatchingCredentialSourceIdleWatchesStop(t *testing.T) {
	_, src := newSource(t, secretObj("ns", "a", nil), secretObj("ns", "b", nil))
	var now atomic.Pointer[time.Time]
	t0 := time.Unix(1_000_000, 0)
	now.Store(&t0)
	src.now = func() time.Time { return *now.Load() }
	src.idleTimeout = time.Hour
	ctx := context.Background()
	if _, err := src.Secret(ctx, "ns", "a"); err != nil {
		t.Fatal(err)
	}
	t1 := t0.Add(40 * time.Minute)
	now.Store(&t1)
	if _, err := src.Secret(ctx, "ns", "b"); err != nil {
		t.Fatal(err)
	}
	t2 := t0.Add(70 * time.Minute) // a is idle, b is not
	now.Store(&t2)
	if _, err := src.Secret(ctx, "ns", "b"); err != nil {
		t.Fatal(err)
	}
	if n := src.Watching(); n != 1 {
		t.Errorf("watching %d objects after the idle timeout, want 1", n)
	}
	// Asking again watches again.
	if _, err := src.Secret(ctx, "ns", "a"); err != nil {
		t.Fatal(err)
	}
	if n := src.Watching(); n != 2 {
		t.Errorf("watching %d objects, want 2", n)
	}
}

func TestWatchingCredentialSourceRun(t *testing.T) {
	_, src := newSource(t, secretObj("ns", "a", nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		src.Run(ctx)
		close(done)
	}()
	if _, err := src.Secret(context.Background(), "ns", "a"); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if _, err := src.Secret(context.Background(), "ns", "a"); !errors.Is(err, ErrCredentialSourceStopped) {
		t.Errorf("after Run: err = %v", err)
	}
}

func TestTokenRotation(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = io.WriteString(w, `{}`)
	})
	lastSeen := func() string {
		mu.Lock()
		defer mu.Unlock()
		return seen[len(seen)-1]
	}
	cs, src := newSource(t, secretObj("ns", "token", map[string]string{"token": "one"}))
	changes := make(chan string, 10)
	src.OnChange(func(namespace, name string) { changes <- namespace + "/" + name })
	c, _ := secureClient(t, src)
	hook := hookWith(srv.URL, func(w *v1alpha1.Webhook) {
		w.Authorization = &v1alpha1.AuthorizationConfig{Type: v1alpha1.AuthorizationBearer, SecretRef: v1alpha1.KeyReference{Namespace: "ns", Name: "token"}}
	})
	if err := call(c, hook); err != nil {
		t.Fatal(err)
	}
	if got := lastSeen(); got != "Bearer one" {
		t.Fatalf("first call sent %q", got)
	}
	waitWatching(t, cs, "secrets", "ns", "token")

	// A change of metadata only is not reported.
	s := secretObj("ns", "token", map[string]string{"token": "one"})
	s.Labels = map[string]string{"touched": "yes"}
	if _, err := cs.CoreV1().Secrets("ns").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets("ns").Update(context.Background(), secretObj("ns", "token", map[string]string{"token": "two"}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the rotated token to be sent", func() bool {
		if err := call(c, hook); err != nil {
			t.Fatal(err)
		}
		return lastSeen() == "Bearer two"
	})
	select {
	case got := <-changes:
		if got != "ns/token" {
			t.Errorf("OnChange got %s", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OnChange not called for the rotation")
	}
	select {
	case got := <-changes:
		t.Errorf("OnChange called again (%s), for a change of metadata only", got)
	default:
	}

	// Deleted: the next call fails with a CredentialError, and recovers
	// once the Secret is back.
	if err := cs.CoreV1().Secrets("ns").Delete(context.Background(), "token", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the deleted Secret to be reported", func() bool {
		return IsCredentialError(call(c, hook))
	})
	if _, err := cs.CoreV1().Secrets("ns").Create(context.Background(), secretObj("ns", "token", map[string]string{"token": "three"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the recreated Secret to be used", func() bool {
		return call(c, hook) == nil && lastSeen() == "Bearer three"
	})
}

func TestCARotation(t *testing.T) {
	oldCA := newTestCA(t, "old CA")
	newCA := newTestCA(t, "new CA")
	_, _, oldCert := oldCA.issue(t, "hook server", false)
	_, _, newCert := newCA.issue(t, "hook server", false)
	var serving atomic.Pointer[tls.Certificate]
	serving.Store(&oldCert)
	srv := tlsServer(t, oldCert, answer(`{}`), func(c *tls.Config) {
		c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return &tls.Config{Certificates: []tls.Certificate{*serving.Load()}}, nil
		}
	})

	cs, src := newSource(t, configMapObj("ns", "ca", map[string]string{"ca.crt": string(oldCA.pem)}))
	c, st := secureClient(t, src)
	hook := hookWith(srv.URL, func(w *v1alpha1.Webhook) {
		w.CABundle = &v1alpha1.CABundleConfig{ConfigMapRef: &v1alpha1.KeyReference{Namespace: "ns", Name: "ca"}}
	})
	if err := call(c, hook); err != nil {
		t.Fatal(err)
	}
	oldClient, err := st.TransportFor(hook)
	if err != nil {
		t.Fatal(err)
	}
	waitWatching(t, cs, "configmaps", "ns", "ca")

	// The server moves to the new CA: new connections fail until the
	// bundle is rotated too.
	serving.Store(&newCert)
	st.CloseIdleConnections()
	if err := call(c, hook); !isCertError(err) {
		t.Fatalf("server on the new CA, bundle not rotated: err = %v", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("ns").Update(context.Background(), configMapObj("ns", "ca", map[string]string{"ca.crt": string(newCA.pem)}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the rotated CA to be trusted", func() bool {
		return call(c, hook) == nil
	})
	newClient, err := st.TransportFor(hook)
	if err != nil {
		t.Fatal(err)
	}
	if newClient == oldClient {
		t.Error("a rotated CA should give a new HTTP client")
	}
	if n := st.clientCount(); n != 1 {
		t.Errorf("%d HTTP clients kept after the rotation, want 1 (the old one released)", n)
	}
}
