package replay

import (
	"fmt"
	"io"
	"strings"

	"github.com/metactl/metactl/internal/jsondiff"
)

// Indent starts each line of a change under its call in Print's output.
const Indent = "    "

// Print writes the report for people: one line per call (its file, the
// object it was about and what came of it, with the reason of a failed or
// skipped call), the changes of a call whose answer differs one per line
// below it, and a summary line.
func (r *Report) Print(w io.Writer) error {
	fileWidth, objectWidth := 0, 0
	for _, res := range r.Results {
		fileWidth, objectWidth = max(fileWidth, len(res.File)), max(objectWidth, len(res.Object))
	}
	var b strings.Builder
	for _, res := range r.Results {
		line := fmt.Sprintf("%-*s  %-*s  %s", fileWidth, res.File, objectWidth, res.Object, res.Status)
		if res.Reason != "" {
			line += ": " + res.Reason
		}
		if res.Ignored > 0 {
			line += fmt.Sprintf(" (%d ignored %s)", res.Ignored, plural(res.Ignored, "change", "changes"))
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
		if err := jsondiff.Write(&b, Indent, res.Changes); err != nil {
			return err
		}
	}
	s := r.Summary
	parts := []string{fmt.Sprintf("%d same", s.Same), fmt.Sprintf("%d %s", s.Differs, plural(s.Differs, "differs", "differ"))}
	if s.Updated > 0 {
		parts = append(parts, fmt.Sprintf("%d updated", s.Updated))
	}
	parts = append(parts, fmt.Sprintf("%d failed", s.Failed), fmt.Sprintf("%d skipped", s.Skipped))
	fmt.Fprintf(&b, "%d %s: %s\n", s.Calls, plural(s.Calls, "call", "calls"), strings.Join(parts, ", "))
	_, err := io.WriteString(w, b.String())
	return err
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
