package engine

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// AsAnswered plays, without an Engine, what the rounds do with a valid
// answer of the hook that was given the object seen: the conditions of
// the answer's status completed against seen's status (lastTransitionTime,
// observedGeneration: see fillConditions), then the object as the
// answer's labels, annotations and status leave it. It returns that
// object and whether the answer changes seen's labels or annotations, and
// its status; an answer that changes neither, and whose dependents need
// no write, is a fixed point (see MaxRounds). answer.Status may be
// completed in place. For `metactl hook test`, which feeds a hook its own
// answers back as the reconciler would.
func AsAnswered(seen *unstructured.Unstructured, answer *Answer) (out *unstructured.Unstructured, metadataChanged, statusChanged bool) {
	// fillConditions reads only the generation of the target's object.
	(&Engine{}).fillConditions(&Target{Object: seen}, seen, answer)
	return asAnswered(seen, answer)
}
