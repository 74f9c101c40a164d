package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestShardCaches: the sharded caches' filter modes and objects per
// bucket are read from the functions set, at each scrape.
func TestShardCaches(t *testing.T) {
	r := prometheus.NewRegistry()
	r.MustRegister(shardCaches{})
	SetShardFilterModes(func() map[string]string { return map[string]string{"/v1, Resource=configmaps": "server"} })
	SetShardBucketCounts(func() map[int]int { return map[int]int{3: 7} })
	want := `
# HELP metactl_shard_bucket_cached_objects Objects of namespaced resources cached for each bucket this replica holds, all resources together (whole informers left out).
# TYPE metactl_shard_bucket_cached_objects gauge
metactl_shard_bucket_cached_objects{bucket="3"} 7
# HELP metactl_shard_filter_mode 1 for the filter mode of each resource's informer held to this replica's buckets: server (the API server filtered its list by shardSelector) or client (the server sent every object, which metactl filtered); no series for unfiltered informers.
# TYPE metactl_shard_filter_mode gauge
metactl_shard_filter_mode{mode="server",resource="/v1, Resource=configmaps"} 1
`
	if err := testutil.GatherAndCompare(r, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
