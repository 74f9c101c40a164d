package cli_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

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

// TestVerbosityIsCapped: -v 10, and --vmodule asking 9 for this very file,
// log as 7, so that client-go's body logging (from 8) never runs.
func TestVerbosityIsCapped(t *testing.T) {
	var v7, v8 bool
	cmd := &cobra.Command{Use: "metactl", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error {
		v7, v8 = bool(klog.V(7).Enabled()), bool(klog.Background().V(8).Enabled()) || bool(klog.V(8).Enabled())
		return nil
	}}
	cli.AddKlogFlags(cmd)
	cmd.SetArgs([]string{"-v", "10", "--vmodule", "klog_test=9"})
	t.Cleanup(func() {
		_ = cmd.Flags().Set("v", "0")
		_ = cmd.Flags().Set("vmodule", "")
	})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if !v7 || v8 {
		t.Errorf("at -v 10: V(7) enabled %v (want true), V(8) enabled %v (want false)", v7, v8)
	}
}

// TestVerbosityIsCappedEverywhere: the cap holds for a subcommand with a
// PersistentPreRunE of its own (cobra runs only the nearest one unless
// told otherwise), given -v or --log-level, and in json format too, where
// klog.Background() is a logger of its own (slog's).
func TestVerbosityIsCappedEverywhere(t *testing.T) {
	for _, args := range [][]string{
		{"sub", "-v", "10", "--log-format", "json"},
		{"sub", "--log-level", "9", "--vmodule", "klog_test=9"},
		{"sub", "-v", "10", "--log-format", "text"},
	} {
		var v7, v8, subHook bool
		root := &cobra.Command{Use: "metactl"}
		sub := &cobra.Command{Use: "sub", Args: cobra.NoArgs,
			PersistentPreRunE: func(*cobra.Command, []string) error { subHook = true; return nil },
			RunE: func(*cobra.Command, []string) error {
				v7 = klog.Background().V(7).Enabled() && bool(klog.V(7).Enabled())
				v8 = klog.Background().V(8).Enabled() || bool(klog.V(8).Enabled())
				return nil
			}}
		root.AddCommand(sub)
		cli.AddKlogFlags(root)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		_ = root.PersistentFlags().Set("v", "0")
		_ = root.PersistentFlags().Set("vmodule", "")
		klog.ClearLogger()
		if !subHook || !v7 || v8 {
			t.Errorf("%q: the subcommand's hook ran %v; V(7) enabled %v (want true), V(8) enabled %v (want false)", args, subHook, v7, v8)
		}
	}
}
