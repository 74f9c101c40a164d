package cli

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
)

// MaxVerbosity is the highest log verbosity: -v (and --vmodule) above it
// logs as it. client-go logs the bodies of API requests and responses from
// -v 8 (in part; whole at 10), and those include Secrets: every Secret
// child metactl creates or lists, every credential Secret it reads, in any
// encoding (JSON, or a hex dump of protobuf). Capping the verbosity that
// every logger in the process sees (they all derive from klog's) keeps
// that logging from ever running, whatever client-go names its messages,
// whatever the log format. metactl's own logs stop at 6 (hook bodies,
// Secret data redacted); 7 adds client-go's request headers, with the
// Authorization header masked.
const MaxVerbosity = 7

// AddKlogFlags adds klog's flags (-v and friends) to cmd as persistent
// flags, with --log-level as another name for -v, and --log-format
// text|json. Only -v and --log-format show in --help. It sets
// cmd.PersistentPreRunE to cap the verbosity at MaxVerbosity and apply
// --log-format.
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
	v.Usage = "log verbosity: 2 controller life cycle, 4 actions on children, 5 their diffs, 6 hook request and response bodies, 7 API request headers; higher logs as 7 (Secret data is never logged)"
	v.DefValue = "0"
	verbosity := v.Value
	flags.AddGoFlag(&flag.Flag{Name: "log-level", Usage: "same as -v", Value: verbosity, DefValue: "0"})
	_ = flags.MarkHidden("log-level")
	format := flags.String("log-format", "text", "log format: text (klog) or json (one JSON object per line)")
	cmd.PersistentPreRunE = func(*cobra.Command, []string) error {
		requested, err := strconv.Atoi(verbosity.String())
		if err != nil {
			return fmt.Errorf("-v: %w", err)
		}
		if err := capVerbosity(verbosity, flags.Lookup("vmodule").Value); err != nil {
			return err
		}
		if requested > MaxVerbosity {
			defer klog.Background().Info("Logging at the highest verbosity: API request and response bodies, which hold Secret data, are never logged",
				"requested", requested, "verbosity", MaxVerbosity)
		}
		switch *format {
		case "text":
			return nil
		case "json":
			level := min(requested, MaxVerbosity)
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

// capVerbosity lowers -v, and each level of --vmodule
// (pattern=N,...), to MaxVerbosity.
func capVerbosity(verbosity, vmodule flag.Value) error {
	if level, err := strconv.Atoi(verbosity.String()); err == nil && level > MaxVerbosity {
		if err := verbosity.Set(strconv.Itoa(MaxVerbosity)); err != nil {
			return fmt.Errorf("-v: %w", err)
		}
	}
	spec := vmodule.String()
	if spec == "" {
		return nil
	}
	parts := strings.Split(spec, ",")
	for i, part := range parts {
		pattern, level, ok := strings.Cut(part, "=")
		if n, err := strconv.Atoi(level); ok && err == nil && n > MaxVerbosity {
			parts[i] = pattern + "=" + strconv.Itoa(MaxVerbosity)
		}
	}
	if err := vmodule.Set(strings.Join(parts, ",")); err != nil {
		return fmt.Errorf("--vmodule: %w", err)
	}
	return nil
}

// SetCommandName makes cmd's help and usage call it name, for a program
// users run under another name, as metactl-dev is run as "metactl dev".
// Call it after adding cmd's flags.
func SetCommandName(cmd *cobra.Command, name string) {
	cmd.Use = name
	cmd.Flags().BoolP("help", "h", false, "help for "+name)
}
