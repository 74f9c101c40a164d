/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hookclient

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestDecodedSize(t *testing.T) {
	for body, want := range map[string]int64{
		`{}`:                         2 + decodedPerObject,
		`[]`:                         2 + decodedPerArray,
		`{"a":[1,"x"]}`:              13 + decodedPerObject + decodedPerValue + decodedPerArray + 2*decodedPerValue,
		`{"a":"x\"y,{[","b":-1.5e3}`: 26 + decodedPerObject + 4*decodedPerValue,
		`[true, false, null]`:        19 + decodedPerArray + 3*decodedPerValue,
	} {
		if got := decodedSize([]byte(body)); got != want {
			t.Errorf("decodedSize(%s) = %d, want %d", body, got, want)
		}
	}
}

// TestDecodedSizeIsAnUpperBound decodes answers of the shapes whose cost
// the estimate's constants come from, and checks the estimate is at least
// the live heap they take.
func TestDecodedSizeIsAnUpperBound(t *testing.T) {
	shapes := map[string]string{
		"long strings":    `{"children":[` + strings.Repeat(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"k":"`+strings.Repeat("x", 2000)+`"}},`, 999) + `{}]}`,
		"many short keys": `{"children":[` + strings.Repeat(`{"kind":"Secret","data":{"a":"dmFsdWU=","b":"dmFsdWU=","c":"dmFsdWU=","d":"dmFsdWU=","e":"dmFsdWU="}},`, 9999) + `{}]}`,
		"numbers":         `{"status":{"n":[` + strings.Repeat(`1,`, 99999) + `1]}}`,
		"tiny objects":    `{"status":{"n":[` + strings.Repeat(`{"a":0},`, 99999) + `{}]}}`,
	}
	for name, body := range shapes {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var v any
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(v)
		live := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		if est := decodedSize([]byte(body)); est < live {
			t.Errorf("%s: estimate %d bytes, below the %d bytes decoding took", name, est, live)
		}
	}
}

// TestHoldKeepsTheDecodedBudget: an answer's part of the decoded budget
// is given back as Call returns, or, with a Hold (CallOptions.Hold), kept
// until the next call with the same Hold or Release.
func TestHoldKeepsTheDecodedBudget(t *testing.T) {
	body := statusAnswer(200 << 10)
	want := decodedSize([]byte(body))
	c := NewClient(Options{})
	url := serve(t, answer(body)).URL
	if err := callSync(c, context.Background(), url, 0); err != nil {
		t.Fatal(err)
	}
	if n := c.DecodedBytesInUse(); n != 0 {
		t.Fatalf("without a hold, %d decoded bytes in use after the call", n)
	}
	hold := NewHold()
	for range 2 {
		if err := callSyncWith(c, context.Background(), url, 0, CallOptions{Hold: hold}); err != nil {
			t.Fatal(err)
		}
		if n := c.DecodedBytesInUse(); n != want {
			t.Fatalf("under a hold, %d decoded bytes in use after the call, want one answer's %d", n, want)
		}
	}
	hold.Release()
	hold.Release()
	if n := c.DecodedBytesInUse(); n != 0 {
		t.Errorf("after release, %d decoded bytes in use", n)
	}
}

// TestDecodedBudget: an answer whose decoded estimate exceeds the budget
// is refused whatever its size in bytes; one that does not fit beside the
// answers held waits for them, up to its hook's timeout, then fails with a
// BudgetError naming the flag, and is decoded once they are released.
func TestDecodedBudget(t *testing.T) {
	const budget = 4 << 20
	c := NewClient(Options{DecodedBudgetBytes: budget})

	tiny := `{"status":{"n":[` + strings.Repeat(`{"a":0},`, 20000) + `{}]}}` // 160 KB, about 6 MB decoded
	err := callSync(c, context.Background(), serve(t, answer(tiny)).URL, 0)
	var re *ResponseError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "--hook-decoded-budget-bytes") {
		t.Fatalf("an answer of 160 KB decoding to about 6 MB, budget 4 MiB: err = %v, want a ResponseError naming the flag", err)
	}

	big := statusAnswer(3 << 20)
	url := serve(t, answer(big)).URL
	hold := NewHold()
	if err := callSyncWith(c, context.Background(), url, 0, CallOptions{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	err = callSync(c, context.Background(), url, 200*time.Millisecond)
	var be *BudgetError
	if !errors.As(err, &be) || be.Flag != "--hook-decoded-budget-bytes" || !strings.Contains(err.Error(), "--hook-decoded-budget-bytes") {
		t.Fatalf("a second 3 MiB answer beside one held, budget 4 MiB: err = %v, want a BudgetError naming --hook-decoded-budget-bytes", err)
	}
	done := make(chan error, 1)
	go func() { done <- callSync(c, context.Background(), url, 10*time.Second) }()
	until(t, "the call to wait for room", func() bool {
		c.decoded.mu.Lock()
		defer c.decoded.mu.Unlock()
		return c.decoded.waiters == 1
	})
	hold.Release()
	if err := <-done; err != nil {
		t.Fatalf("once the held answer is released: %v", err)
	}
	if n := c.DecodedBytesInUse(); n != 0 {
		t.Errorf("%d decoded bytes in use after every call", n)
	}
}
