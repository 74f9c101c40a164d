package discovery

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/editdistance"
)

// Suggestion is a served resource offered in place of one that is not
// served, for a NotFoundError to say "did you mean".
type Suggestion struct {
	// Name is what to write instead: the plural resource name, or the
	// kind when a kind was looked up.
	Name string
	// APIVersion is the suggested resource's when it differs from the
	// one looked up, else empty.
	APIVersion string
}

func (s *Suggestion) String() string {
	if s.APIVersion == "" {
		return strconv.Quote(s.Name)
	}
	return fmt.Sprintf("%q in %s", s.Name, s.APIVersion)
}

// suggest returns the served resource closest to name, a resource name
// (or, when kind is true, a kind) that apiVersion does not serve; nil when
// none is close. Close is, first, a resource known by that name in any
// letter case, as its plural, singular, kind or a short name
// ("Deployment", "deployment", "deploy" for deployments); then, within the
// same API group, one whose plural, singular or kind is a typo or two away
// ("deploymnets"). A resource of the same apiVersion wins over one of the
// same group, which wins over any other. Call it with m.mu held.
func (m *ResourceMap) suggest(apiVersion, name string, kind bool) *Suggestion {
	want := strings.ToLower(name)
	if want == "" {
		return nil
	}
	wantGV, _ := schema.ParseGroupVersion(apiVersion)
	type rank struct {
		distance, place int
		res             *Resource
	}
	var best *rank
	for _, res := range m.byResource {
		gv, _ := schema.ParseGroupVersion(res.APIVersion)
		r := rank{distance: nameDistance(want, res), place: 2, res: res}
		switch {
		case res.APIVersion == apiVersion:
			r.place = 0
		case gv.Group == wantGV.Group:
			r.place = 1
		}
		if r.distance > 0 && (r.place == 2 || r.distance > maxTypos(want)) {
			continue
		}
		if best == nil || cmp.Or(cmp.Compare(r.distance, best.distance), cmp.Compare(r.place, best.place),
			cmp.Compare(r.res.APIVersion, best.res.APIVersion), cmp.Compare(r.res.Name, best.res.Name)) < 0 {
			best = &r
		}
	}
	if best == nil {
		return nil
	}
	s := &Suggestion{Name: best.res.Name}
	if kind {
		s.Name = best.res.Kind
	}
	if best.res.APIVersion != apiVersion {
		s.APIVersion = best.res.APIVersion
	}
	if s.APIVersion == "" && s.Name == name {
		return nil
	}
	return s
}

// maxTypos is how many edits away from want a name may be to be suggested.
func maxTypos(want string) int {
	if len(want) <= 5 {
		return 1
	}
	return 2
}

// nameDistance is 0 when want, lower case, is one of res's names in any
// case, else the fewest edits from want to its plural, singular or kind.
func nameDistance(want string, res *Resource) int {
	names := []string{strings.ToLower(res.Name), strings.ToLower(res.SingularName), strings.ToLower(res.Kind)}
	for _, short := range res.ShortNames {
		if strings.ToLower(short) == want {
			return 0
		}
	}
	best := -1
	for _, n := range names {
		if n == "" {
			continue
		}
		if d := editdistance.Between(want, n); best < 0 || d < best {
			best = d
		}
	}
	if best < 0 {
		return len(want)
	}
	return best
}
