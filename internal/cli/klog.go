package cli

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
)

// AddKlogFlags adds klog's flags (-v and friends) to cmd as persistent
// flags, with --log-level as another name for -v, and --log-format
// text|json. Only -v and --log-format show in --help. It sets
// cmd.PersistentPreRunE to apply --log-format.
func AddKlogFlags(cmd *cobra.Command) {
	gofs := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(gofs)
	flags := cmd.PersistentFlags()
	flags.AddGoFlagSet(gofs)
	// Of klog's flags only -v is shown in --help; the others (log files,
	// headers, thresholds, ...) still work, hidden.
	gofs.VisitAll(func(f *flag.Flag) {
		if f.Name != "v" {
			_ = flags.MarkHidden(f.Name)
		}
	})
	v := flags.Lookup("v")
	v.Usage = "log verbosity: 2 controller life cycle, 4 actions on children, 5 their diffs, 6 hook request and response bodies (Secret data is never logged)"
	v.DefValue = "0"
	verbosity := v.Value
	flags.AddGoFlag(&flag.Flag{Name: "log-level", Usage: "same as -v", Value: verbosity, DefValue: "0"})
	_ = flags.MarkHidden("log-level")
	format := flags.String("log-format", "text", "log format: text (klog) or json (one JSON object per line)")
	cmd.PersistentPreRunE = func(*cobra.Command, []string) error {
		switch *format {
		case "text":
			return nil
		case "json":
			level, err := strconv.Atoi(verbosity.String())
			if err != nil {
				return fmt.Errorf("-v: %w", err)
			}
			// klog applies -v; the handler lets through every level klog
			// passes (logr verbosity n is slog level -n).
			handler := slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.Level(-level)})
			klog.SetSlogLogger(slog.New(handler))
			return nil
		default:
			return fmt.Errorf("--log-format %q: want text or json", *format)
		}
	}
}

// SetCommandName makes cmd's help and usage call it name, for a program
// users run under another name, as metactl-dev is run as "metactl dev".
// Call it after adding cmd's flags.
func SetCommandName(cmd *cobra.Command, name string) {
	cmd.Use = name
	cmd.Flags().BoolP("help", "h", false, "help for "+name)
}
