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
// text|json. Only -v and --log-format show in --help.
//
// -v, --log-level and --vmodule are capped at MaxVerbosity as they are
// parsed, for cmd and every subcommand, whatever hooks they have. cmd's
// PersistentPreRunE applies --log-format and logs that the verbosity was
// capped; it sets cobra.EnableTraverseRunHooks, so that it runs before a
// subcommand's own PersistentPreRunE rather than being replaced by it.
func AddKlogFlags(cmd *cobra.Command) {
	cobra.EnableTraverseRunHooks = true
	gofs := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(gofs)
	requested := 0
	gofs.Lookup("v").Value = &cappedVerbosity{Value: gofs.Lookup("v").Value, requested: &requested}
	gofs.Lookup("vmodule").Value = cappedVModule{gofs.Lookup("vmodule").Value}
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
	v.Usage = "log verbosity: 2 life cycle, 4 actions on children, 5 diffs, 6 hook bodies, 7 API headers (most)"
	v.DefValue = "0"
	verbosity := v.Value
	flags.AddGoFlag(&flag.Flag{Name: "log-level", Usage: "same as -v", Value: verbosity, DefValue: "0"})
	_ = flags.MarkHidden("log-level")
	format := flags.String("log-format", "text", "log format: text (klog) or json (one JSON object per line)")
	cmd.PersistentPreRunE = func(*cobra.Command, []string) error {
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

// cappedVerbosity is klog's -v, set to at most MaxVerbosity; requested
// is the level asked for.
type cappedVerbosity struct {
	flag.Value
	requested *int
}

// Type names the value in --help, as klog's does.
func (v *cappedVerbosity) Type() string { return "Level" }

func (v *cappedVerbosity) Set(s string) error {
	level, err := strconv.Atoi(s)
	if err != nil {
		return err
	}
	*v.requested = level
	return v.Value.Set(strconv.Itoa(min(level, MaxVerbosity)))
}

// cappedVModule is klog's --vmodule (pattern=N,...), each level set to at
// most MaxVerbosity.
type cappedVModule struct{ flag.Value }

// Type names the value in --help, as klog's does.
func (v cappedVModule) Type() string { return "moduleSpec" }

func (v cappedVModule) Set(spec string) error {
	parts := strings.Split(spec, ",")
	for i, part := range parts {
		pattern, level, ok := strings.Cut(part, "=")
		if n, err := strconv.Atoi(level); ok && err == nil && n > MaxVerbosity {
			parts[i] = pattern + "=" + strconv.Itoa(MaxVerbosity)
		}
	}
	return v.Value.Set(strings.Join(parts, ","))
}

// SetCommandName makes cmd's help and usage call it name, for a program
// users run under another name, as metactl-dev is run as "metactl dev".
// Call it after adding cmd's flags.
func SetCommandName(cmd *cobra.Command, name string) {
	cmd.Use = name
	cmd.Flags().BoolP("help", "h", false, "help for "+name)
}
