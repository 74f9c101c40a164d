package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/metactl/metactl/internal/history"
	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// TestRecordCallOfRefusedEvents: a call whose answer had invalid events
// is recorded as answered (200), its error saying the answer was refused
// and why, not as an invalid response.
func TestRecordCallOfRefusedEvents(t *testing.T) {
	s := &history.Sync{}
	ctx := history.With(context.Background(), s)
	err := &hookclient.ResponseError{Hook: "sync", URL: "http://h", Err: &hooks.EventsError{Err: errors.New(`events[0].type "Warn": must be Normal or Warning`)}}
	recordCall(ctx, "sync", time.Now(), err)
	if c := s.Calls[0]; c.Result != "200" || c.Error != `sync hook answer refused: events[0].type "Warn": must be Normal or Warning` {
		t.Errorf("recorded %+v", c)
	}
}

// TestRecordOnlyWithAStore: without a Store a sync allocates no record;
// with one, each sync is kept under the controller's kind and name.
func TestRecordOnlyWithAStore(t *testing.T) {
	f := newFixture(t, thing(), false, countChildren)
	ctx := context.Background()
	// Only the sync's trace ids (beginTrace) go into its context.
	if got := f.e.beginRecord(ctx, nil); history.From(got) != nil || !trace.SpanContextFromContext(got).IsValid() {
		t.Error("a sync without a Store started a record, or has no trace ids")
	}
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	if f.e.History("ns/p") != nil {
		t.Error("a record kept without a Store")
	}

	store := history.NewStore(history.StoreOptions{})
	f.e.opts.History = store
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	syncs := f.e.History("ns/p")
	if len(syncs) != 1 || syncs[0].Outcome.Result != history.ResultSuccess || len(syncs[0].Calls) == 0 {
		t.Fatalf("recorded %d syncs (%+v), want one success with its calls", len(syncs), syncs)
	}
	if store.Get(history.ControllerID("testcontroller", "test"), "ns/p") == nil {
		t.Error("the record is not under the controller's kind and name")
	}
}
