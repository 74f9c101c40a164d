package shard

import (
	"hash/fnv"
	"strconv"
)

// clusterKey is the rendezvous key of the cluster bucket, beside the
// keys of the hash buckets ("0", "1", …), which it cannot equal.
const clusterKey = "cluster"

// bucketKey returns the rendezvous key of bucket b: its index, or
// clusterKey for the cluster bucket (b < 0). It is also b's name in
// Lease names and metric labels.
func bucketKey(b Bucket) string {
	if b < 0 {
		return clusterKey
	}
	return strconv.Itoa(int(b))
}

// score is the rendezvous weight of member for the bucket of key: the
// 64-bit FNV-1a hash of key, a NUL byte and member, passed through
// splitmix64's finalizer. FNV-1a alone mixes its last bytes poorly into
// its high bits (see docs/scaling.md), so identities that differ only at
// their end would win alike; the finalizer spreads every input bit over
// the whole word.
func score(key, member string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key)) // a hash.Hash never fails to write
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(member))
	return mix64(h.Sum64())
}

// mix64 is splitmix64's finalizer: a bijection of uint64 in which each
// input bit flips each output bit with probability close to one half.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// owner returns the member that rendezvous hashing assigns the bucket of
// key to: the one with the highest score, ties broken by the smaller
// identity, so every replica that sees the same members picks the same
// one. It is "" when there are no members.
func owner(key string, members []string) string {
	var best string
	var bestScore uint64
	for i, m := range members {
		s := score(key, m)
		if i == 0 || s > bestScore || (s == bestScore && m < best) {
			best, bestScore = m, s
		}
	}
	return best
}

// Assign returns the buckets of an install of buckets buckets that
// rendezvous hashing assigns to identity among members, and whether it
// assigns identity the cluster bucket. Every replica that sees the same
// members computes the same assignment; adding a member moves to it only
// buckets it gains, and removing one moves only the buckets it had.
// identity need not be among members (then it is assigned nothing).
func Assign(buckets int, members []string, identity string) (Set, bool) {
	in := false
	for _, m := range members {
		in = in || m == identity
	}
	if !in {
		return Set{Buckets: buckets}, false
	}
	var mine []Bucket
	for b := range Bucket(buckets) {
		if owner(bucketKey(b), members) == identity {
			mine = append(mine, b)
		}
	}
	return Set{Buckets: buckets, members: mine}, owner(clusterKey, members) == identity
}
