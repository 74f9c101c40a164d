package hookrecord

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/secretdigest"
	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// record gives r a sync call of controller about object with a request
// of n bytes or so, marked as the hook client would see it.
func record(r *Recorder, controller, object string, i, n int) {
	ctx := With(context.Background(), controller, object)
	if !r.Recording(ctx) {
		panic("not recording under With")
	}
	pad := strings.Repeat("x", n)
	r.Record(ctx, &hookclient.TappedCall{Hook: "sync", Start: time.Now(), Duration: time.Millisecond,
		Request: []byte(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, pad)), Code: 200, Response: []byte(`{"children":[]}`)})
}

func requests(calls []Call) string {
	var out []string
	for _, c := range calls {
		out = append(out, string(c.Request[:strings.Index(string(c.Request), ",")]))
	}
	return strings.Join(out, " ")
}

func TestRecorderKeepsTheNewestWithinItsBounds(t *testing.T) {
	if (&Recorder{}).Recording(context.Background()) {
		t.Fatal("a call not marked by With is recorded")
	}
	r := NewRecorder(RecorderOptions{MaxCalls: 3, MaxBytes: 10500}) // three of b's big calls and one of a's, not three
	r.Enable("compositecontroller/a", true)
	r.Enable("compositecontroller/b", true)
	for i := 1; i <= 5; i++ {
		record(r, "compositecontroller/a", "ns/p", i, 10)
	}
	// A controller that does not record keeps nothing, even marked.
	record(r, "compositecontroller/off", "ns/p", 1, 10)
	calls, ok := r.Calls("compositecontroller/a")
	if !ok || requests(calls) != `{"i":3 {"i":4 {"i":5` {
		t.Fatalf("calls of a = %s (recording %v); want the newest 3 of 5", requests(calls), ok)
	}
	if c := calls[0]; c.Controller != "compositecontroller/a" || c.Object != "ns/p" || c.Hook != "sync" || c.Code != 200 || string(c.Response) != `{"children":[]}` {
		t.Errorf("call = %+v", c)
	}
	if _, ok := r.Calls("compositecontroller/off"); ok {
		t.Error("a controller that does not record has calls")
	}

	// The bytes bound drops the oldest calls of any controller: b's big
	// calls push out a's.
	for i := 1; i <= 3; i++ {
		record(r, "compositecontroller/b", "ns/q", i, 3000)
	}
	a, _ := r.Calls("compositecontroller/a")
	b, _ := r.Calls("compositecontroller/b")
	if requests(a) != `{"i":5` || requests(b) != `{"i":1 {"i":2 {"i":3` {
		t.Errorf("after b's big calls: a = %s, b = %s; want a's newest only and all of b's", requests(a), requests(b))
	}
	if r.all.Bytes() > r.opts.MaxBytes {
		t.Errorf("%d bytes kept, over %d", r.all.Bytes(), r.opts.MaxBytes)
	}
	// A call larger than the whole bound is not kept.
	record(r, "compositecontroller/a", "ns/p", 6, int(r.opts.MaxBytes))
	if a, _ := r.Calls("compositecontroller/a"); requests(a) != `{"i":5` {
		t.Errorf("after a call larger than the bound: a = %s", requests(a))
	}

	// Turned off, a controller's calls are dropped.
	r.Enable("compositecontroller/b", false)
	if _, ok := r.Calls("compositecontroller/b"); ok || r.all.Len() != 1 {
		t.Errorf("b's calls kept after it stopped recording (%d calls in all)", r.all.Len())
	}
}

func TestRecorderWritesEachCallToDir(t *testing.T) {
	dir := t.TempDir()
	set := filepath.Join(dir, "decoratorcontroller-d")
	// A set already there is continued.
	if err := WriteDir(set, 1, []Call{{Hook: "sync", Request: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	r := NewRecorder(RecorderOptions{Dir: dir, MaxCalls: 1})
	r.Enable("decoratorcontroller/d", true)
	record(r, "decoratorcontroller/d", "configmaps/ns/x", 1, 1)
	ctx := With(context.Background(), "decoratorcontroller/d", "configmaps/ns/x")
	r.Record(ctx, &hookclient.TappedCall{Hook: "finalize", Start: time.Now(), Request: []byte(`{"finalizing":true}`), Code: 500, Err: errors.New("sync hook: 500")})
	files, err := ReadDir(set)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 || files[1].Name != "0002-sync.json" || files[2].Name != "0003-finalize.json" {
		t.Fatalf("files = %+v", files)
	}
	if f := files[2]; f.Code != 500 || f.Error != "sync hook: 500" || f.Response != nil || f.Object != "configmaps/ns/x" {
		t.Errorf("failed call written as %+v", f.Call)
	}
}

func TestRecorderDirBoundsAndNumbers(t *testing.T) {
	dir := t.TempDir()
	set := filepath.Join(dir, "compositecontroller-c")
	r := NewRecorder(RecorderOptions{Dir: dir, MaxBytes: 4096})
	r.Enable("compositecontroller/c", true)
	record(r, "compositecontroller/c", "ns/p", 1, 10)
	// A call larger than MaxBytes is not written either.
	record(r, "compositecontroller/c", "ns/p", 2, 8192)
	// Turned off and on again, the controller numbers on: the number its
	// last call took is not reused.
	r.Enable("compositecontroller/c", false)
	r.Enable("compositecontroller/c", true)
	if err := os.Remove(filepath.Join(set, "0001-sync.json")); err != nil {
		t.Fatal(err)
	}
	record(r, "compositecontroller/c", "ns/p", 3, 10)
	files, err := ReadDir(set)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0].Name != "0002-sync.json" || !strings.Contains(string(files[0].Request), `"i": 3,`) {
		t.Fatalf("files = %+v; want only 0002-sync.json, the third call", files)
	}
	entries, _ := os.ReadDir(set)
	if len(entries) != 1 {
		t.Errorf("left in the set: %v", entries)
	}
}

func TestRecorderRedactsWebhookURLCredentials(t *testing.T) {
	dir := t.TempDir()
	r := NewRecorder(RecorderOptions{Dir: dir})
	r.Enable("compositecontroller/c", true)
	ctx := With(context.Background(), "compositecontroller/c", "ns/p")
	request := `{"controller":{"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"spec\":{\"hooks\":{\"sync\":{\"webhook\":{\"url\":\"http://user:pa55word@hook.example/sync?token=t0ken\"}}}}}"}},` +
		`"spec":{"hooks":{"sync":{"webhook":{"url":"http://user:pa55word@hook.example/sync?token=t0ken"}}}}},` +
		`"parent":{"spec":{"link":"http://keep.example/?q=kept"}}}`
	r.Record(ctx, &hookclient.TappedCall{Hook: "sync", Start: time.Now(), Request: []byte(request), Code: 200, Response: []byte(`{}`)})
	calls, _ := r.Calls("compositecontroller/c")
	files, err := ReadDir(filepath.Join(dir, "compositecontroller-c"))
	if err != nil || len(calls) != 1 || len(files) != 1 {
		t.Fatalf("calls %d, files %d, %v", len(calls), len(files), err)
	}
	var written bytes.Buffer
	if err := json.Compact(&written, files[0].Request); err != nil {
		t.Fatal(err)
	}
	unescape := strings.NewReplacer(`\u003c`, "<", `\u003e`, ">")
	for _, got := range []string{unescape.Replace(string(calls[0].Request)), unescape.Replace(written.String())} {
		if strings.Contains(got, "pa55word") || strings.Contains(got, "t0ken") || strings.Contains(got, "user:") {
			t.Errorf("a credential of the webhook url is recorded:\n%s", got)
		}
		if !strings.Contains(got, `"url":"http://<redacted>@hook.example/sync?token=<redacted>"`) {
			t.Errorf("the webhook url is not kept with its host and path:\n%s", got)
		}
		if !strings.Contains(got, `http://keep.example/?q=kept`) {
			t.Errorf("a URL outside the controller object changed:\n%s", got)
		}
	}
}

// TestRecorderKeepsNoSecretInError: a hook that fails echoing the Secret
// data of its request, called through metactl's hook client, is recorded
// with that data nowhere: digests in the request, the error scrubbed.
func TestRecorderKeepsNoSecretInError(t *testing.T) {
	const value = "hunter2-recorded-8c1f"
	encoded := base64.StdEncoding.EncodeToString([]byte(value))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "cannot use "+value+" from "+string(body))
	}))
	defer srv.Close()
	r := NewRecorder(RecorderOptions{})
	r.Enable("compositecontroller/c", true)
	c := hookclient.NewClient(hookclient.Options{Tap: r})
	request := map[string]any{"parent": map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "s", "namespace": "ns"}, "data": map[string]any{"password": encoded}}}
	url := srv.URL
	ctx := With(context.Background(), "compositecontroller/c", "ns/s")
	if err := c.Call(ctx, "c", "sync", &v1alpha1.Hook{Webhook: &v1alpha1.Webhook{URL: &url}}, request, &hooks.CompositeSyncResponse{}, hookclient.CallOptions{}); err == nil {
		t.Fatal("a 500 succeeded")
	}
	calls, _ := r.Calls("compositecontroller/c")
	if len(calls) != 1 || calls[0].Code != 500 || calls[0].Error == "" {
		t.Fatalf("calls = %+v", calls)
	}
	for _, leaked := range []string{value, encoded} {
		if strings.Contains(calls[0].Error, leaked) || strings.Contains(string(calls[0].Request), leaked) {
			t.Errorf("the recorded call holds %q: error %q, request %s", leaked, calls[0].Error, calls[0].Request)
		}
	}
	if !strings.Contains(calls[0].Error, "cannot use") || !strings.Contains(string(calls[0].Request), secretdigest.Salted(encoded)) {
		t.Errorf("the recorded call lost what it should keep: error %q, request %s", calls[0].Error, calls[0].Request)
	}
}
