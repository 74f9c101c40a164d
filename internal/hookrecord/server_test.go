package hookrecord

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	r := NewRecorder(RecorderOptions{})
	r.Enable("decoratorcontroller/d", true)
	record(r, "decoratorcontroller/d", "configmaps/ns/x", 1, 1)
	srv := httptest.NewServer(Handler(r))
	defer srv.Close()
	off := httptest.NewServer(Handler(nil))
	defer off.Close()
	get := func(base, query string) (int, string) {
		resp, err := http.Get(base + Path + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(srv.URL, "?controller=compositecontroller/c"); code != 404 || !strings.Contains(body, `metactl.io/record: "true"`) {
		t.Errorf("a controller not recording: %d %s", code, body)
	}
	if code, body := get(srv.URL, "?controller=c"); code != 400 {
		t.Errorf("no kind: %d %s", code, body)
	}
	if code, body := get(off.URL, "?controller=decoratorcontroller/d"); code != 404 || !strings.Contains(body, "--record=false") {
		t.Errorf("recording off: %d %s", code, body)
	}
	set, err := Fetch(context.Background(), http.DefaultClient, srv.URL, "decoratorcontroller/d")
	if err != nil || set.Controller != "decoratorcontroller/d" || len(set.Calls) != 1 || set.Calls[0].Object != "configmaps/ns/x" {
		t.Errorf("Fetch = %+v, %v", set, err)
	}
	if _, err := Fetch(context.Background(), http.DefaultClient, srv.URL, "compositecontroller/c"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("Fetch of a controller not recording: %v", err)
	}
}
