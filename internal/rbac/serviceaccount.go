package rbac

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// ServiceAccountAnnotation on a CompositeController or DecoratorController
// names the ServiceAccount, as <namespace>/<name>, whose identity the
// controller's writes use (metactl impersonates it).
const ServiceAccountAnnotation = "metactl.io/service-account"

// ServiceAccount names a ServiceAccount.
type ServiceAccount struct{ Namespace, Name string }

func (s ServiceAccount) String() string { return s.Namespace + "/" + s.Name }

// UserName is the account's user name as the API server authenticates it.
func (s ServiceAccount) UserName() string {
	return "system:serviceaccount:" + s.Namespace + ":" + s.Name
}

// Groups are the groups the API server gives the account's requests.
func (s ServiceAccount) Groups() []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + s.Namespace, "system:authenticated"}
}

// ParseServiceAccount reads the value of ServiceAccountAnnotation; its
// error says the expected form.
func ParseServiceAccount(value string) (ServiceAccount, error) {
	namespace, name, ok := strings.Cut(value, "/")
	var problems []string
	if !ok || strings.Contains(name, "/") {
		problems = append(problems, "not of the form <namespace>/<name>")
	} else {
		for _, msg := range validation.IsDNS1123Label(namespace) {
			problems = append(problems, "namespace: "+msg)
		}
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			problems = append(problems, "name: "+msg)
		}
	}
	if len(problems) > 0 {
		return ServiceAccount{}, fmt.Errorf("want <namespace>/<name> of a ServiceAccount, e.g. team-a/widgets-controller: %s", strings.Join(problems, "; "))
	}
	return ServiceAccount{Namespace: namespace, Name: name}, nil
}

// ServiceAccountOf returns the ServiceAccount an object's annotation
// names; nil without the annotation.
func ServiceAccountOf(obj metav1.Object) (*ServiceAccount, error) {
	value, ok := obj.GetAnnotations()[ServiceAccountAnnotation]
	if !ok {
		return nil, nil
	}
	sa, err := ParseServiceAccount(value)
	if err != nil {
		return nil, err
	}
	return &sa, nil
}

// Reviewer asks about the account with SubjectAccessReviews, with the
// groups the API server gives it (Groups).
func (s ServiceAccount) Reviewer(reviews authorizationv1client.SubjectAccessReviewInterface) Reviewer {
	return func(ctx context.Context, attributes *authorizationv1.ResourceAttributes) (bool, error) {
		review, err := reviews.Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				ResourceAttributes: attributes, User: s.UserName(), Groups: s.Groups(),
			},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return review.Status.Allowed, nil
	}
}

// MayImpersonate asks, with a SelfSubjectAccessReview, whether metactl may
// impersonate the account.
func MayImpersonate(ctx context.Context, reviews authorizationv1client.SelfSubjectAccessReviewInterface, s ServiceAccount) (bool, error) {
	allowed, err := SelfReviewer(reviews)(ctx, &authorizationv1.ResourceAttributes{
		Verb: "impersonate", Resource: "serviceaccounts", Namespace: s.Namespace, Name: s.Name,
	})
	if err != nil {
		return false, fmt.Errorf("checking permission to impersonate ServiceAccount %s: %w", s, err)
	}
	return allowed, nil
}

// ForbiddenError says what a ServiceAccount may not do.
type ForbiddenError struct {
	Account ServiceAccount
	Denied  []string
	// Hint, when set, says how to fix it; it ends the message in
	// parentheses.
	Hint string
}

func (e *ForbiddenError) Error() string {
	msg := fmt.Sprintf("ServiceAccount %s may not %s", e.Account, strings.Join(e.Denied, "; "))
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

// DefaultMaxAnswers is the default of CachedReviewer.Max.
const DefaultMaxAnswers = 4096

// CachedReviewer remembers the answers of a Reviewer for a while: RBAC is
// not watched, so a grant or a revocation is seen within TTL. It holds at
// most Max answers: when full, the answers past their TTL go, then the
// oldest. Safe for concurrent use.
type CachedReviewer struct {
	Review Reviewer
	TTL    time.Duration
	// Max is the most answers kept; 0 is DefaultMaxAnswers. A
	// controller asks about each namespace it syncs objects of, so that
	// the questions grow with the namespaces: Max bounds their memory.
	Max int

	mu      sync.Mutex
	answers map[authorizationv1.ResourceAttributes]cachedAnswer
}

type cachedAnswer struct {
	allowed bool
	at      time.Time
}

// Ask is a Reviewer.
func (c *CachedReviewer) Ask(ctx context.Context, attributes *authorizationv1.ResourceAttributes) (bool, error) {
	now := time.Now()
	c.mu.Lock()
	if c.answers == nil {
		c.answers = map[authorizationv1.ResourceAttributes]cachedAnswer{}
	}
	a, ok := c.answers[*attributes]
	c.mu.Unlock()
	if ok && now.Sub(a.at) < c.TTL {
		return a.allowed, nil
	}
	allowed, err := c.Review(ctx, attributes)
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	limit := c.Max
	if limit <= 0 {
		limit = DefaultMaxAnswers
	}
	if _, ok := c.answers[*attributes]; !ok && len(c.answers) >= limit {
		var oldest authorizationv1.ResourceAttributes
		var oldestAt time.Time
		for k, old := range c.answers {
			if now.Sub(old.at) >= c.TTL {
				delete(c.answers, k)
			} else if oldestAt.IsZero() || old.at.Before(oldestAt) {
				oldest, oldestAt = k, old.at
			}
		}
		if len(c.answers) >= limit {
			delete(c.answers, oldest)
		}
	}
	c.answers[*attributes] = cachedAnswer{allowed: allowed, at: now}
	c.mu.Unlock()
	return allowed, nil
}
