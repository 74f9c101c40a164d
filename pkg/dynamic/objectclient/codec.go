package objectclient

import (
	"errors"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/metactl/metactl/internal/jsonscan"
	"github.com/metactl/metactl/pkg/dynamic/informer"
)

// objectSerializer gives the Client's REST client its decoders: objects
// decode into informer.Objects, watch events' envelopes into
// metav1.WatchEvent (their objects are then decoded as objects), and errors
// into metav1.Status.
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

// objectCodec decodes one object into an informer.Object, or a Status (an
// error response, or a watch's error event) into metav1.Status. It encodes
// nothing: the Client sends the JSON its callers give it as it is.
type objectCodec struct{}

var statusGVK = metav1.SchemeGroupVersion.WithKind("Status")

func (objectCodec) Decode(data []byte, _ *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	status, wantStatus := into.(*metav1.Status)
	if !wantStatus {
		fields, err := jsonscan.TopLevel(data)
		if err != nil {
			return nil, nil, err
		}
		if fields.Kind != "Status" || fields.APIVersion != "v1" { // a custom resource may be called Status
			obj, err := informer.NewObjectFromTopLevel(data, fields)
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
	return errors.New("objectclient: the object client encodes nothing")
}

func (objectCodec) Identifier() runtime.Identifier { return "metactl-objectclient-object" }

// watchEventCodec decodes the envelope of a watch event,
// {"type":...,"object":{...}}, into a metav1.WatchEvent whose object is
// left raw, with one scan of the envelope's top level.
type watchEventCodec struct{}

func (watchEventCodec) Decode(data []byte, _ *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	event, ok := into.(*metav1.WatchEvent)
	if !ok {
		return nil, nil, fmt.Errorf("objectclient: cannot decode a watch event into %T", into)
	}
	fields, err := jsonscan.TopLevel(data)
	if err != nil {
		return nil, nil, fmt.Errorf("decoding a watch event: %w", err)
	}
	if fields.Object.Start == 0 {
		return nil, nil, errors.New("decoding a watch event: no object")
	}
	event.Type = fields.EventType
	// Raw shares data, which the streaming decoder reuses for the next
	// event: client-go's watch decoder decodes the object (into an
	// informer.Object, which copies what it keeps) before it reads another
	// event.
	event.Object = runtime.RawExtension{Raw: data[fields.Object.Start:fields.Object.End]}
	return event, &watchEventGVK, nil
}

var watchEventGVK = metav1.SchemeGroupVersion.WithKind("WatchEvent")

func (watchEventCodec) Encode(runtime.Object, io.Writer) error {
	return errors.New("objectclient: the object client encodes nothing")
}

func (watchEventCodec) Identifier() runtime.Identifier { return "metactl-objectclient-watch-event" }
