package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// Work-queue metrics, labelled by queue name (one queue per controller).
var (
	workqueueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "metactl_workqueue_depth", Help: "Current depth of the work queue.",
	}, []string{"name"})
	workqueueAdds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "metactl_workqueue_adds_total", Help: "Adds handled by the work queue.",
	}, []string{"name"})
	workqueueLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "metactl_workqueue_queue_duration_seconds", Help: "Time an item waits in the queue before being processed.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 4, 12),
	}, []string{"name"})
	workqueueWorkDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "metactl_workqueue_work_duration_seconds", Help: "Time processing an item takes.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 4, 12),
	}, []string{"name"})
	workqueueUnfinished = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "metactl_workqueue_unfinished_work_seconds", Help: "Seconds of work in progress not yet observed by work_duration.",
	}, []string{"name"})
	workqueueLongestRunning = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "metactl_workqueue_longest_running_processor_seconds", Help: "Seconds the longest running processor has been running.",
	}, []string{"name"})
	workqueueRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "metactl_workqueue_retries_total", Help: "Retries (rate-limited re-adds) handled by the work queue.",
	}, []string{"name"})
)

// queueVecs are the work-queue vectors (see ForgetController).
var queueVecs = []*prometheus.MetricVec{
	workqueueDepth.MetricVec, workqueueAdds.MetricVec, workqueueLatency.MetricVec, workqueueWorkDuration.MetricVec,
	workqueueUnfinished.MetricVec, workqueueLongestRunning.MetricVec, workqueueRetries.MetricVec,
}

type queueMetrics struct{}

func (queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return workqueueDepth.WithLabelValues(name)
}
func (queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return workqueueAdds.WithLabelValues(name)
}
func (queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return workqueueLatency.WithLabelValues(name)
}
func (queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return workqueueWorkDuration.WithLabelValues(name)
}
func (queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return queueGauge{workqueueUnfinished, name}
}
func (queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return queueGauge{workqueueLongestRunning, name}
}

// queueGauge is a gauge the work queue sets periodically while it runs
// (every 500ms): it looks its series up at each Set, so that a queue of
// the same name (a controller started again, or one of the other kind
// with the same name) makes again the series ForgetQueue deleted.
type queueGauge struct {
	vec  *prometheus.GaugeVec
	name string
}

func (g queueGauge) Set(v float64) { g.vec.WithLabelValues(g.name).Set(v) }

// ForgetQueue deletes the series of the queue named name that would keep
// their last value once it has stopped: the seconds of unfinished work
// and of the longest running processor (a sync in progress when it
// stopped would otherwise read as one running for ever). Call it once the
// queue is shut down, when it sets them no more.
func ForgetQueue(name string) {
	workqueueUnfinished.DeleteLabelValues(name)
	workqueueLongestRunning.DeleteLabelValues(name)
}
func (queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return workqueueRetries.WithLabelValues(name)
}
