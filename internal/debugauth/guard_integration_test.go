//go:build integration

package debugauth_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/debugauth"
	"github.com/metactl/metactl/internal/explain"
	"github.com/metactl/metactl/internal/hookrecord"
	"github.com/metactl/metactl/internal/testenv"
)

var env *testenv.Environment

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}, &env) }

// token returns a token of a new ServiceAccount name in namespace.
func token(ctx context.Context, t *testing.T, namespace, name string) string {
	t.Helper()
	if _, err := env.Kube.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := env.Kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// grant gives the ServiceAccount namespace/name the rules, in namespace
// (a Role), or in every namespace when cluster is true (a ClusterRole).
func grant(ctx context.Context, t *testing.T, namespace, name string, cluster bool, rules ...rbacv1.PolicyRule) {
	t.Helper()
	rbac := env.Kube.RbacV1()
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}}
	var err error
	if cluster {
		role := namespace + "-" + name
		if _, err = rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: rules}, metav1.CreateOptions{}); err == nil {
			_, err = rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role}, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}}, metav1.CreateOptions{})
		}
		t.Cleanup(func() {
			_ = rbac.ClusterRoleBindings().Delete(context.Background(), role, metav1.DeleteOptions{})
			_ = rbac.ClusterRoles().Delete(context.Background(), role, metav1.DeleteOptions{})
		})
	} else {
		if _, err = rbac.Roles(namespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err == nil {
			_, err = rbac.RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}}, metav1.CreateOptions{})
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestGuardOnTheControlPlane serves the explain and record endpoints'
// stand-ins behind a Guard that reviews with a real API server, and
// checks who gets what: no token or a token the API server does not
// authenticate, 401; an explain only to whoever may get the object; a
// recording only to whoever may list every resource its controller's hook
// calls carry, in all namespaces; a controller not running, 404 to an
// authenticated caller; the handler never reached by a refused request.
func TestGuardOnTheControlPlane(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := env.CreateNamespace(t)
	reader := token(ctx, t, ns, "reader")     // get configmaps in ns
	lister := token(ctx, t, ns, "lister")     // list configmaps everywhere
	stranger := token(ctx, t, ns, "stranger") // nothing
	grant(ctx, t, ns, "reader", false, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}})
	grant(ctx, t, ns, "lister", true, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}})

	guard := debugauth.New(debugauth.Options{
		Tokens:   env.Kube.AuthenticationV1().TokenReviews(),
		Access:   env.Kube.AuthorizationV1().SubjectAccessReviews(),
		CacheTTL: -1, // every request reviewed: RBAC is being granted
	})
	var served []string
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served = append(served, r.URL.String())
		_, _ = io.WriteString(w, "shown")
	})
	// A controller "compositecontroller/cms" whose hook calls carry
	// ConfigMaps only.
	resources := func(controller string) ([]schema.GroupVersionResource, bool) {
		if controller != "compositecontroller/cms" {
			return nil, false
		}
		return []schema.GroupVersionResource{{Version: "v1", Resource: "configmaps"}}, true
	}
	mux := http.NewServeMux()
	mux.Handle(explain.Path, guard.Protect(ok, explain.Attributes))
	mux.Handle(hookrecord.Path, guard.Protect(ok, hookrecord.Attributes(resources)))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	get := func(path, header, tok string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tok != "" {
			req.Header.Set(header, "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	explainCM := explain.Path + "?version=v1&resource=configmaps&namespace=" + ns + "&name=a"
	explainOther := explain.Path + "?version=v1&resource=configmaps&namespace=default&name=a"
	explainSecret := explain.Path + "?version=v1&resource=secrets&namespace=" + ns + "&name=a"
	record := hookrecord.Path + "?controller=compositecontroller/cms"

	// RBAC takes effect when the API server's cache has it.
	testenv.Eventually(t, 30*time.Second, "the reader allowed to explain a ConfigMap of "+ns, func(context.Context) (bool, error) {
		code, _ := get(explainCM, "Authorization", reader)
		return code == http.StatusOK, nil
	})
	testenv.Eventually(t, 30*time.Second, "the lister allowed a recording of ConfigMaps", func(context.Context) (bool, error) {
		code, _ := get(record, debugauth.TokenHeader, lister)
		return code == http.StatusOK, nil
	})
	served = nil

	for _, tc := range []struct {
		what, path, header, token string
		code                      int
		says                      string
	}{
		{"no token", explainCM, "", "", http.StatusUnauthorized, "bearer token"},
		{"a token the API server does not know", explainCM, "Authorization", "not-a-token", http.StatusUnauthorized, "does not authenticate"},
		{"the reader, its namespace's ConfigMap, through the Pod proxy's header", explainCM, debugauth.TokenHeader, reader, http.StatusOK, "shown"},
		{"the reader, another namespace's ConfigMap", explainOther, "Authorization", reader, http.StatusForbidden, "may not get configmaps a in namespace default"},
		{"the reader, a Secret", explainSecret, "Authorization", reader, http.StatusForbidden, "may not get secrets a in namespace " + ns},
		{"the stranger, the ConfigMap", explainCM, "Authorization", stranger, http.StatusForbidden, "system:serviceaccount:" + ns + ":stranger"},
		{"the reader, a recording (get in one namespace is not list everywhere)", record, "Authorization", reader, http.StatusForbidden, "may not list configmaps in all namespaces"},
		{"the lister, a recording", record, "Authorization", lister, http.StatusOK, "shown"},
		{"the lister, a controller not running", hookrecord.Path + "?controller=compositecontroller/other", "Authorization", lister, http.StatusNotFound, "records no hook calls"},
		{"no token, a controller not running", hookrecord.Path + "?controller=compositecontroller/other", "", "", http.StatusUnauthorized, "bearer token"},
		{"the lister, a bad request", hookrecord.Path + "?controller=x", "Authorization", lister, http.StatusBadRequest, "want compositecontroller/NAME"},
	} {
		code, body := get(tc.path, tc.header, tc.token)
		if code != tc.code || !strings.Contains(body, tc.says) {
			t.Errorf("%s: %d %q, want %d saying %q", tc.what, code, body, tc.code, tc.says)
		}
	}
	if len(served) != 2 {
		t.Errorf("the handler served %d requests (%v), want the 2 allowed", len(served), served)
	}
}
