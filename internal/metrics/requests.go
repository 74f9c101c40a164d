package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

var hookRequestBytesInFlight atomic.Pointer[func() int64]

// hookRequestBytes reports, at scrape time, the bytes of the objects the
// syncs in flight hold for their hook requests (see
// SetHookRequestBytesInFlight).
var hookRequestBytes = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
	Name: "metactl_hook_request_bytes_in_flight",
	Help: "Bytes of objects (children, attachments, related objects) held for hook requests now, as counted before decoding, all controllers together: at most --hook-request-budget-bytes.",
}, func() float64 {
	if f := hookRequestBytesInFlight.Load(); f != nil {
		return float64((*f)())
	}
	return 0
})

// SetHookRequestBytesInFlight sets the function that reports the bytes
// held for hook requests, read at each scrape.
func SetHookRequestBytesInFlight(f func() int64) { hookRequestBytesInFlight.Store(&f) }
