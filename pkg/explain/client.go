package explain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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
	u := strings.TrimSuffix(endpoint, "/") + Path + "?" + req.Query().Encode()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("endpoint %q: %w", endpoint, err)
	}
	resp, err := client.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("reaching metactl at %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return nil, fmt.Errorf("reading metactl's answer from %s: %w", endpoint, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metactl at %s answered %s: %s", endpoint, resp.Status, strings.TrimSpace(string(body)))
	}
	return decode(body, endpoint)
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
func FetchThroughPods(ctx context.Context, cs kubernetes.Interface, namespace, selector, port string, req Request) (*Answer, error) {
	pods, listed, err := RunningPods(ctx, cs, namespace, selector)
	if err != nil {
		return nil, err
	}
	var errs []error
	var standbys, leaders []string
	var answer *Answer
	params := map[string]string{"group": req.Group, "version": req.Version, "resource": req.Resource, "namespace": req.Namespace, "name": req.Name}
	for _, pod := range pods {
		body, _, err := GetThroughPod(ctx, cs, namespace, pod.Name, port, Path, params)
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
func RunningPods(ctx context.Context, cs kubernetes.Interface, namespace, selector string) ([]*corev1.Pod, int, error) {
	list, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
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
// (/api/v1/namespaces/NS/pods/NAME:PORT/proxy/PATH), and returns the
// answer's body and HTTP status (0 when none came); err for an answer
// other than 200 (the body then is metactl's message, or the API
// server's).
func GetThroughPod(ctx context.Context, cs kubernetes.Interface, namespace, pod, port, path string, params map[string]string) ([]byte, int, error) {
	r := cs.CoreV1().RESTClient().Get().Namespace(namespace).Resource("pods").Name(pod + ":" + port).SubResource("proxy").Suffix(path)
	for k, v := range params {
		r = r.Param(k, v)
	}
	body, err := r.DoRaw(ctx)
	code := http.StatusOK
	if status, ok := err.(apierrors.APIStatus); ok {
		code = int(status.Status().Code)
	} else if err != nil {
		code = 0
	}
	return body, code, err
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
