package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/util/workqueue"
)

// Registry holds every metactl metric.
var Registry = prometheus.NewRegistry()

var (
	// HookRequests counts hook calls by controller, hook and HTTP code
	// ("error" when no response came).
	HookRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "metactl_hook_requests_total",
		Help: "Hook calls by controller, hook (sync, finalize, customize) and HTTP code; code is \"error\" when no answer came.",
	}, []string{"controller", "hook", "code"})
	// HookDuration observes the latency of hook calls.
	HookDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "metactl_hook_duration_seconds",
		Help:    "Latency of hook calls.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	}, []string{"controller", "hook"})
	// Syncs counts syncs by controller, result (success, error) and
	// trigger: the cause of the first of the sync's triggers (see
	// trigger.Cause), so that the sum over triggers is the number of syncs.
	Syncs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "metactl_syncs_total",
		Help: "Syncs of parents or decorated objects by controller, result (success, error) and trigger: the cause of the sync's first trigger (object, dependent, related, resync, resync-after, retry, start, handover); a sync with several triggers counts once, under its first.",
	}, []string{"controller", "result", "trigger"})
	// HistoryBytes is the estimated memory of the record of syncs
	// (internal/history), all controllers together.
	HistoryBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "metactl_history_bytes",
		Help: "Estimated memory held by the record of the last syncs of each object (metactl explain), all controllers together; bounded by --history-max-bytes.",
	})
	// HistoryEvictions counts the objects whose record was dropped for
	// the memory budget.
	HistoryEvictions = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "metactl_history_evictions_total",
		Help: "Objects whose record of syncs was dropped to keep within --history-max-bytes: those whose newest sync succeeded first, each synced longest ago first.",
	})
	// RecordedCalls is the number of recorded hook calls held
	// (internal/hookrecord.Recorder), all controllers together.
	RecordedCalls = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "metactl_hook_record_calls",
		Help: "Recorded hook calls held in memory (controllers annotated metactl.io/record), all controllers together; bounded by --record-max-calls per controller.",
	})
	// RecordedBytes is their size.
	RecordedBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "metactl_hook_record_bytes",
		Help: "Bytes of the recorded hook calls held in memory, all controllers together; bounded by --record-max-bytes.",
	})
	// RecordEvictions counts the recorded calls dropped for the bounds.
	RecordEvictions = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "metactl_hook_record_evictions_total",
		Help: "Recorded hook calls dropped, the oldest first, to keep within --record-max-calls (per controller) or --record-max-bytes (all together).",
	})
	// UnsettledSyncs counts syncs whose hook still asked for writes after
	// the most calls one sync makes (see engine.MaxRounds).
	UnsettledSyncs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "metactl_syncs_unsettled_total",
		Help: "Syncs whose hook did not reach a fixed point (an answer asking for no write) within the calls one sync makes; the object is retried with backoff.",
	}, []string{"controller"})
	// SyncDuration observes the duration of syncs.
	SyncDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "metactl_sync_duration_seconds",
		Help:    "Duration of one sync, hook call included.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	}, []string{"controller"})
	// ObjectWrites counts the writes a controller makes, by verb (create,
	// update, patch, delete) and what was written (child, status, finalizer,
	// ownership).
	ObjectWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "metactl_object_writes_total",
		Help: "Writes to the API server by controller, verb and target (child, status, finalizer, ownership).",
	}, []string{"controller", "verb", "target"})
	// UncachedReads counts reads that bypass the informer cache.
	UncachedReads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "metactl_uncached_reads_total",
		Help: "Reads that bypass the informer cache, by controller and reason.",
	}, []string{"controller", "reason"})
	// APIRequests counts every API request by verb (HTTP method) and code.
	APIRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "metactl_api_requests_total",
		Help: "Requests to the API server by HTTP method and code.",
	}, []string{"verb", "code"})
	// APIInFlight is the number of API requests in flight that the
	// adaptive limit counts (internal/throttle: every request but
	// watches and Leases).
	APIInFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "metactl_api_requests_in_flight",
		Help: "Requests to the API server sent and not yet answered, watches and Leases excepted.",
	})
	// APIInFlightCap is the adaptive limit's cap on APIInFlight: 0 while
	// there is none (until the API server first answers 429).
	APIInFlightCap = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "metactl_api_requests_in_flight_cap",
		Help: "Most requests to the API server in flight at once, watches and Leases excepted, as lowered by the server's 429 answers and raised by its other answers; 0 while there is no cap (until the first 429).",
	})
	// ControllerReady follows each controller object's Ready condition: 1
	// when True, 0 when False; no series once the object is gone.
	ControllerReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "metactl_controller_ready",
		Help: "1 when the controller object's Ready condition is True (it runs with synced caches), 0 when False (it does not run, or its hooks' credentials fail); no series while it starts again or once the object is gone.",
	}, []string{"kind", "controller"})
	// HookTimeout is the timeout of each hook of each running controller.
	HookTimeout = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "metactl_hook_timeout_seconds",
		Help: "Timeout of each hook (sync, finalize, customize) of each running controller: its webhook's timeout, else the default 10s.",
	}, []string{"controller", "hook"})
	// Leader is 1 while this process runs the controllers.
	Leader = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "metactl_leader",
		Help: "1 while this process runs the controllers: it holds the leader lease, or runs without leader election; else 0.",
	})
	// ShardBucketOwned is 1 for each bucket active on this replica, 0
	// once given up or lost (internal/shard); bucket is the index, or
	// "cluster".
	ShardBucketOwned = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "metactl_shard_bucket_owned",
		Help: "1 while the bucket is active on this replica (its parents are synced here), 0 once given up or lost; bucket is the index, or \"cluster\" for the bucket of the controllers that run whole.",
	}, []string{"bucket"})
	// ShardBucketSyncs counts the syncs begun per bucket on this replica
	// (internal/shard Gate.Begin); bucket as ShardBucketOwned's.
	ShardBucketSyncs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "metactl_shard_bucket_syncs_total",
		Help: "Syncs begun on this replica for the parents of each bucket; bucket is the index, or \"cluster\" for the controllers that run whole.",
	}, []string{"bucket"})
	// ShardMembers is the number of live members this replica sees.
	ShardMembers = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "metactl_shard_members",
		Help: "Live replicas this replica sees sharing the buckets (member Leases renewed within the lease duration), itself included; 0 without sharding.",
	})
	// ShardMembersIgnored is the number of live member Leases this
	// replica ignores because they announce another number of buckets.
	ShardMembersIgnored = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "metactl_shard_members_ignored",
		Help: "Live member Leases this replica ignores because they announce another number of buckets (--shard-buckets differs between replicas).",
	})
	// ShardHandovers counts the buckets this replica gained, released
	// (gave up with its Lease) and lost (could not renew).
	ShardHandovers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "metactl_shard_handovers_total",
		Help: "Buckets this replica started working on (gained), gave up and released to another replica (released), or stopped working on because it could not renew their Lease (lost).",
	}, []string{"direction"})
)

var registerOnce sync.Once

// Register registers every metric with Registry, plus Go and process
// collectors, and installs client-go's work-queue metrics provider. It
// is idempotent.
func Register() {
	registerOnce.Do(func() {
		Registry.MustRegister(metactlCollectors()...)
		Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		workqueue.SetProvider(queueMetrics{})
	})
}

// metactlCollectors are the collectors of every metactl_* metric, which
// Register registers (README.md's list of metrics names each: see
// TestReadmeListsEveryMetric).
func metactlCollectors() []prometheus.Collector {
	return []prometheus.Collector{HookRequests, HookDuration, Syncs, UnsettledSyncs, SyncDuration, ObjectWrites, UncachedReads, HistoryBytes, HistoryEvictions,
		RecordedCalls, RecordedBytes, RecordEvictions,
		APIRequests, APIInFlight, APIInFlightCap, cachedObjects{}, shardCaches{}, ControllerReady, HookTimeout, Leader,
		ShardBucketOwned, ShardBucketSyncs, ShardMembers, ShardMembersIgnored, ShardHandovers, hookResponseBytes, hookDecodedBytes,
		hookRequestBytes,
		workqueueDepth, workqueueAdds, workqueueLatency, workqueueWorkDuration, workqueueUnfinished,
		workqueueLongestRunning, workqueueRetries}
}

// ObserveHookCall records one hook call; code 0 means no HTTP answer.
func ObserveHookCall(controller, hook string, code int, d time.Duration) {
	HookRequests.WithLabelValues(controller, hook, HookCode(code)).Inc()
	HookDuration.WithLabelValues(controller, hook).Observe(d.Seconds())
}

// HookCode returns the code label of metactl_hook_requests_total for a
// hook's HTTP status: "error" for 0 (no answer), the number for a status
// net/http names (200, 304, 404, 500, ...: about 60 of them), and "other"
// for any other, so that a hook choosing its status among the 900 a
// response line may carry makes at most that many series per controller
// and hook.
func HookCode(code int) string {
	switch {
	case code == 0:
		return "error"
	case http.StatusText(code) != "":
		return strconv.Itoa(code)
	default:
		return "other"
	}
}

// controllerVecs are the vectors with a controller label: the name of a
// CompositeController or DecoratorController (see ForgetController).
var controllerVecs = []*prometheus.MetricVec{
	HookRequests.MetricVec, HookDuration.MetricVec, Syncs.MetricVec, UnsettledSyncs.MetricVec,
	SyncDuration.MetricVec, ObjectWrites.MetricVec, UncachedReads.MetricVec, ControllerReady.MetricVec,
	HookTimeout.MetricVec,
}

// ForgetController deletes every series of the controllers named name:
// those of each vector with a controller label, whatever its other labels
// (ControllerReady's kind included), and those of its work queue (the
// workqueue vectors' name label). Call it once no controller object of
// that name remains, of either kind: the two kinds share the series of a
// name. A sync abandoned after the stop grace period that ends later may
// record one series again.
func ForgetController(name string) {
	for _, v := range controllerVecs {
		v.DeletePartialMatch(prometheus.Labels{"controller": name})
	}
	for _, v := range queueVecs {
		v.DeletePartialMatch(prometheus.Labels{"name": name})
	}
}

var (
	informerCounter   atomic.Pointer[func() map[string]int]
	cachedObjectsDesc = prometheus.NewDesc("metactl_informer_objects",
		"Objects cached by the informer of each resource.", []string{"resource"}, nil)
)

var watchEventCounter atomic.Pointer[func() map[string]int64]

var watchEventsDesc = prometheus.NewDesc("metactl_informer_watch_events_total",
	"Watch events (added, modified, deleted) the informers of each resource received from the API server, before a sharded informer's filter.", []string{"resource"}, nil)

// SetWatchEventCounter sets the function that counts the watch events
// received by resource, read at each scrape.
func SetWatchEventCounter(f func() map[string]int64) { watchEventCounter.Store(&f) }

// SetInformerCounter sets the function that counts cached objects by
// resource, read at each scrape.
func SetInformerCounter(f func() map[string]int) { informerCounter.Store(&f) }

var hookResponseBytesInFlight atomic.Pointer[func() int64]

// hookResponseBytes reports, at scrape time, the bytes of hook responses
// held in memory (see SetHookResponseBytesInFlight).
var hookResponseBytes = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
	Name: "metactl_hook_response_bytes_in_flight",
	Help: "Bytes of hook responses held in memory now, all controllers together: at most --hook-response-budget-bytes, plus --hook-response-floor-bytes per controller reading a response.",
}, func() float64 {
	if f := hookResponseBytesInFlight.Load(); f != nil {
		return float64((*f)())
	}
	return 0
})

// SetHookResponseBytesInFlight sets the function that reports the bytes
// of hook responses in flight, read at each scrape.
func SetHookResponseBytesInFlight(f func() int64) { hookResponseBytesInFlight.Store(&f) }

var hookDecodedBytesInUse atomic.Pointer[func() int64]

// hookDecodedBytes reports, at scrape time, the estimated memory of the
// decoded hook answers in use (see SetHookDecodedBytesInUse).
var hookDecodedBytes = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
	Name: "metactl_hook_decoded_bytes_in_use",
	Help: "Estimated memory of the objects decoded from hook answers and still in use, all controllers together: at most --hook-decoded-budget-bytes, plus --hook-decoded-floor-bytes per controller using one.",
}, func() float64 {
	if f := hookDecodedBytesInUse.Load(); f != nil {
		return float64((*f)())
	}
	return 0
})

// SetHookDecodedBytesInUse sets the function that reports the estimated
// memory of the decoded hook answers in use, read at each scrape.
func SetHookDecodedBytesInUse(f func() int64) { hookDecodedBytesInUse.Store(&f) }

// cachedObjects reports metactl_informer_objects and
// metactl_informer_watch_events_total at scrape time.
type cachedObjects struct{}

func (cachedObjects) Describe(ch chan<- *prometheus.Desc) {
	ch <- cachedObjectsDesc
	ch <- watchEventsDesc
}

func (cachedObjects) Collect(ch chan<- prometheus.Metric) {
	if f := informerCounter.Load(); f != nil {
		for resource, n := range (*f)() {
			ch <- prometheus.MustNewConstMetric(cachedObjectsDesc, prometheus.GaugeValue, float64(n), resource)
		}
	}
	if f := watchEventCounter.Load(); f != nil {
		for resource, n := range (*f)() {
			ch <- prometheus.MustNewConstMetric(watchEventsDesc, prometheus.CounterValue, float64(n), resource)
		}
	}
}

var (
	shardFilterModes    atomic.Pointer[func() map[string]string]
	shardBucketObjects  atomic.Pointer[func() map[int]int]
	shardBucketParents  atomic.Pointer[func() map[string]int]
	shardFilterModeDesc = prometheus.NewDesc("metactl_shard_filter_mode",
		"1 for the filter mode of each resource's informer held to this replica's buckets: server (the API server filtered its list by shardSelector) or client (the server sent every object, which metactl filtered); no series for unfiltered informers.",
		[]string{"resource", "mode"}, nil)
	shardBucketObjectsDesc = prometheus.NewDesc("metactl_shard_bucket_cached_objects",
		"Objects of namespaced resources cached for each bucket this replica holds, all resources together (whole informers left out).",
		[]string{"bucket"}, nil)
	shardBucketParentsDesc = prometheus.NewDesc("metactl_shard_bucket_parents",
		"Parents (and decorated objects) cached on this replica by bucket, every controller together; bucket is the index, or \"cluster\" for those of the controllers that run whole. A bucket with many more than the others shows a skew of namespaces (docs/scaling.md).",
		[]string{"bucket"}, nil)
)

// SetShardBucketParents sets the function that counts the parents of
// each bucket, read at each scrape (the manager's, over its controllers).
func SetShardBucketParents(f func() map[string]int) { shardBucketParents.Store(&f) }

// SetShardFilterModes sets the function that returns the filter mode
// ("server", "client") of each sharded informer by resource, read at each
// scrape (informer.Factory.FilterModes).
func SetShardFilterModes(f func() map[string]string) { shardFilterModes.Store(&f) }

// SetShardBucketCounts sets the function that counts the cached objects
// of each bucket, read at each scrape (informer.Factory.BucketCounts).
func SetShardBucketCounts(f func() map[int]int) { shardBucketObjects.Store(&f) }

// shardCaches reports metactl_shard_filter_mode,
// metactl_shard_bucket_cached_objects and metactl_shard_bucket_parents at
// scrape time.
type shardCaches struct{}

func (shardCaches) Describe(ch chan<- *prometheus.Desc) {
	ch <- shardFilterModeDesc
	ch <- shardBucketObjectsDesc
	ch <- shardBucketParentsDesc
}

func (shardCaches) Collect(ch chan<- prometheus.Metric) {
	if f := shardFilterModes.Load(); f != nil {
		for resource, mode := range (*f)() {
			ch <- prometheus.MustNewConstMetric(shardFilterModeDesc, prometheus.GaugeValue, 1, resource, mode)
		}
	}
	if f := shardBucketObjects.Load(); f != nil {
		for bucket, n := range (*f)() {
			ch <- prometheus.MustNewConstMetric(shardBucketObjectsDesc, prometheus.GaugeValue, float64(n), strconv.Itoa(bucket))
		}
	}
	if f := shardBucketParents.Load(); f != nil {
		for bucket, n := range (*f)() {
			ch <- prometheus.MustNewConstMetric(shardBucketParentsDesc, prometheus.GaugeValue, float64(n), bucket)
		}
	}
}

// InstrumentTransport counts every request made through rt in
// metactl_api_requests_total by HTTP method and status code ("error" when
// no response came). Use it with rest.Config.Wrap.
func InstrumentTransport(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		code := "error"
		if err == nil {
			code = strconv.Itoa(resp.StatusCode)
		}
		APIRequests.WithLabelValues(req.Method, code).Inc()
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
