package manifests_test

import (
	"context"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/metactl/metactl/internal/testenv"
)

// serviceAccountAnnotation names the ServiceAccount a controller acts as.
const serviceAccountAnnotation = "metactl.io/service-account"

var (
	compositeControllers = schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "compositecontrollers"}
	decoratorControllers = schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "decoratorcontrollers"}
)

// userClient returns a dynamic client acting as user, with no groups but
// system:authenticated.
func userClient(t *testing.T, user string) dynamic.Interface {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// compositeController returns a CompositeController named name acting as
// account ("" for none).
func compositeController(name, account string) *unstructured.Unstructured {
	cc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1",
		"kind":       "CompositeController",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"parentResource": map[string]any{"apiVersion": "example.metactl.io/v1", "resource": "helloworlds"},
			"childResources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps"}},
			"hooks": map[string]any{"sync": map[string]any{"webhook": map[string]any{
				"url": "https://hooks.example.com/sync"}}},
		},
	}}
	if account != "" {
		cc.SetAnnotations(map[string]string{serviceAccountAnnotation: account})
	}
	return cc
}

// grant creates a ClusterRole (namespace "") or Role with rules and binds
// it to user.
func grant(ctx context.Context, t *testing.T, namespace, name, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	rbac := env.Kube.RbacV1()
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	var err error
	if namespace == "" {
		if _, err = rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err == nil {
			_, err = rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}, Subjects: subject}, metav1.CreateOptions{})
		}
	} else {
		if _, err = rbac.Roles(namespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err == nil {
			_, err = rbac.RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}, Subjects: subject}, metav1.CreateOptions{})
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestAdmissionPolicyControllerAccount applies the shipped
// ValidatingAdmissionPolicy and checks who may create and change
// controller objects: only a user who may impersonate the ServiceAccount
// the controller acts as (the annotation's, else metactl's own), and
// writes that change neither the spec nor the annotation are not checked.
func TestAdmissionPolicyControllerAccount(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kubectl(t, "apply", "-f", repo(t, "manifests", "deploy", "admission-policy.yaml"))
	team := env.CreateNamespace(t)
	account := team + "/hooks"

	// alice may write controller objects, and nothing else.
	const alice = "alice@example.com"
	grant(ctx, t, "", "metactl-test-controller-writer", alice, rbacv1.PolicyRule{
		APIGroups: []string{"metacontroller.k8s.io"},
		Resources: []string{"compositecontrollers", "decoratorcontrollers"},
		Verbs:     []string{"get", "list", "create", "update", "patch", "delete"},
	})
	ccs := userClient(t, alice).Resource(compositeControllers)
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

	// The policy takes effect once the API server has loaded it; alice's
	// rights once RBAC has: poll with dry runs until a refusal names the
	// account.
	refused := func(ctx context.Context, cc *unstructured.Unstructured) (string, error) {
		_, err := ccs.Create(ctx, cc, dryRun)
		switch {
		case err == nil:
			return "", nil
		case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "impersonate"):
			return err.Error(), nil
		}
		return "", err
	}
	testenv.Eventually(t, 30*time.Second, "the policy refusing alice a controller without an account", func(ctx context.Context) (bool, error) {
		msg, err := refused(ctx, compositeController("no-account", ""))
		if apierrors.IsForbidden(err) {
			return false, nil // RBAC not there yet
		}
		return msg != "" && strings.Contains(msg, "metactl-system/metactl"), err
	})
	if msg, err := refused(ctx, compositeController("team", account)); err != nil || !strings.Contains(msg, account) {
		t.Fatalf("alice creating a controller acting as %s: refused %q, error %v; want refused naming the account", account, msg, err)
	}

	// Allowed to impersonate her team's account, alice may run
	// controllers as it, and as no other.
	grant(ctx, t, team, "impersonate-hooks", alice, rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: []string{"hooks"}, Verbs: []string{"impersonate"},
	})
	testenv.Eventually(t, 30*time.Second, "alice creating a controller acting as "+account, func(ctx context.Context) (bool, error) {
		msg, err := refused(ctx, compositeController("team", account))
		return msg == "", err
	})
	cc, err := ccs.Create(ctx, compositeController("team-"+team, account), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(compositeControllers).Delete(context.Background(), cc.GetName(), metav1.DeleteOptions{})
	})
	for what, account := range map[string]string{
		"without an account":            "",
		"acting as another account":     team + "/other",
		"acting as an account misspelt": team,
	} {
		if msg, err := refused(ctx, compositeController("other", account)); err != nil || msg == "" {
			t.Errorf("alice creating a controller %s: refused %q, error %v; want refused", what, msg, err)
		}
	}

	dec := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1",
		"kind":       "DecoratorController",
		"metadata":   map[string]any{"name": "other"},
		"spec": map[string]any{
			"resources": []any{map[string]any{"apiVersion": "example.metactl.io/v1", "resource": "helloworlds"}},
			"hooks": map[string]any{"sync": map[string]any{"webhook": map[string]any{
				"url": "https://hooks.example.com/sync"}}},
		},
	}}
	if _, err := userClient(t, alice).Resource(decoratorControllers).Create(ctx, dec, dryRun); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "impersonate") {
		t.Errorf("alice creating a DecoratorController without an account: %v, want refused by the policy", err)
	}

	// Changing the spec keeps being checked; so does the annotation.
	cc.Object["spec"].(map[string]any)["resyncPeriodSeconds"] = int64(30)
	if cc, err = ccs.Update(ctx, cc, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("alice changing the spec of a controller acting as %s: %v", account, err)
	}
	moved := cc.DeepCopy()
	moved.SetAnnotations(map[string]string{serviceAccountAnnotation: team + "/other"})
	if _, err := ccs.Update(ctx, moved, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsForbidden(err) {
		t.Errorf("alice moving the controller to account %s/other: %v, want Forbidden", team, err)
	}
	bare := cc.DeepCopy()
	bare.SetAnnotations(nil)
	if _, err := ccs.Update(ctx, bare, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsForbidden(err) {
		t.Errorf("alice removing the annotation (the controller would act as metactl): %v, want Forbidden", err)
	}

	// bob may update controller objects but impersonate nobody: he may
	// still change what is neither spec nor annotation, as metactl does
	// with its finalizer.
	const bob = "bob@example.com"
	grant(ctx, t, "", "metactl-test-controller-updater", bob, rbacv1.PolicyRule{
		APIGroups: []string{"metacontroller.k8s.io"}, Resources: []string{"compositecontrollers"}, Verbs: []string{"get", "update"},
	})
	bobs := userClient(t, bob).Resource(compositeControllers)
	testenv.Eventually(t, 30*time.Second, "bob adding a finalizer", func(ctx context.Context) (bool, error) {
		current, err := bobs.Get(ctx, cc.GetName(), metav1.GetOptions{})
		if apierrors.IsForbidden(err) {
			return false, nil // RBAC not there yet
		}
		if err != nil {
			return false, err
		}
		current.SetFinalizers([]string{"metactl.io/test"})
		_, err = bobs.Update(ctx, current, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil, err
	})
	current, err := bobs.Get(ctx, cc.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	respec := current.DeepCopy()
	respec.Object["spec"].(map[string]any)["resyncPeriodSeconds"] = int64(60)
	if _, err := bobs.Update(ctx, respec, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsForbidden(err) {
		t.Errorf("bob changing the spec: %v, want Forbidden", err)
	}
	// metactl.io/absent-children changes what an answer deletes.
	absent := current.DeepCopy()
	absent.SetAnnotations(map[string]string{serviceAccountAnnotation: account, "metactl.io/absent-children": "empty"})
	if _, err := bobs.Update(ctx, absent, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsForbidden(err) {
		t.Errorf("bob adding metactl.io/absent-children: %v, want Forbidden", err)
	}
	other := current.DeepCopy()
	other.SetAnnotations(map[string]string{serviceAccountAnnotation: account, "example.com/note": "hello"})
	if _, err := bobs.Update(ctx, other, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("bob adding an annotation outside metactl.io/: %v, want allowed", err)
	}
}

// TestAdmissionPolicyOldAccount checks, with the shipped policy on a real
// API server, that a user allowed to impersonate only their own account
// cannot take over another team's controller object: re-pointing it to
// their account, removing its annotation, or deleting it needs the right
// on the account it acts as now. Their own controller they may change and
// delete, and writes that change neither spec nor metactl.io/ annotation
// stay unchecked.
func TestAdmissionPolicyOldAccount(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kubectl(t, "apply", "-f", repo(t, "manifests", "deploy", "admission-policy.yaml"))
	victim, attacker := env.CreateNamespace(t), env.CreateNamespace(t)
	victimAccount, attackerAccount := victim+"/hooks", attacker+"/hooks"

	// The victim team's controller, created by an administrator.
	theirs, err := env.Dynamic.Resource(compositeControllers).Create(ctx, compositeController("theirs-"+victim, victimAccount), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(compositeControllers).Delete(context.Background(), theirs.GetName(), metav1.DeleteOptions{})
	})

	// mallory may write controller objects and impersonate her own account.
	const mallory = "mallory@example.com"
	grant(ctx, t, "", "metactl-test-controller-writer-"+attacker, mallory, rbacv1.PolicyRule{
		APIGroups: []string{"metacontroller.k8s.io"},
		Resources: []string{"compositecontrollers", "decoratorcontrollers"},
		Verbs:     []string{"get", "list", "create", "update", "patch", "delete"},
	})
	t.Cleanup(func() {
		name := "metactl-test-controller-writer-" + attacker
		_ = env.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = env.Kube.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	grant(ctx, t, attacker, "impersonate-hooks", mallory, rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: []string{"hooks"}, Verbs: []string{"impersonate"},
	})
	ccs := userClient(t, mallory).Resource(compositeControllers)
	dryUpdate := metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}

	// Her own controller: once the policy and her rights are loaded, she
	// may create it (so the new-account rule lets her through).
	var mine *unstructured.Unstructured
	testenv.Eventually(t, 30*time.Second, "mallory creating a controller acting as "+attackerAccount, func(ctx context.Context) (bool, error) {
		mine, err = ccs.Create(ctx, compositeController("mine-"+attacker, attackerAccount), metav1.CreateOptions{})
		if apierrors.IsForbidden(err) {
			return false, nil // the policy or RBAC not there yet
		}
		return err == nil, err
	})
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(compositeControllers).Delete(context.Background(), mine.GetName(), metav1.DeleteOptions{})
	})

	current, err := ccs.Get(ctx, theirs.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	forbiddenNaming := func(what string, err error, account string) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), account) {
			t.Errorf("mallory %s: %v, want Forbidden naming %s", what, err, account)
		}
	}

	// Re-pointing it to her account, and to her hook.
	moved := current.DeepCopy()
	moved.SetAnnotations(map[string]string{serviceAccountAnnotation: attackerAccount})
	moved.Object["spec"].(map[string]any)["hooks"] = map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": "https://mallory.example.com/sync"}}}
	_, err = ccs.Update(ctx, moved, dryUpdate)
	forbiddenNaming("re-pointing "+victimAccount+"'s controller to "+attackerAccount, err, victimAccount)

	// Removing the annotation (it would act as metactl): both accounts.
	bare := current.DeepCopy()
	bare.SetAnnotations(nil)
	_, err = ccs.Update(ctx, bare, dryUpdate)
	forbiddenNaming("removing the annotation of "+victimAccount+"'s controller", err, victimAccount)

	// Deleting it.
	err = ccs.Delete(ctx, theirs.GetName(), metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	forbiddenNaming("deleting "+victimAccount+"'s controller", err, victimAccount)

	// A label is neither spec nor metactl.io/ annotation.
	labelled := current.DeepCopy()
	labelled.SetLabels(map[string]string{"example.com/team": "a"})
	if _, err := ccs.Update(ctx, labelled, dryUpdate); err != nil {
		t.Errorf("mallory labelling %s's controller: %v, want allowed", victimAccount, err)
	}

	// Her own: she may change and delete it.
	mine.Object["spec"].(map[string]any)["resyncPeriodSeconds"] = int64(30)
	if _, err := ccs.Update(ctx, mine, dryUpdate); err != nil {
		t.Errorf("mallory changing her own controller's spec: %v, want allowed", err)
	}
	if err := ccs.Delete(ctx, mine.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Errorf("mallory deleting her own controller: %v, want allowed", err)
	}

	// The administrator may still delete the victim's controller.
	if err := env.Dynamic.Resource(compositeControllers).Delete(ctx, theirs.GetName(), metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("an administrator deleting %s's controller: %v, want allowed", victimAccount, err)
	}
}
