package hookrecord

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestWriteReadDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "set")
	calls := []Call{
		{Controller: "compositecontroller/hello", Hook: "sync", Object: "default/a", Time: time.Unix(1, 0).UTC(), Request: json.RawMessage(`{"parent":{}}`), Code: 200, Response: json.RawMessage(`{"children":[]}`)},
		{Controller: "compositecontroller/hello", Hook: "finalize", Object: "default/a", Time: time.Unix(2, 0).UTC(), Request: json.RawMessage(`{"parent":{}}`), Error: "timeout"},
	}
	if n, err := Next(dir); err != nil || n != 1 {
		t.Fatalf("Next of a missing dir = %d, %v; want 1", n, err)
	}
	if err := WriteDir(dir, 1, calls); err != nil {
		t.Fatal(err)
	}
	if err := WriteDir(dir, 9, calls[:1]); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("notes"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := Next(dir); err != nil || n != 10 {
		t.Fatalf("Next = %d, %v; want 10", n, err)
	}
	files, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	if len(files) != 3 || names[0] != "0001-sync.json" || names[1] != "0002-finalize.json" || names[2] != "0009-sync.json" {
		t.Fatalf("ReadDir = %v", names)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, files[0].Response); err != nil {
		t.Fatal(err)
	}
	if files[1].Error != "timeout" || compact.String() != `{"children":[]}` {
		t.Errorf("calls read back differ: %+v", files)
	}
	if err := os.WriteFile(filepath.Join(dir, "0010-sync.json"), []byte(`{"hook":"sync"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadDir(dir); err == nil {
		t.Error("a call without its request was read")
	}
}

func TestWriteDirLeavesNoPartialFile(t *testing.T) {
	dir := t.TempDir()
	// A temporary file of a write cut short is not read as a call.
	if err := os.WriteFile(filepath.Join(dir, ".0001-sync.json.tmp-123"), []byte(`{"hook":`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteDir(dir, 1, []Call{{Hook: "sync", Request: json.RawMessage(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	files, err := ReadDir(dir)
	if err != nil || len(files) != 1 {
		t.Fatalf("ReadDir = %v, %v", files, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("WriteDir left its temporary file: %v", entries)
	}
	if fi, err := os.Stat(filepath.Join(dir, "0001-sync.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, %v", fi, err)
	}
	// A file is replaced by a rename, not written over in place (where a
	// write cut short would leave it truncated): a hard link to the old
	// file keeps the old call whole.
	old := filepath.Join(t.TempDir(), "old.json")
	if err := os.Link(filepath.Join(dir, "0001-sync.json"), old); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	if err := WriteDir(dir, 1, []Call{{Hook: "sync", Request: json.RawMessage(`{"new":true}`)}}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(old); bytes.Contains(b, []byte("new")) {
		t.Errorf("the call was written over in place:\n%s", b)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "0001-sync.json")); err != nil || !bytes.Contains(b, []byte("new")) {
		t.Errorf("the second WriteDir did not replace the call: %s, %v", b, err)
	}
}

// TestWriteDirIsPrivate: a recording holds objects' contents, so the
// directories WriteDir creates are 0700 and its files 0600: readable by
// the user who recorded only.
func TestWriteDirIsPrivate(t *testing.T) {
	root := filepath.Join(t.TempDir(), "record")
	dir := filepath.Join(root, "compositecontroller-x")
	if err := WriteDir(dir, 1, []Call{{Hook: "sync", Request: json.RawMessage(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{root: 0o700, dir: 0o700, filepath.Join(dir, "0001-sync.json"): 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", path, fi.Mode().Perm(), err, want)
		}
	}
}

// TestParseFileName: only NNNN-HOOK.json names are calls; a temporary file
// of a write in progress is not.
func TestParseFileName(t *testing.T) {
	for name, want := range map[string]int{"0001-sync.json": 1, "12-customize.json": 12, "x-sync.json": 0, ".0001-sync.json.tmp-1": 0} {
		if n, _, ok := ParseFileName(name); n != want || ok != (want > 0) {
			t.Errorf("ParseFileName(%q) = %d, %v", name, n, ok)
		}
	}
}
