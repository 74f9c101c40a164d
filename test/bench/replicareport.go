package main

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
)

// ShardingSetup is the multi-replica mode's setup, in the results.
type ShardingSetup struct {
	ReplicaCounts       []int         `json:"replicaCounts,omitempty"`
	ShardBuckets        int           `json:"shardBuckets,omitempty"`
	Namespaces          int           `json:"namespaces"`
	Spread              *BucketSpread `json:"spread,omitempty"`
	ShardedListAndWatch bool          `json:"shardedListAndWatch"`
	// GateEnabled is kube-apiserver's own word on the gate
	// (kubernetes_feature_enabled), nil when it does not say.
	GateEnabled          *bool   `json:"gateEnabled,omitempty"`
	LeaseDurationSeconds float64 `json:"leaseDurationSeconds"`
	KillOne              bool    `json:"killOne,omitempty"`
}

// The targets for the per-replica share with the gate on: at 2
// replicas at most 0.6 of one replica's peak RSS and CPU, at 4 at most
// 0.35.
var maxShareRatio = map[int]float64{2: 0.6, 4: 0.35}

// killMargin is added to the lease duration for the -kill-one target.
const killMargin = 10

// replicaTargets are the sharded variants' checks: no double sync (judged
// always; unknown without the Metactl-Replica header), the per-replica
// share of peak RSS and CPU and the convergence against one replica's
// (speed targets: -counts-only skips them), and every killed replica's
// parents synced again within the lease duration + 10 s.
func (b *bench) replicaTargets() []Target {
	r := b.result
	var ts []Target
	speed := func(t Target, ok bool) {
		switch {
		case r.CountsOnly:
			t.Status, t.Detail = "SKIP", strings.TrimPrefix(t.Detail+"; -counts-only: no speed, CPU or memory target", "; ")
		case ok:
			t.Status = "PASS"
		default:
			t.Status = "FAIL"
		}
		ts = append(ts, t)
	}
	if sh := r.Sharding; sh != nil && sh.ShardedListAndWatch {
		t := Target{Name: "kube-apiserver runs with " + shardedListAndWatchGate + " (kubernetes_feature_enabled)", Status: "SKIP"}
		if sh.GateEnabled != nil {
			t.Status = "FAIL"
			if *sh.GateEnabled {
				t.Status, t.Value = "PASS", 1
			}
		}
		ts = append(ts, t)
	}
	for _, vr := range r.Variants {
		f := vr.PerReplica
		if f == nil {
			continue
		}
		p := vr.Name + ": "
		t := Target{Name: p + "no parent synced by two replicas at once", Detail: f.DoubleSyncDetail}
		switch {
		case f.DoubleSyncs == nil:
			t.Status, t.Name = "SKIP", t.Name+" (unknown: the hook calls lack the "+replicaHeader+" header)"
		case *f.DoubleSyncs == 0:
			t.Status = "PASS"
		default:
			t.Status, t.Value = "FAIL", float64(*f.DoubleSyncs)
		}
		ts = append(ts, t)
		ts = append(ts, byReplicaTarget(p, vr))
		if f.RatioTo != "" && f.Replicas >= 2 {
			limit, judged := maxShareRatio[f.Replicas]
			share := func(what string, v float64, detail string) {
				if !judged {
					ts = append(ts, Target{Name: fmt.Sprintf("%sper-replica %s / %s's (reported, not judged at %d replicas)", p, what, f.RatioTo, f.Replicas),
						Status: "INFO", Value: v, Unit: "x", Detail: detail})
					return
				}
				speed(Target{Name: fmt.Sprintf("%sper-replica %s <= %.2fx %s's", p, what, limit, f.RatioTo), Value: v, Max: limit, Unit: "x", Detail: detail}, v > 0 && v <= limit)
			}
			share("peak RSS", f.PeakRSSRatio, fmt.Sprintf("largest of %d replicas %s (rounds %s)", f.Replicas, mib(f.PeakRSSMaxBytes), mibs(f.PeakRSSMax)))
			share("CPU for create+update", f.CPURatio, fmt.Sprintf("largest of %d replicas %.2fs (rounds %s)", f.Replicas, f.CPUMaxSeconds, joinFloats(f.CPUMax)))
			ts = append(ts, Target{Name: fmt.Sprintf("%sper-replica cached objects / %s's (reported, not judged)", p, f.RatioTo), Status: "INFO",
				Value: f.CachedObjectsRatio, Unit: "x", Detail: fmt.Sprintf("largest %.0f (rounds %s)", f.CachedObjectsMaxN, joinFloats0(f.CachedObjectsMax))})
			for _, phase := range []string{"create", "update"} {
				if v, ok := f.ConvergenceRatio[phase]; ok {
					speed(Target{Name: fmt.Sprintf("%s%s convergence no slower than %s's", p, phase, f.RatioTo), Value: v, Max: 1, Unit: "x",
						Detail: "median seconds over the rounds, " + vr.Summary[phase].describe()}, v > 0 && v <= 1)
				}
			}
		}
		for _, k := range f.Kills {
			bound := k.LeaseDurationSeconds + killMargin
			v := k.KilledParentsResyncedSeconds
			t := Target{Name: fmt.Sprintf("%skill round %d: the killed replica's parents synced again within lease duration + %ds", p, k.Round, killMargin),
				Value: v, Max: bound, Unit: "s",
				Detail: fmt.Sprintf("%d parents of buckets %v (from %s): synced again by the others %.2fs after SIGKILL; then updated, converged %.2fs, called %.2fs after SIGKILL; every parent %.2fs, the others' %.2fs",
					k.KilledParents, k.Buckets, k.BucketsFrom, v, k.KilledParentsConvergedSeconds, k.KilledParentsCalledSeconds, k.ConvergedSeconds, k.OtherParentsConvergedSeconds)}
			switch {
			case k.BucketsFrom == "" || k.KilledParents == 0:
				t.Status = "SKIP"
				t.Detail = fmt.Sprintf("the killed replica's buckets are unknown: it exported no metactl_shard_bucket_owned, and no update-wave call carried its %s; every parent converged %.2fs after SIGKILL",
					replicaHeader, k.ConvergedSeconds)
			case v < 0:
				t.Status = "FAIL"
				t.Detail = "some parent of its buckets was not synced again within the lease duration + 60s; " + t.Detail
			case v <= bound:
				t.Status = "PASS"
			default:
				t.Status = "FAIL"
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// byReplicaTarget checks in every run that the hook server's calls by
// Metactl-Replica header are the replicas' own counts (byReplicaAgree).
func byReplicaTarget(p string, vr *VariantResult) Target {
	t := Target{Name: p + "hook calls per replica agree (their metrics / the hook server by " + replicaHeader + ")", Status: "SKIP"}
	var parts []string
	for _, phase := range []string{"create", "update"} {
		for i, run := range vr.Runs[phase] {
			c := run.HookCallers
			switch {
			case c == nil || c.ByReplicaAgree == nil:
				parts = append(parts, fmt.Sprintf("%s run %d: not compared", phase, i+1))
			case *c.ByReplicaAgree:
				t.Value++
				if t.Status == "SKIP" {
					t.Status = "PASS"
				}
				parts = append(parts, fmt.Sprintf("%s run %d: agree", phase, i+1))
			default:
				t.Status = "FAIL"
				parts = append(parts, fmt.Sprintf("%s run %d: %s", phase, i+1, c.Problem))
			}
		}
	}
	t.Detail = strings.Join(parts, "; ")
	return t
}

func mibs(xs []int64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = mib(x)
	}
	return strings.Join(parts, ", ")
}

func joinFloats0(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.0f", x)
	}
	return strings.Join(parts, ", ")
}

// printReplicas prints the sharded variants side by side, per replica.
func (b *bench) printReplicas() {
	r := b.result
	if r.Sharding == nil {
		return
	}
	s := r.Sharding
	gate := fmt.Sprint(s.ShardedListAndWatch)
	if s.GateEnabled != nil {
		gate += fmt.Sprintf(" (its metrics say enabled=%v)", *s.GateEnabled)
	}
	fmt.Printf("Sharding: replicas %v, --shard-buckets=%d, lease %.0fs, kube-apiserver %s=%s", s.ReplicaCounts, s.ShardBuckets, s.LeaseDurationSeconds, shardedListAndWatchGate, gate)
	if s.Spread != nil {
		fmt.Printf("; %s", s.Spread)
	} else {
		fmt.Printf("; %d namespaces", s.Namespaces)
	}
	fmt.Println()
	var rows []*VariantResult
	for _, vr := range r.Variants {
		if vr.PerReplica != nil {
			rows = append(rows, vr)
		}
	}
	if len(rows) == 0 {
		fmt.Println()
		return
	}
	fmt.Println("per replica: the largest share of the replicas in each round, median over the rounds; x: ratio to the one-replica run of the same rounds (ratioTo).")
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "variant\treplicas\tcreate s\tupdate s\tconv. x\tpeak RSS\tx\tCPU s\tx\tcached\tx\thook calls\twatch events\tdouble syncs\tkill s\t")
	for _, vr := range rows {
		f := vr.PerReplica
		med := func(phase string) string {
			if sum := vr.Summary[phase]; sum != nil && len(sum.MetactlSeconds) > 0 {
				return fmt.Sprintf("%.2f", median(sum.MetactlSeconds))
			}
			return "-"
		}
		x := func(v float64) string {
			if v == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f", v)
		}
		conv := "-"
		if f.RatioTo != "" {
			conv = x(f.ConvergenceRatio["create"]) + "/" + x(f.ConvergenceRatio["update"])
		}
		watch := "not exported"
		if len(f.WatchEventsMax) > 0 {
			watch = fmt.Sprintf("%.0f", median(f.WatchEventsMax))
		}
		double := "unknown"
		if f.DoubleSyncs != nil {
			double = fmt.Sprint(*f.DoubleSyncs)
		}
		kill := "-"
		if len(f.Kills) > 0 {
			var ks []string
			for _, k := range f.Kills {
				if k.BucketsFrom == "" {
					ks = append(ks, "unknown")
					continue
				}
				ks = append(ks, fmt.Sprintf("%.1f", k.KilledParentsResyncedSeconds))
			}
			kill = strings.Join(ks, ",")
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%.2f\t%s\t%.0f\t%s\t%.0f\t%s\t%s\t%s\t\n", vr.Name, f.Replicas, med("create"), med("update"), conv,
			mib(f.PeakRSSMaxBytes), x(f.PeakRSSRatio), f.CPUMaxSeconds, x(f.CPURatio), f.CachedObjectsMaxN, x(f.CachedObjectsRatio), f.HookCallsMaxN, watch, double, kill)
	}
	_ = w.Flush()
	for _, vr := range rows {
		f := vr.PerReplica
		fmt.Printf("  %s: rounds' largest/median peak RSS %s / %s; CPU %s / %s; cached %s / %s; hook calls %s / %s\n", vr.Name,
			mibs(f.PeakRSSMax), mibs(f.PeakRSSMedian), joinFloats(f.CPUMax), joinFloats(f.CPUMedian),
			joinFloats0(f.CachedObjectsMax), joinFloats0(f.CachedObjectsMedian), joinFloats0(f.HookCallsMax), joinFloats0(f.HookCallsMedian))
		if f.DoubleSyncDetail != "" {
			fmt.Printf("    double syncs: %s\n", f.DoubleSyncDetail)
		}
		for _, k := range f.Kills {
			fmt.Printf("    kill round %d: replica %d (buckets %v from %q, %d parents): its parents synced again %.2fs after SIGKILL; updated then, converged %.2fs and called %.2fs, every parent %.2fs (lease %.0fs); hook calls %.2f per parent\n",
				k.Round, k.Killed, k.Buckets, k.BucketsFrom, k.KilledParents, k.KilledParentsResyncedSeconds, k.KilledParentsConvergedSeconds, k.KilledParentsCalledSeconds, k.ConvergedSeconds, k.LeaseDurationSeconds, k.HookCallsPerParent)
		}
	}
	fmt.Println()
}
