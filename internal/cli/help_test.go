package cli_test

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/metactl/metactl/internal/cli"
)

// TestLongFlagUsagesFindsBackquotes: a backquote in a flag's help, which
// pflag would show as the flag's value placeholder, is reported, for a
// string flag and a bool flag alike; plain help is not.
func TestLongFlagUsagesFindsBackquotes(t *testing.T) {
	cmd := &cobra.Command{Use: "x"}
	var s string
	var b bool
	cmd.Flags().StringVar(&s, "record-dir", "", "record hook calls for `metactl replay`")
	cmd.Flags().BoolVar(&b, "explain", true, "serve what `metactl explain` asks")
	cmd.Flags().StringVar(&s, "plain", "", "record hook calls for metactl replay")
	got := strings.Join(cli.LongFlagUsages(cmd), "\n")
	for _, want := range []string{`x --record-dir: help with a backquote, which --help shows as the value placeholder "metactl replay"`, `x --explain: help with a backquote`} {
		if !strings.Contains(got, want) {
			t.Errorf("LongFlagUsages lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "--plain") {
		t.Errorf("plain help reported:\n%s", got)
	}
}
