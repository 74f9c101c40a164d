package shard

import (
	"fmt"
	"slices"
	"testing"
)

// families are sets of replica identities as deployments name them: a
// StatefulSet's ordinals, which differ only in their last byte, and a
// Deployment's hostname_uuid.
var families = map[string][]string{
	"ordinals": {"metactl-0", "metactl-1", "metactl-2", "metactl-3"},
	"hostname_uuid": {
		"metactl-7c9d5b6f4-2xk8q_1b4e28ba-2fa1-11d2-883f-0016d3cca427",
		"metactl-7c9d5b6f4-9zt4m_6fa459ea-ee8a-3ca4-894e-db77e160355e",
		"metactl-7c9d5b6f4-hq2ls_886313e1-3b8a-5372-9b90-0c9aee199e5d",
		"metactl-7c9d5b6f4-wlr7v_a987fbc9-4bed-3078-cf07-9141ba07c9f3",
	},
	"suffixes": {"replica-a", "replica-b", "replica-c", "replica-d"},
}

// owners returns, per bucket, the members Assign gives it to, and the
// members it gives the cluster bucket to.
func owners(buckets int, members []string) ([][]string, []string) {
	per := make([][]string, buckets)
	var cl []string
	for _, m := range members {
		set, withCluster := Assign(buckets, members, m)
		for _, b := range set.Members() {
			per[b] = append(per[b], m)
		}
		if withCluster {
			cl = append(cl, m)
		}
	}
	return per, cl
}

// TestAssignIsAPartition checks that every bucket, and the cluster
// bucket, goes to exactly one member, whatever the order in which a
// replica lists the members.
func TestAssignIsAPartition(t *testing.T) {
	for name, members := range families {
		per, cl := owners(32, members)
		for b, o := range per {
			if len(o) != 1 {
				t.Errorf("%s: bucket %d assigned to %v, want exactly one member", name, b, o)
			}
		}
		if len(cl) != 1 {
			t.Errorf("%s: cluster bucket assigned to %v, want exactly one member", name, cl)
		}
		reversed := slices.Clone(members)
		slices.Reverse(reversed)
		for _, m := range members {
			a, ac := Assign(32, members, m)
			r, rc := Assign(32, reversed, m)
			if !a.Equal(r) || ac != rc {
				t.Errorf("%s: %s is assigned %v (cluster %v) or %v (cluster %v) depending on the order of the members", name, m, a, ac, r, rc)
			}
		}
	}
	if s, c := Assign(32, families["ordinals"], "stranger"); s.Len() != 0 || c {
		t.Errorf("a replica not among the members is assigned %v, cluster %v", s, c)
	}
}

// TestAssignIsBalanced checks that 32 buckets over 4 members give each
// between 1 and 14, for identities that differ only in their last byte
// too (which FNV-1a alone, without the finalizer, spreads badly).
func TestAssignIsBalanced(t *testing.T) {
	for name, members := range families {
		for _, m := range members {
			set, _ := Assign(32, members, m)
			if set.Len() == 0 || set.Len() > 14 {
				t.Errorf("%s: %s is assigned %d of 32 buckets (%v), want 1 to 14", name, m, set.Len(), set)
			}
		}
	}
}

// TestAssignMovesOnlyTheLeaversBuckets checks that removing a member
// moves only the buckets it had, and adding one moves only buckets to it.
func TestAssignMovesOnlyTheLeaversBuckets(t *testing.T) {
	for name, members := range families {
		before, _ := owners(32, members)
		after, _ := owners(32, members[1:])
		for b := range before {
			if before[b][0] != members[0] && after[b][0] != before[b][0] {
				t.Errorf("%s: removing %s moved bucket %d from %s to %s", name, members[0], b, before[b][0], after[b][0])
			}
		}
	}
}

// TestAssignSpreadsTheLeaversBuckets checks that the buckets of a member
// that leaves go to several of the others, not all to one: without a
// well-mixed hash (FNV-1a alone), the scores of identities that differ
// only at their end are ordered alike for every bucket, and one member
// would inherit every bucket of another.
func TestAssignSpreadsTheLeaversBuckets(t *testing.T) {
	single, leavers := 0, 0
	for f := range 500 {
		members := make([]string, 4)
		for i := range members {
			members[i] = fmt.Sprintf("metactl-%d", 4*f+i)
		}
		before, _ := owners(32, members)
		after, _ := owners(32, members[1:])
		takers := map[string]bool{}
		for b := range before {
			if before[b][0] == members[0] {
				takers[after[b][0]] = true
			}
		}
		if had, _ := Assign(32, members, members[0]); had.Len() >= 4 {
			leavers++
			if len(takers) == 1 {
				single++
			}
		}
	}
	// With a random hash, 4+ buckets all go to one of 3 others with
	// probability at most 3 × 3⁻⁴ ≈ 4%.
	if single*100 > leavers*5 {
		t.Errorf("of %d members leaving with 4 or more buckets, %d handed all of them to a single other member", leavers, single)
	}
}
