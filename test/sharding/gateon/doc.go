// Package gateon runs the end-to-end test of sharding
// (test/sharding/internal/shardtest) against kube-apiserver with the ShardedListAndWatch feature gate: the API server filters lists and watches by shardSelector (mode server).
// Its tests are built with -tags integration.
package gateon
