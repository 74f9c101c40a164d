package objectclient

import (
	"context"
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/metactl/metactl/internal/jsonscan"
	"github.com/metactl/metactl/pkg/dynamic/informer"
)

// Client lists, watches and writes objects of any resource through the API
// server's REST API, as informer.Objects; the package doc says what it
// guarantees. Safe for concurrent use.
type Client struct {
	client *rest.RESTClient
}

// New returns a Client that talks to the server of cfg through httpClient
// (nil: one built from cfg).
func New(cfg *rest.Config, httpClient *http.Client) (*Client, error) {
	if httpClient == nil {
		var err error
		if httpClient, err = rest.HTTPClientFor(cfg); err != nil {
			return nil, fmt.Errorf("building the objects' HTTP client: %w", err)
		}
	}
	c := rest.CopyConfig(cfg)
	c.APIPath = ""
	c.GroupVersion = &schema.GroupVersion{}
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	c.NegotiatedSerializer = objectSerializer{}
	client, err := rest.RESTClientForConfigAndClient(c, httpClient)
	if err != nil {
		return nil, fmt.Errorf("building the objects' REST client: %w", err)
	}
	return &Client{client: client}, nil
}

// ListerWatcher lists and watches gvr in every namespace; it is an
// informer.ListerWatcherFunc, and its ListerWatchers are
// informer.KeepingListers.
func (c *Client) ListerWatcher(gvr schema.GroupVersionResource) cache.ListerWatcher {
	return &listerWatcher{c: c, gvr: gvr, path: resourcePath(gvr)}
}

// listerWatcher is Client.ListerWatcher's.
type listerWatcher struct {
	c    *Client
	gvr  schema.GroupVersionResource
	path []string
}

var (
	_ cache.ListerWatcherWithContext = &listerWatcher{}
	_ informer.KeepingLister         = &listerWatcher{}
)

func (l *listerWatcher) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), opts)
}

func (l *listerWatcher) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), opts)
}

func (l *listerWatcher) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	return l.ListKeeping(ctx, opts, nil)
}

// ListKeeping lists with opts and keeps the objects whose namespace keep
// accepts, leaving the others out before they are decoded; with keep
// set, it reads the response as a stream (decodeListStream), so that it
// never holds the whole response either. With keep nil it is
// ListWithContext: the whole response is read, then decoded
// (informer.NewObjectList).
func (l *listerWatcher) ListKeeping(ctx context.Context, opts metav1.ListOptions, keep func(namespace string) bool) (runtime.Object, error) {
	req := l.c.client.Get().AbsPath(l.path...).VersionedParams(&opts, metav1.ParameterCodec)
	if keep == nil {
		data, err := body(req.Do(ctx))
		if err != nil {
			return nil, err
		}
		list, err := informer.NewObjectList(data)
		if err != nil {
			return nil, fmt.Errorf("decoding the list of %s: %w", l.gvr, err)
		}
		return list, nil
	}
	stream, err := req.Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = stream.Close() }()
	list, err := decodeListStream(stream, keep)
	if err != nil {
		return nil, fmt.Errorf("decoding the list of %s: %w", l.gvr, err)
	}
	return list, nil
}

func (l *listerWatcher) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return l.c.client.Get().AbsPath(l.path...).VersionedParams(&opts, metav1.ParameterCodec).Watch(ctx)
}

// Create creates an object of gvr in namespace ("" when cluster-scoped)
// from its JSON, and returns it as the server stored it. Errors from the
// server are *errors.StatusError, as from client-go's clients.
func (c *Client) Create(ctx context.Context, gvr schema.GroupVersionResource, namespace string, body []byte, opts ...WriteOption) (*informer.Object, error) {
	req := c.client.Post().AbsPath(objectPath(gvr, namespace, "")...)
	return c.write(ctx, writeOptionsOf(opts).apply(req), body, runtime.ContentTypeJSON)
}

// Update replaces the object name of gvr in namespace with body, and returns
// it as the server stored it.
func (c *Client) Update(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, body []byte, opts ...WriteOption) (*informer.Object, error) {
	req := c.client.Put().AbsPath(objectPath(gvr, namespace, name)...)
	return c.write(ctx, writeOptionsOf(opts).apply(req), body, runtime.ContentTypeJSON)
}

// Patch patches the object name of gvr in namespace, or its subresource
// (status, say), and returns it as the server stored it. It takes no
// WriteOption (its variadic parameter is the subresource): its warnings
// go to the rest.Config's warning handler.
func (c *Client) Patch(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, pt types.PatchType, data []byte, subresources ...string) (*informer.Object, error) {
	path := append(objectPath(gvr, namespace, name), subresources...)
	return c.write(ctx, c.client.Patch(pt).AbsPath(path...), data, string(pt))
}

// GetMetadata reads the object name of gvr in namespace from the server and
// returns its whole metadata, managedFields included (which the cache's
// Objects do not keep).
func (c *Client) GetMetadata(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*metav1.ObjectMeta, error) {
	data, err := body(c.client.Get().AbsPath(objectPath(gvr, namespace, name)...).Do(ctx))
	if err != nil {
		return nil, err
	}
	var obj struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := utiljson.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("decoding the server's answer: %w", err)
	}
	return &obj.Metadata, nil
}

// Apply applies body, an apply configuration as JSON, to the object name of
// gvr in namespace with server-side apply as fieldManager, creating it if
// it does not exist, and returns it as the server stored it. force takes
// the fields other managers own; without it, such an apply fails with a
// conflict (apierrors.IsConflict) that names them.
func (c *Client) Apply(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, body []byte, fieldManager string, force bool, opts ...WriteOption) (*informer.Object, error) {
	req := c.client.Patch(types.ApplyPatchType).AbsPath(objectPath(gvr, namespace, name)...).Param("fieldManager", fieldManager)
	if force {
		req = req.Param("force", "true")
	}
	return c.write(ctx, writeOptionsOf(opts).apply(req), body, string(types.ApplyPatchType))
}

// Delete deletes the object name of gvr in namespace with opts, the API's
// delete options (wopts are the write's own). Errors from the server are
// *errors.StatusError.
//
// It returns the object when it is still there: kube-apiserver answers a
// delete that waits (the object has finalizers, or is deleted gracefully
// as a Pod is) with the object, its deletionTimestamp set. It returns nil
// when the object is gone: the server then answers with a Status, or,
// for the resources that return the deleted object (custom resources),
// with the object as it was, without a deletionTimestamp.
func (c *Client) Delete(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions, wopts ...WriteOption) (*informer.Object, error) {
	// The client's codec encodes nothing: the options are encoded here,
	// as client-go's dynamic client sends them.
	opts.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "DeleteOptions"}
	data, err := utiljson.Marshal(&opts)
	if err != nil {
		return nil, fmt.Errorf("encoding the delete options: %w", err)
	}
	req := c.client.Delete().AbsPath(objectPath(gvr, namespace, name)...)
	data, err = body(writeOptionsOf(wopts).apply(req).SetHeader("Content-Type", runtime.ContentTypeJSON).Body(data).Do(ctx))
	if err != nil {
		return nil, err
	}
	return remaining(data)
}

// remaining reads a delete's answer: the object when it is still there
// (deletionTimestamp set), else nil.
func remaining(data []byte) (*informer.Object, error) {
	fields, err := jsonscan.TopLevel(data)
	if err != nil {
		return nil, fmt.Errorf("decoding the server's answer to a delete: %w", err)
	}
	if fields.Kind == "Status" && fields.APIVersion == "v1" {
		return nil, nil
	}
	obj, err := informer.NewObjectFromTopLevel(data, fields)
	if err != nil {
		return nil, fmt.Errorf("decoding the server's answer to a delete: %w", err)
	}
	if obj.DeletionTimestamp == nil {
		return nil, nil
	}
	return obj, nil
}

func (c *Client) write(ctx context.Context, req *rest.Request, data []byte, contentType string) (*informer.Object, error) {
	data, err := body(req.SetHeader("Content-Type", contentType).Body(data).Do(ctx))
	if err != nil {
		return nil, err
	}
	obj, err := informer.NewObject(data)
	if err != nil {
		return nil, fmt.Errorf("decoding the server's answer: %w", err)
	}
	return obj, nil
}

// body returns the body of a successful response, or the server's error:
// a *errors.StatusError with the server's message and causes (Raw alone
// would keep only the HTTP status).
func body(res rest.Result) ([]byte, error) {
	if err := res.Error(); err != nil {
		return nil, err
	}
	return res.Raw()
}

// objectPath is the path of the object name of gvr in namespace, or of the
// collection when name is "".
func objectPath(gvr schema.GroupVersionResource, namespace, name string) []string {
	path := []string{"/apis", gvr.Group, gvr.Version}
	if gvr.Group == "" {
		path = []string{"/api", gvr.Version}
	}
	if namespace != "" {
		path = append(path, "namespaces", namespace)
	}
	path = append(path, gvr.Resource)
	if name != "" {
		path = append(path, name)
	}
	return path
}

// resourcePath is the path of a resource in every namespace.
func resourcePath(gvr schema.GroupVersionResource) []string { return objectPath(gvr, "", "") }
