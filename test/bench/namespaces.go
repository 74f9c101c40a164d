package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/shard"
)

// parentNamespace is the namespace of parent i when the parents are
// spread over namespaces namespaces (-namespaces): with 0, bench-metactl
// for all, as without the flag; otherwise namespace i mod namespaces of
// generatedNamespace.
func parentNamespace(i, namespaces int) string {
	if namespaces <= 0 {
		return nsMetactl
	}
	return generatedNamespace(i % namespaces)
}

// generatedNamespace is the j-th namespace of the spread: "bench-" and 8
// hexadecimal digits of a hash of j. Sequential names (bench-1 ...
// bench-99) would fall into one or two of the buckets however many there
// are, since FNV-1a's top bits hardly depend on the last bytes
// (docs/scaling.md, "Skew"); names that differ in their first characters
// after the prefix, like generated suffixes, spread evenly. The names are
// the same in every run.
func generatedNamespace(j int) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "metactl-bench-namespace-%d", j)
	return fmt.Sprintf("bench-%08x", h.Sum32())
}

// parentNamespaces are the namespaces of the spread, nil without
// -namespaces.
func parentNamespaces(o options) []string {
	out := make([]string, 0, max(0, o.namespaces))
	for j := range max(0, o.namespaces) {
		out = append(out, generatedNamespace(j))
	}
	return out
}

// trackerFieldSelector keeps the benchmark's informers, which watch every
// namespace when the parents are spread, off the namespaces of the limit
// (whose parents have the same names), the warm-up and the cache phase.
var trackerFieldSelector = strings.Join([]string{
	"metadata.namespace!=" + nsLimit, "metadata.namespace!=" + nsWarmup, "metadata.namespace!=" + nsCache,
}, ",")

// patchParent sets parent i's spec.value.
func (b *bench) patchParent(ctx context.Context, i int, val string) error {
	patch := fmt.Appendf(nil, `{"spec":{"value":%q}}`, val)
	_, err := b.dyn.Resource(parentGVR).Namespace(parentNamespace(i, b.o.namespaces)).Patch(ctx, parentName(i), types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// BucketSpread is how the parents fall into the buckets of the replicas'
// --shard-buckets: the skew the replicas' shares inherit.
type BucketSpread struct {
	Buckets    int `json:"buckets"`
	Namespaces int `json:"namespaces"`
	// Used is the buckets that hold at least one parent; MinParents and
	// MaxParents the fewest and most parents of a used bucket.
	Used       int `json:"used"`
	MinParents int `json:"minParents"`
	MaxParents int `json:"maxParents"`
}

// bucketSpread computes the spread of n parents over namespaces
// namespaces (0: bench-metactl alone) into buckets buckets.
func bucketSpread(n, namespaces, buckets int) BucketSpread {
	s := BucketSpread{Buckets: buckets, Namespaces: max(1, namespaces)}
	if buckets < 1 || buckets > shard.MaxBuckets {
		return s
	}
	per := make([]int, buckets)
	for i := range n {
		per[shard.Of(parentNamespace(i, namespaces), buckets)]++
	}
	used := slices.DeleteFunc(per, func(x int) bool { return x == 0 })
	s.Used = len(used)
	if len(used) > 0 {
		s.MinParents, s.MaxParents = slices.Min(used), slices.Max(used)
	}
	return s
}

func (s BucketSpread) String() string {
	return fmt.Sprintf("%d namespaces in %d of %d buckets, %d to %d parents each", s.Namespaces, s.Used, s.Buckets, s.MinParents, s.MaxParents)
}
