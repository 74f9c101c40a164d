package informer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// ListerWatcherFunc returns what lists and watches one resource in every
// namespace. Its lists are of *Object items and its watch events carry
// *Object.
type ListerWatcherFunc func(gvr schema.GroupVersionResource) cache.ListerWatcher

// RESTClient lists, watches and writes objects of any resource through the
// API server's REST API, and decodes what the server sends straight into
// Objects: no object is decoded whole on its way into the cache, and the
// answer to a write costs a parse of its metadata. Safe for concurrent use.
type RESTClient struct {
	client *rest.RESTClient
}

// NewRESTClient returns a RESTClient that talks to the server of cfg through
// httpClient (nil: one built from cfg).
func NewRESTClient(cfg *rest.Config, httpClient *http.Client) (*RESTClient, error) {
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
	return &RESTClient{client: client}, nil
}

// NewRESTListerWatcher is NewRESTClient's ListerWatcher.
func NewRESTListerWatcher(cfg *rest.Config, httpClient *http.Client) (ListerWatcherFunc, error) {
	c, err := NewRESTClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return c.ListerWatcher, nil
}

// ListerWatcher lists and watches gvr in every namespace; it is a
// ListerWatcherFunc.
func (c *RESTClient) ListerWatcher(gvr schema.GroupVersionResource) cache.ListerWatcher {
	path := resourcePath(gvr)
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			data, err := body(c.client.Get().AbsPath(path...).VersionedParams(&opts, metav1.ParameterCodec).Do(ctx))
			if err != nil {
				return nil, err
			}
			list, err := newObjectList(data)
			if err != nil {
				return nil, fmt.Errorf("decoding the list of %s: %w", gvr, err)
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			return c.client.Get().AbsPath(path...).VersionedParams(&opts, metav1.ParameterCodec).Watch(ctx)
		},
	}
}

// Create creates an object of gvr in namespace ("" when cluster-scoped)
// from its JSON, and returns it as the server stored it. Errors from the
// server are *errors.StatusError, as from client-go's clients.
func (c *RESTClient) Create(ctx context.Context, gvr schema.GroupVersionResource, namespace string, body []byte) (*Object, error) {
	return c.write(ctx, c.client.Post().AbsPath(objectPath(gvr, namespace, "")...), body, runtime.ContentTypeJSON)
}

// Update replaces the object name of gvr in namespace with body, and returns
// it as the server stored it.
func (c *RESTClient) Update(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, body []byte) (*Object, error) {
	return c.write(ctx, c.client.Put().AbsPath(objectPath(gvr, namespace, name)...), body, runtime.ContentTypeJSON)
}

// Patch patches the object name of gvr in namespace, or its subresource
// (status, say), and returns it as the server stored it.
func (c *RESTClient) Patch(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, pt types.PatchType, data []byte, subresources ...string) (*Object, error) {
	path := append(objectPath(gvr, namespace, name), subresources...)
	return c.write(ctx, c.client.Patch(pt).AbsPath(path...), data, string(pt))
}

// Delete deletes the object name of gvr in namespace with opts. Errors from
// the server are *errors.StatusError.
func (c *RESTClient) Delete(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) error {
	// The client's codec encodes nothing: the options are encoded here,
	// as client-go's dynamic client sends them.
	opts.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "DeleteOptions"}
	data, err := utiljson.Marshal(&opts)
	if err != nil {
		return fmt.Errorf("encoding the delete options: %w", err)
	}
	req := c.client.Delete().AbsPath(objectPath(gvr, namespace, name)...)
	return withWarnings(ctx, req).SetHeader("Content-Type", runtime.ContentTypeJSON).Body(data).Do(ctx).Error()
}

func (c *RESTClient) write(ctx context.Context, req *rest.Request, data []byte, contentType string) (*Object, error) {
	data, err := body(withWarnings(ctx, req).SetHeader("Content-Type", contentType).Body(data).Do(ctx))
	if err != nil {
		return nil, err
	}
	obj, err := NewObject(data)
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

// objectSerializer gives the informers' REST client its decoders: objects
// decode into Objects, watch events' envelopes into metav1.WatchEvent
// (their objects are then decoded as objects), and errors into
// metav1.Status.
type objectSerializer struct{}

func (objectSerializer) SupportedMediaTypes() []runtime.SerializerInfo {
	return []runtime.SerializerInfo{{
		MediaType:        runtime.ContentTypeJSON,
		MediaTypeType:    "application",
		MediaTypeSubType: "json",
		EncodesAsText:    true,
		Serializer:       objectCodec{},
		StreamSerializer: &runtime.StreamSerializerInfo{
			EncodesAsText: true,
			Serializer:    watchEventCodec{},
			Framer:        json.Framer,
		},
	}}
}

func (objectSerializer) EncoderForVersion(e runtime.Encoder, _ runtime.GroupVersioner) runtime.Encoder {
	return e
}

func (objectSerializer) DecoderToVersion(d runtime.Decoder, _ runtime.GroupVersioner) runtime.Decoder {
	return d
}

// objectCodec decodes one object into an Object, or a Status (an error
// response, or a watch's error event) into metav1.Status. It encodes
// nothing: the informers only read.
type objectCodec struct{}

var statusGVK = metav1.SchemeGroupVersion.WithKind("Status")

func (objectCodec) Decode(data []byte, _ *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	status, wantStatus := into.(*metav1.Status)
	if !wantStatus {
		fields, err := topLevelFields(data)
		if err != nil {
			return nil, nil, err
		}
		if fields.kind != "Status" || fields.apiVersion != "v1" { // a custom resource may be called Status
			obj, err := newObjectFromFields(data, fields)
			if err != nil {
				return nil, nil, err
			}
			gvk := obj.GroupVersionKind()
			return obj, &gvk, nil
		}
		status = &metav1.Status{}
	}
	if err := utiljson.Unmarshal(data, status); err != nil {
		return nil, nil, fmt.Errorf("decoding a Status: %w", err)
	}
	return status, &statusGVK, nil
}

func (objectCodec) Encode(runtime.Object, io.Writer) error {
	return errors.New("informer: the informers' client encodes nothing")
}

func (objectCodec) Identifier() runtime.Identifier { return "metactl-informer-object" }

// watchEventCodec decodes the envelope of a watch event,
// {"type":...,"object":{...}}, into a metav1.WatchEvent whose object is
// left raw, with one scan of the envelope's top level.
type watchEventCodec struct{}

func (watchEventCodec) Decode(data []byte, _ *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	event, ok := into.(*metav1.WatchEvent)
	if !ok {
		return nil, nil, fmt.Errorf("informer: cannot decode a watch event into %T", into)
	}
	fields, err := topLevelFields(data)
	if err != nil {
		return nil, nil, fmt.Errorf("decoding a watch event: %w", err)
	}
	if fields.object.start == 0 {
		return nil, nil, errors.New("decoding a watch event: no object")
	}
	event.Type = fields.eventType
	// Raw shares data, which the streaming decoder reuses for the next
	// event: client-go's watch decoder decodes the object (into an Object,
	// which copies what it keeps) before it reads another event.
	event.Object = runtime.RawExtension{Raw: data[fields.object.start:fields.object.end]}
	return event, &watchEventGVK, nil
}

var watchEventGVK = metav1.SchemeGroupVersion.WithKind("WatchEvent")

func (watchEventCodec) Encode(runtime.Object, io.Writer) error {
	return errors.New("informer: the informers' client encodes nothing")
}

func (watchEventCodec) Identifier() runtime.Identifier { return "metactl-informer-watch-event" }
