package architecture

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/metactl/metactl/internal/testenv"
)

// module is metactl's module path.
const module = "github.com/metactl/metactl"

// kinds are the packages the table calls "the kinds".
var kinds = []string{"pkg/composite", "pkg/decorator"}

// rule is one row of the table: what its package may import of metactl.
type rule struct {
	// patterns are package paths, or prefixes ending in "/..." (the
	// package itself and those below it).
	patterns []string
	// anythingBut, when set, allows every package but those under it
	// ("anything but `cmd`").
	anythingBut string
}

func (r rule) allows(pkg string) bool {
	if r.anythingBut != "" {
		return pkg != r.anythingBut && !strings.HasPrefix(pkg, r.anythingBut+"/")
	}
	return slices.ContainsFunc(r.patterns, func(p string) bool { return matches(p, pkg) })
}

func matches(pattern, pkg string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == prefix || strings.HasPrefix(pkg, prefix+"/")
	}
	return pattern == pkg
}

// TestTheTableIsTheImportGraph reads docs/architecture.md's table of
// packages and checks it against `go list`: every package of the module
// has a row, each imports only what its row allows, and each package its
// row names (or a package under a pattern it names) is imported, so that
// the table is the import graph, neither more nor less.
func TestTheTableIsTheImportGraph(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := parseTable(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	graph := importGraph(t, root)
	for pkg, imports := range graph {
		r, ok := rules[pkg]
		if !ok {
			t.Errorf("%s has no row in docs/architecture.md's table", pkg)
			continue
		}
		for _, imp := range imports {
			if !r.allows(imp) {
				t.Errorf("%s imports %s, which its row in docs/architecture.md does not list", pkg, imp)
			}
		}
		for _, p := range r.patterns {
			if !slices.ContainsFunc(imports, func(imp string) bool { return matches(p, imp) }) {
				t.Errorf("%s's row in docs/architecture.md lists %s, which it does not import", pkg, p)
			}
		}
	}
	for pkg := range rules {
		if _, ok := graph[pkg]; !ok {
			t.Errorf("docs/architecture.md's table has a row for %s, which is not a package of the module", pkg)
		}
	}
}

// importGraph returns each package of the module (its path in the
// repository) and the module's packages it imports, tests left out.
func importGraph(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := goList(t, root, `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	graph := map[string][]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := local(fields[0])
		if !ok {
			continue
		}
		imports := []string{}
		for _, imp := range fields[1:] {
			if l, ok := local(imp); ok {
				imports = append(imports, l)
			}
		}
		graph[pkg] = imports
	}
	if len(graph) < 20 {
		t.Fatalf("go list found only %d packages:\n%s", len(graph), out)
	}
	return graph
}

// local returns a module's package path relative to the module, and false
// for other packages.
func local(importPath string) (string, bool) {
	if importPath == module {
		return "", true
	}
	return strings.CutPrefix(importPath, module+"/")
}

var (
	rowRE   = regexp.MustCompile("^\\| `([^`]+)` \\|.*\\| ([^|]+) \\|$")
	parenRE = regexp.MustCompile(`\([^()]*\)`)
	codeRE  = regexp.MustCompile("`([^`]+)`")
	braceRE = regexp.MustCompile(`^(.*)\{([^}]*)\}(.*)$`)
)

// parseTable reads the rows of the section "Packages, and what each may
// import": the package, and what its last cell allows.
func parseTable(doc string) (map[string]rule, error) {
	start := strings.Index(doc, "\n## Packages, and what each may import\n")
	if start < 0 {
		return nil, fmt.Errorf("docs/architecture.md has no section \"Packages, and what each may import\"")
	}
	section := doc[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	rules := map[string]rule{}
	for line := range strings.SplitSeq(section, "\n") {
		m := rowRE.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil || m[1] == "package" {
			continue
		}
		if _, dup := rules[m[1]]; dup {
			return nil, fmt.Errorf("two rows for %s", m[1])
		}
		r, err := parseCell(m[2])
		if err != nil {
			return nil, fmt.Errorf("the row of %s: %v", m[1], err)
		}
		rules[m[1]] = r
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("no rows in the table")
	}
	return rules, nil
}

// parseCell reads "may import, of metactl": packages in backquotes, with
// {a,b} alternatives and /... prefixes, "the kinds", "nothing", or
// "anything but `X`"; parenthesised remarks are left out.
func parseCell(cell string) (rule, error) {
	cell = strings.TrimSpace(cell)
	for parenRE.MatchString(cell) {
		cell = parenRE.ReplaceAllString(cell, "")
	}
	if cell == "nothing" {
		return rule{patterns: []string{}}, nil
	}
	if rest, ok := strings.CutPrefix(cell, "anything but "); ok {
		m := codeRE.FindStringSubmatch(rest)
		if m == nil {
			return rule{}, fmt.Errorf("%q: want anything but `PACKAGE`", cell)
		}
		return rule{anythingBut: m[1]}, nil
	}
	var r rule
	for item := range strings.SplitSeq(cell, ", ") {
		item = strings.TrimSpace(item)
		if item == "the kinds" {
			r.patterns = append(r.patterns, kinds...)
			continue
		}
		m := codeRE.FindStringSubmatch(item)
		if m == nil || strings.TrimSpace(codeRE.ReplaceAllString(item, "")) != "" {
			return rule{}, fmt.Errorf("%q: want `PACKAGE`, the kinds, or nothing", item)
		}
		r.patterns = append(r.patterns, expand(m[1])...)
	}
	return r, nil
}

// expand expands the first {a,b} of a pattern, and so on.
func expand(p string) []string {
	m := braceRE.FindStringSubmatch(p)
	if m == nil {
		return []string{p}
	}
	var out []string
	for alt := range strings.SplitSeq(m[2], ",") {
		out = append(out, expand(m[1]+strings.TrimSpace(alt)+m[3])...)
	}
	return out
}

// TestPlainGoTestNeedsNoControlPlane checks that no test of pkg/ or
// internal/ that plain `go test` builds (without -tags integration) uses
// a control plane: tests that do, and the TestMain that starts it, are in
// files built only with the tag (make test passes it), so that
// `go test ./pkg/... ./internal/...` runs in seconds without one.
func TestPlainGoTestNeedsNoControlPlane(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := goList(t, root, `{{.ImportPath}}{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}`, "./pkg/...", "./internal/...")
	controlPlane := []string{module + "/internal/testenv", module + "/internal/controllertest", module + "/internal/controlplane"}
	packages := 0
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		packages++
		for _, imp := range fields[1:] {
			if slices.Contains(controlPlane, imp) && imp != fields[0] {
				t.Errorf("%s: a test file built without -tags integration imports %s; put the tests that need a control plane in files beginning with //go:build integration", fields[0], imp)
			}
		}
	}
	if packages < 20 {
		t.Fatalf("go list found only %d packages:\n%s", packages, out)
	}
}

// goList runs go list -f format on patterns in root and returns its output.
func goList(t *testing.T, root, format string, patterns ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-f", format}, patterns...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	return out
}
