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
// text|json. It sets cmd.PersistentPreRunE to apply --log-format.
func AddKlogFlags(cmd *cobra.Command) {
	gofs := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(gofs)
	cmd.PersistentFlags().AddGoFlagSet(gofs)
	verbosity := gofs.Lookup("v").Value
	cmd.PersistentFlags().AddGoFlag(&flag.Flag{Name: "log-level", Usage: "log verbosity, same as -v: 2 controller life cycle, 4 actions on children, 5 their diffs, 6 hook request and response bodies (Secret data is never logged)", Value: verbosity, DefValue: "0"})
	format := cmd.PersistentFlags().String("log-format", "text", "log format: text (klog) or json (one JSON object per line)")
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
