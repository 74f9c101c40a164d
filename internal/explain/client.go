package explain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/metactl/metactl/internal/textcut"
)

// PodSelector selects metactl's Pods: the labels of the Deployment in
// manifests/deploy/deployment.yaml.
const PodSelector = "app.kubernetes.io/name=metactl,app.kubernetes.io/component=controller"

// DefaultNamespace is the namespace of metactl's Deployment.
const DefaultNamespace = "metactl-system"

// DefaultPort is metactl's metrics port, where it serves Path (the
// Deployment's container port "metrics"; the Pod proxy takes the number).
const DefaultPort = "9999"

// maxAnswerBytes bounds an answer read: a few records of a few syncs.
const maxAnswerBytes = 8 << 20

// Fetch asks the metactl serving at endpoint (http://host:port, its
// metrics address) about req.
func Fetch(ctx context.Context, client *http.Client, endpoint string, req Request) (*Answer, error) {
	body, err := GetEndpoint(ctx, client, endpoint, Path, req.Query(), maxAnswerBytes)
	if err != nil {
		return nil, err
	}
	return decode(body, endpoint)
}

// maxErrorBytes bounds the part of an answer other than 200 shown in an
// error.
const maxErrorBytes = 4 << 10

// GetEndpoint GETs path with query from the metactl serving at endpoint
// (http://host:port, its metrics address) and returns the body of its
// answer, 200. It fails when metactl cannot be reached, when it answers
// another status (the error holds the start of its body: metactl's
// message), and when the body is longer than limit bytes (saying so,
// rather than returning a body cut short).
func GetEndpoint(ctx context.Context, client *http.Client, endpoint, path string, query url.Values, limit int64) ([]byte, error) {
	u := strings.TrimSuffix(endpoint, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("endpoint %q: %w", endpoint, err)
	}
	resp, err := client.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("reaching metactl at %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	body, err := readLimited(resp.Body, limit)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metactl at %s answered %s: %s", endpoint, resp.Status, errorText(body))
	}
	if err != nil {
		return nil, fmt.Errorf("reading metactl's answer from %s: %w", endpoint, err)
	}
	return body, nil
}

// readLimited reads r to its end, at most limit bytes: past them it
// returns what it read and an error saying so.
func readLimited(r io.Reader, limit int64) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return body, err
	}
	if int64(len(body)) > limit {
		return body[:limit], fmt.Errorf("the answer exceeds %d bytes", limit)
	}
	return body, nil
}

// errorText is the start of an answer's body, for an error.
func errorText(body []byte) string {
	return textcut.Cut(strings.TrimSpace(string(body)), maxErrorBytes)
}

func decode(body []byte, from string) (*Answer, error) {
	a := &Answer{}
	if err := json.Unmarshal(body, a); err != nil {
		return nil, fmt.Errorf("metactl's answer from %s is not an explain answer (an older metactl, or not metactl?): %w", from, err)
	}
	return a, nil
}

// FetchThroughPods asks, through the API server's Pod proxy
// (/api/v1/namespaces/NS/pods/NAME:PORT/proxy/debug/explain), each
// Running Pod in namespace that selector selects, the Ready ones first (a
// leader whose readiness probe fails still leads, and still answers), and
// returns the leader's answer. It fails when no Pod is Running, when none
// could be asked, when none leads (ErrNotLeading), saying which Pods it
// asked, and when several claim to lead (ErrSeveralLeaders), naming them.
func FetchThroughPods(ctx context.Context, core corev1client.CoreV1Interface, namespace, selector, port string, req Request) (*Answer, error) {
	pods, listed, err := RunningPods(ctx, core, namespace, selector)
	if err != nil {
		return nil, err
	}
	var errs []error
	var standbys, leaders []string
	var answer *Answer
	params := map[string]string{"group": req.Group, "version": req.Version, "resource": req.Resource, "namespace": req.Namespace, "name": req.Name}
	for _, pod := range pods {
		body, _, err := GetThroughPod(ctx, core, namespace, pod.Name, port, Path, params, maxAnswerBytes)
		if err != nil {
			errs = append(errs, fmt.Errorf("pod %s: %w", pod.Name, err))
			continue
		}
		a, err := decode(body, "pod "+pod.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !a.Process.Leading {
			standbys = append(standbys, pod.Name)
			continue
		}
		leaders = append(leaders, pod.Name)
		if answer == nil {
			answer = a
		}
	}
	switch {
	case len(leaders) > 1:
		return nil, fmt.Errorf("%w: Pods %s each answer that they lead (the Lease moved while they were asked, or they do not share one): check `kubectl get lease -n %s` and the Pods' logs",
			ErrSeveralLeaders, strings.Join(leaders, ", "), namespace)
	case answer != nil:
		return answer, nil
	case len(pods) == 0:
		return nil, NoRunningPod(namespace, selector, listed)
	case len(standbys) > 0 && len(errs) == 0:
		return nil, fmt.Errorf("%w: no metactl Pod in namespace %s leads (asked %s, each standing by): check the Lease with `kubectl get lease -n %s`",
			ErrNotLeading, namespace, strings.Join(standbys, ", "), namespace)
	default:
		if len(standbys) > 0 {
			errs = append(errs, fmt.Errorf("%w: %s stand by", ErrNotLeading, strings.Join(standbys, ", ")))
		}
		return nil, fmt.Errorf("asking metactl through the API server's Pod proxy (port %s; needs list pods and get pods/proxy in metactl's namespace %s, as the Role metactl-explain grants, and read access to the object): %w",
			port, namespace, errors.Join(errs...))
	}
}

// RunningPods lists the Running Pods in namespace that selector selects
// (metactl's: PodSelector), the Ready ones first (a leader whose
// readiness probe fails still leads, and still answers), and how many
// Pods the selector selected in all.
func RunningPods(ctx context.Context, core corev1client.CoreV1Interface, namespace, selector string) ([]*corev1.Pod, int, error) {
	list, err := core.Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, 0, fmt.Errorf("listing metactl's Pods in namespace %s (labels %s; needs list pods there, as the Role metactl-explain grants): %w", namespace, selector, err)
	}
	var pods []*corev1.Pod
	for i := range list.Items {
		if pod := &list.Items[i]; pod.DeletionTimestamp == nil && pod.Status.Phase == corev1.PodRunning {
			pods = append(pods, pod)
		}
	}
	slices.SortStableFunc(pods, func(a, b *corev1.Pod) int {
		switch ra, rb := podReady(a), podReady(b); {
		case ra == rb:
			return 0
		case ra:
			return -1
		default:
			return 1
		}
	})
	return pods, len(list.Items), nil
}

// NoRunningPod is the error of RunningPods finding none of listed Pods
// Running.
func NoRunningPod(namespace, selector string, listed int) error {
	return fmt.Errorf("no Running metactl Pod in namespace %s with labels %s (%d Pods found): check `kubectl get pods -n %s -l %s`, or set --metactl-namespace",
		namespace, selector, listed, namespace, selector)
}

// GetThroughPod GETs path with the query params from pod's port, through
// the API server's Pod proxy
// (/api/v1/namespaces/NS/pods/NAME:PORT/proxy/PATH), with client-go's
// (*rest.Request).Stream, and returns the answer's body, at most limit
// bytes, and HTTP status (200 for any 2xx; 0 when none came). An answer
// other than 2xx is Stream's error (an apierrors.APIStatus: the API
// server's Status, or one of that code holding the start of a text body,
// metactl's message, which is returned as the body too); a body over
// limit bytes is an error too.
func GetThroughPod(ctx context.Context, core corev1client.CoreV1Interface, namespace, pod, port, path string, params map[string]string, limit int64) ([]byte, int, error) {
	r := core.RESTClient().Get().Namespace(namespace).Resource("pods").Name(pod + ":" + port).SubResource("proxy").Suffix(path)
	for k, v := range params {
		r = r.Param(k, v)
	}
	stream, err := r.Stream(ctx)
	if err != nil {
		body, code := bodyOf(err), codeOf(err)
		if code == http.StatusUnauthorized {
			// Through the proxy, metactl's 401 reads as the API server's.
			err = fmt.Errorf("%w (metactl answers only a caller whose bearer token the API server authenticates: a kubeconfig with a client certificate only has none to send; use a token, e.g. kubectl's --token)", err)
		}
		return body, code, err
	}
	defer stream.Close()
	body, err := readLimited(stream, limit)
	if err != nil {
		return nil, http.StatusOK, fmt.Errorf("reading the answer of pod %s: %w", pod, err)
	}
	return body, http.StatusOK, nil
}

// codeOf is the HTTP status of a client-go error: 0 for an error without
// one.
func codeOf(err error) int {
	if status, ok := err.(apierrors.APIStatus); ok {
		return int(status.Status().Code)
	}
	return 0
}

// bodyOf is the (start of the) body of an answer that client-go made err,
// an apierrors.APIStatus, of: the unexpected server response it holds as a
// cause (a text body), nil for none.
func bodyOf(err error) []byte {
	status, ok := err.(apierrors.APIStatus)
	if !ok || status.Status().Details == nil {
		return nil
	}
	for _, c := range status.Status().Details.Causes {
		if c.Type == metav1.CauseTypeUnexpectedServerResponse {
			return []byte(c.Message)
		}
	}
	return nil
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
