package hookrecord

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"time"
)

// Call is one recorded hook call. Request and Response are the bodies as
// sent and as answered, but for the data of Secrets, each value replaced
// by its digest ("sha256:" and the hex SHA-256 of the value), as in
// metactl's last-applied annotation.
type Call struct {
	// Controller names the controller: "compositecontroller/NAME" or
	// "decoratorcontroller/NAME".
	Controller string `json:"controller"`
	// Hook is the hook called: "sync", "finalize" or "customize".
	Hook string `json:"hook"`
	// Object names the object synced: "namespace/name", or "name" when
	// cluster-scoped (for a decorator, prefixed by its resource:
	// "deployments.apps/namespace/name").
	Object string `json:"object,omitempty"`
	// Time is when the call was made.
	Time time.Time `json:"time"`
	// DurationSeconds is how long the hook took to answer.
	DurationSeconds float64 `json:"durationSeconds"`
	// Request is the request body.
	Request json.RawMessage `json:"request"`
	// Code is the HTTP status of the answer; 0 when none came.
	Code int `json:"code,omitempty"`
	// Response is the answer's body when the hook answered 200 (or, for a
	// webhook with etag, 304 or 412: then the cached answer that code
	// stands for); absent otherwise.
	Response json.RawMessage `json:"response,omitempty"`
	// Error is why the call failed, when it did (no answer, not 200, or
	// an answer that does not decode).
	Error string `json:"error,omitempty"`
}

// fileName matches the file of a recorded call: its place and its hook.
var fileName = regexp.MustCompile(`^([0-9]+)-([a-z]+)\.json$`)

// FileName returns the name of the i-th call's file (i from 1).
func FileName(i int, c Call) string { return fmt.Sprintf("%04d-%s.json", i, c.Hook) }

// ParseFileName reads the name of a recorded call's file (as FileName
// writes it, or with more or fewer leading zeros): its number and its
// hook; ok is false for any other name.
func ParseFileName(name string) (n int, hook string, ok bool) {
	m := fileName.FindStringSubmatch(name)
	if m == nil {
		return 0, "", false
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return 0, "", false
	}
	return n, m[2], true
}

// WriteDir writes calls into dir, creating it, one file per call, numbered
// from first (from 1): appending a recording to a set already in dir
// starts at its next number (see Next). Each file is written whole or not
// at all: into a temporary file in dir (a name ReadDir ignores), then
// renamed, so that a write cut short (metactl stopped, a full disk) leaves
// no truncated call for ReadDir to reject the set for.
func WriteDir(dir string, first int, calls []Call) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for i, c := range calls {
		b, err := json.MarshalIndent(c, "", "  ")
		if err != nil {
			return fmt.Errorf("encoding call %d: %w", first+i, err)
		}
		if err := writeFileAtomic(dir, FileName(first+i, c), append(b, '\n')); err != nil {
			return err
		}
	}
	return nil
}

// writeFileAtomic writes data into dir/name, mode 0600, through a
// temporary file in dir renamed to name.
func writeFileAtomic(dir, name string, data []byte) (err error) {
	tmp, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Chmod(0o600); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, name))
}

// Next returns the number of the next call in dir: one more than the
// highest recorded there, 1 when none (or dir does not exist).
func Next(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 1, nil
	}
	if err != nil {
		return 0, err
	}
	next := 1
	for _, e := range entries {
		if n, _, ok := ParseFileName(e.Name()); ok {
			next = max(next, n+1)
		}
	}
	return next, nil
}

// File is a recorded call and the file it was read from.
type File struct {
	// Name is the file's name in its directory.
	Name string
	Call
}

// ReadDir reads the recorded calls in dir, in their order; files whose
// names are not those of recorded calls are ignored. A file that does not
// decode, or lacks its request, is an error naming it.
func ReadDir(dir string) ([]File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type numbered struct {
		n    int
		name string
	}
	var names []numbered
	for _, e := range entries {
		if n, _, ok := ParseFileName(e.Name()); ok && !e.IsDir() {
			names = append(names, numbered{n, e.Name()})
		}
	}
	slices.SortFunc(names, func(a, b numbered) int { return a.n - b.n })
	out := make([]File, 0, len(names))
	for _, f := range names {
		b, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			return nil, err
		}
		var c Call
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
		if len(c.Request) == 0 {
			return nil, fmt.Errorf("%s: no request", f.name)
		}
		out = append(out, File{Name: f.name, Call: c})
	}
	return out, nil
}
