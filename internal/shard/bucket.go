package shard

import (
	"fmt"
	"hash/fnv"
	"math/bits"
	"slices"
	"strings"
)

// MaxBuckets is the largest number of buckets an install may have: enough
// for hundreds of replicas, few enough that a replica's Leases stay cheap
// to renew.
const MaxBuckets = 1024

// Bucket is the index of a bucket, in [0, Buckets).
type Bucket int

// Hash is the 64-bit FNV-1a hash of namespace: the hash the API server's
// shardRange applies to object.metadata.namespace.
func Hash(namespace string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(namespace)) // a hash.Hash never fails to write
	return h.Sum64()
}

// Of returns the bucket of namespace when the hash space is cut into
// buckets equal ranges: floor(Hash(namespace) × buckets / 2⁶⁴). buckets
// must be in [1, MaxBuckets].
func Of(namespace string, buckets int) Bucket {
	hi, _ := bits.Mul64(Hash(namespace), uint64(buckets))
	return Bucket(hi)
}

// start returns the first hash of bucket b of buckets, ceil(b × 2⁶⁴ /
// buckets), as hexadecimal; for b == buckets it is 2⁶⁴, the end of the
// hash space. A hash h is in bucket b exactly when start(b) ≤ h <
// start(b+1), which is Of's floor.
func start(b Bucket, buckets int) string {
	if int(b) >= buckets {
		return "0x10000000000000000"
	}
	// b × 2⁶⁴ / buckets, rounded up: (hi, lo) = (b, 0) divided by buckets.
	q, r := bits.Div64(uint64(b), 0, uint64(buckets))
	if r != 0 {
		q++
	}
	return fmt.Sprintf("0x%016x", q)
}

// Set is a set of the buckets of an install of Buckets buckets. The zero
// Set contains nothing. A Set is a value: its methods do not change it.
type Set struct {
	// Buckets is the number of buckets of the install.
	Buckets int
	// members are the buckets in the set, ascending, each once.
	members []Bucket
}

// NewSet returns the set of the given buckets of an install of buckets
// buckets; an index out of range is an error.
func NewSet(buckets int, members ...Bucket) (Set, error) {
	if buckets < 1 || buckets > MaxBuckets {
		return Set{}, fmt.Errorf("shard: %d buckets: want 1 to %d", buckets, MaxBuckets)
	}
	m := slices.Clone(members)
	slices.Sort(m)
	m = slices.Compact(m)
	for _, b := range m {
		if b < 0 || int(b) >= buckets {
			return Set{}, fmt.Errorf("shard: bucket %d out of range [0, %d)", b, buckets)
		}
	}
	return Set{Buckets: buckets, members: m}, nil
}

// All returns the set of every bucket of an install of buckets buckets.
func All(buckets int) Set {
	m := make([]Bucket, buckets)
	for i := range m {
		m[i] = Bucket(i)
	}
	return Set{Buckets: buckets, members: m}
}

// Members returns the buckets of s, ascending; the caller may keep it.
func (s Set) Members() []Bucket { return slices.Clone(s.members) }

// Len returns the number of buckets in s.
func (s Set) Len() int { return len(s.members) }

// Has reports whether b is in s.
func (s Set) Has(b Bucket) bool {
	_, found := slices.BinarySearch(s.members, b)
	return found
}

// Contains reports whether the objects of namespace belong to s: the
// client side of Selector.
func (s Set) Contains(namespace string) bool {
	if len(s.members) == 0 {
		return false
	}
	return s.Has(Of(namespace, s.Buckets))
}

// Equal reports whether s and t hold the same buckets of the same install.
func (s Set) Equal(t Set) bool {
	return s.Buckets == t.Buckets && slices.Equal(s.members, t.members)
}

// Selector returns the API server's shardSelector (ListOptions) for the
// objects of s: one shardRange over object.metadata.namespace per run of
// adjacent buckets, joined with ||. It is "" for a set of every bucket (no
// filter is needed) and for the empty set, which no selector expresses:
// a caller must not list for an empty set.
func (s Set) Selector() string {
	if len(s.members) == 0 || len(s.members) == s.Buckets {
		return ""
	}
	var ranges []string
	for i := 0; i < len(s.members); {
		j := i
		for j+1 < len(s.members) && s.members[j+1] == s.members[j]+1 {
			j++
		}
		ranges = append(ranges, fmt.Sprintf("shardRange(object.metadata.namespace, '%s', '%s')",
			start(s.members[i], s.Buckets), start(s.members[j]+1, s.Buckets)))
		i = j + 1
	}
	return strings.Join(ranges, " || ")
}

// String returns s as its buckets, for logs: "3,5-7 of 16".
func (s Set) String() string {
	var b strings.Builder
	for i := 0; i < len(s.members); {
		j := i
		for j+1 < len(s.members) && s.members[j+1] == s.members[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if i == j {
			fmt.Fprintf(&b, "%d", s.members[i])
		} else {
			fmt.Fprintf(&b, "%d-%d", s.members[i], s.members[j])
		}
		i = j + 1
	}
	if b.Len() == 0 {
		b.WriteString("none")
	}
	fmt.Fprintf(&b, " of %d", s.Buckets)
	return b.String()
}
