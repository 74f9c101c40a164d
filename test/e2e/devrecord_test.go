package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metactl/metactl/internal/hookrecord"
	"github.com/metactl/metactl/internal/testenv"
)

// TestDevRecordDir runs `metactl dev --example hello-world --record-dir
// DIR`: the example's controller, not annotated, has its hook calls
// written into DIR/compositecontroller-hello-world as they happen, a set
// hookrecord.ReadDir reads, the first call being the sample's sync with
// its answer; and `metactl record fetch` finds dev's metactl through the
// kubeconfig dev wrote and fetches the same calls.
func TestDevRecordDir(t *testing.T) {
	recordDir := filepath.Join(t.TempDir(), "recorded")
	d := startDev(t, "--example", "hello-world", "--record-dir", recordDir)

	set := filepath.Join(recordDir, "compositecontroller-hello-world")
	var files []hookrecord.File
	testenv.Eventually(t, 3*time.Minute, "a recorded sync of the sample in "+set, func(context.Context) (bool, error) {
		if d.exited() {
			t.Fatalf("metactl dev exited early: %v", d.err)
		}
		var err error
		if files, err = hookrecord.ReadDir(set); err != nil {
			return false, err
		}
		return len(files) > 0, nil
	})
	first := files[0]
	if first.Name != "0001-sync.json" || first.Controller != "compositecontroller/hello-world" || first.Object != "default/your-name" ||
		first.Code != 200 || !strings.Contains(compactJSON(t, first.Request), `"name":"your-name"`) || !strings.Contains(compactJSON(t, first.Response), `your-name-greeting`) {
		t.Errorf("the first recorded call (%s: %s %s %s, code %d) is not the sample's sync:\nrequest %s\nresponse %s",
			first.Name, first.Controller, first.Hook, first.Object, first.Code, first.Request, first.Response)
	}

	fetched := filepath.Join(t.TempDir(), "fetched")
	out, err := exec.Command(d.cmd.Path, "record", "fetch", "compositecontroller/hello-world", "--record-dir", fetched,
		"--kubeconfig", filepath.Join(d.dir, "kubeconfig")).CombinedOutput()
	if err != nil {
		t.Fatalf("metactl record fetch through dev's kubeconfig: %v\n%s", err, out)
	}
	got, err := hookrecord.ReadDir(fetched)
	if err != nil || len(got) == 0 || !got[0].Time.Equal(first.Time) || compactJSON(t, got[0].Request) != compactJSON(t, first.Request) {
		t.Errorf("fetched %d calls (%v); want those of %s, from its first", len(got), err, set)
	}
	d.interrupt(t, time.Minute)
}
