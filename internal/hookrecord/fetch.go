package hookrecord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/metactl/metactl/internal/explain"
)

// maxSetBytes bounds a recorded set read from metactl: more than the
// default --record-max-bytes, whatever the encoding adds.
const maxSetBytes = 64 << 20

// Fetch asks the metactl serving at endpoint (http://host:port, its
// metrics address) for controller's recorded calls.
func Fetch(ctx context.Context, client *http.Client, endpoint, controller string) (*Set, error) {
	body, err := explain.GetEndpoint(ctx, client, endpoint, Path, url.Values{"controller": {controller}}, maxSetBytes)
	if err != nil {
		return nil, err
	}
	return decodeSet(body, endpoint)
}

func decodeSet(body []byte, from string) (*Set, error) {
	s := &Set{}
	if err := json.Unmarshal(body, s); err != nil {
		return nil, fmt.Errorf("metactl's answer from %s is not a recorded set (an older metactl, or not metactl?): %w", from, err)
	}
	return s, nil
}

// FetchThroughPods asks each Running metactl Pod in namespace (selected by
// selector, the Ready ones first: explain.RunningPods) on port, through
// the API server's Pod proxy, for controller's recorded calls, and returns
// the first set one serves: only the leader runs controllers, the others
// answer 404. It fails when no Pod is Running, and when none serves the
// set, with each Pod's answer (metactl's says which annotation to set).
func FetchThroughPods(ctx context.Context, core corev1client.CoreV1Interface, namespace, selector, port, controller string) (*Set, error) {
	pods, listed, err := explain.RunningPods(ctx, core, namespace, selector)
	if err != nil {
		return nil, err
	}
	if len(pods) == 0 {
		return nil, explain.NoRunningPod(namespace, selector, listed)
	}
	var errs []error
	for _, pod := range pods {
		body, code, err := explain.GetThroughPod(ctx, core, namespace, pod.Name, port, Path, map[string]string{"controller": controller}, maxSetBytes)
		switch {
		case code == http.StatusNotFound && strings.HasPrefix(string(body), "record: "):
			errs = append(errs, fmt.Errorf("pod %s: %s", pod.Name, strings.TrimSpace(string(body))))
		case err != nil:
			errs = append(errs, fmt.Errorf("pod %s: %w", pod.Name, err))
		default:
			return decodeSet(body, "pod "+pod.Name)
		}
	}
	return nil, fmt.Errorf("asking metactl through the API server's Pod proxy (port %s; needs list pods and get pods/proxy in metactl's namespace %s, as the Role metactl-explain grants): %w",
		port, namespace, errors.Join(errs...))
}
