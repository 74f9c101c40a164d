package cli_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/metactl/metactl/internal/cli"
)

// TestSetCommandName: a program run under another name (metactl-dev as
// "metactl dev") says that name in its usage and help, and shows only -v
// and --log-format of the log flags.
func TestSetCommandName(t *testing.T) {
	cmd := &cobra.Command{Use: "metactl-dev", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error { return nil }}
	cmd.Flags().Int("workers", 4, "workers")
	cli.AddKlogFlags(cmd)
	cli.SetCommandName(cmd, "metactl dev")
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	help := out.String()
	for _, want := range []string{"metactl dev [flags]", "help for metactl dev", "--log-format", "-v, --v"} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q:\n%s", want, help)
		}
	}
	for _, unwanted := range []string{"metactl-dev", "--logtostderr", "--vmodule"} {
		if strings.Contains(help, unwanted) {
			t.Errorf("help shows %q:\n%s", unwanted, help)
		}
	}
}
