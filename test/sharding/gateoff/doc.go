// Package gateoff runs the end-to-end test of sharding
// (test/sharding/internal/shardtest) against kube-apiserver without the ShardedListAndWatch feature gate: the API server sends everything and metactl filters (mode client).
// Its tests are built with -tags integration.
package gateoff
