package objectclient

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/metactl/metactl/pkg/dynamic/informer"
)

// TestListStreamDecodesAsTheWholeList: a list read as a stream is the
// list NewObjectListKeeping builds from the whole response, wherever its
// fields stand; a response that is not a list's JSON is an error.
func TestListStreamDecodesAsTheWholeList(t *testing.T) {
	keep := func(ns string) bool { return ns != "out" }
	// A number that the first read cuts: 12|345.
	cut := `{"pad":"` + strings.Repeat("p", readChunk-len(`{"pad":"","n":12`)) + `","n":12345,"kind":"ConfigMapList","items":[]}`
	for _, data := range []string{
		bigList(), cut,
		`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7","continue":"c"},"items":[` +
			`{"metadata":{"name":"a","namespace":"in"},"data":{"k":"]"}},{"metadata":{"name":"b","namespace":"out","labels":5}},` +
			`{"kind":"Thing","apiVersion":"example.com/v1","metadata":{"name":"c","namespace":"in"}}]}`,
		` { "items" : [ {"metadata":{"name":"a","namespace":"in"}} ] , "metadata":{"resourceVersion":"8"}, "kind":"ConfigMapList", "apiVersion":"v1", "other":{"x":[1,2]} } `,
		`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"9"},"items":null}`,
		`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"9"}}`,
	} {
		want, err := informer.NewObjectListKeeping([]byte(data), keep)
		if err != nil {
			t.Fatalf("%.80s: %v", data, err)
		}
		readers := map[string]io.Reader{
			"whole":    strings.NewReader(data),
			"one byte": iotest.OneByteReader(strings.NewReader(data)),
			"halves":   iotest.HalfReader(strings.NewReader(data)),
		}
		for name, r := range readers {
			got, err := decodeListStream(r, keep)
			if err != nil {
				t.Errorf("%.80s, read %s: %v", data, name, err)
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%.80s, read %s: the stream's list differs from the whole response's (%d items, want %d)", data, name, len(got.Items), len(want.Items))
			}
		}
	}
	for _, bad := range []string{
		`[]`, `{"items":{}}`, `{"items":[{"metadata":{"name":"a","namespace":"in"}}`, `{"items":[]} {}`,
		`{"items":[{"metadata":{"name":"a","namespace":"in","labels":5}}]}`, `{"metadata":{"resourceVersion":5}}`,
		``, `{"items":[]`, `{"items" []}`, `{"items":[] "kind":"x"}`, `{"items":[{"metadata":{"name":"a","namespace":"in"}},`,
	} {
		if _, err := decodeListStream(strings.NewReader(bad), keep); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// bigList is a list whose items cross readChunk's boundaries at every
// place, one of them longer than several chunks, and whose numbers end
// where a read may end.
func bigList() string {
	var b strings.Builder
	b.WriteString(`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"12"},"items":[`)
	for i := range 3000 {
		if i > 0 {
			b.WriteString(",\n ")
		}
		ns := "in"
		if i%4 != 0 {
			ns = "out"
		}
		value := strings.Repeat("x", i%97)
		if i == 1500 {
			value = strings.Repeat(`\"y`, 100000)
		}
		fmt.Fprintf(&b, `{"metadata":{"name":"cm-%d","namespace":%q,"generation":%d},"data":{"v":"%s"},"n":%d}`, i, ns, i, value, i)
	}
	b.WriteString(`], "n": 12345}`)
	return b.String()
}

// TestListKeepingReturnsTheServersError: a list read as a stream that the
// server refuses returns the server's Status as an *errors.StatusError,
// as a whole list does: the reflector tells an expired resourceVersion
// (410 Gone, Expired) by it and lists again from the latest.
func TestListKeepingReturnsTheServersError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusGone)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 5 (90)","reason":"Expired","code":410}`))
	}))
	defer srv.Close()
	c, err := New(&rest.Config{Host: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lw := c.ListerWatcher(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).(informer.KeepingLister)
	for _, keep := range []func(string) bool{nil, func(string) bool { return true }} {
		_, err := lw.ListKeeping(context.Background(), metav1.ListOptions{ResourceVersion: "5", ResourceVersionMatch: metav1.ResourceVersionMatchExact}, keep)
		if !apierrors.IsResourceExpired(err) || !strings.Contains(err.Error(), "too old resource version") {
			t.Errorf("keep %v: error %v, want the server's Expired", keep != nil, err)
		}
	}
}
