package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/metactl/metactl/internal/replay"
)

// replayFlags are the flags of `metactl replay`.
type replayFlags struct {
	hookURL        string
	hookURLFor     map[string]string
	requestTimeout time.Duration
	ignore         []string
	update         bool
	output         string
}

func newReplayCommand() *cobra.Command {
	f := &replayFlags{}
	cmd := &cobra.Command{
		Use:   "replay DIR --hook-url URL",
		Short: "Send a recorded set of hook calls to a hook again and compare its answers",
		Long: `replay reads a recorded set of hook calls (a directory of NNNN-HOOK.json
files, as "metactl dev --record-dir DIR" writes them into DIR/KIND-NAME,
and "metactl record fetch"),
sends each recorded request to the hook (POST, one at a time, each
bounded by --request-timeout), and compares the answer with the recorded
one as JSON: the order of keys and of children (or attachments) does not
matter, numbers compare by value. One line per call: same, differs (with each changed
field below it), failed (no connection, a timeout, a status other than
200, an answer that is not JSON) or skipped (recorded without an answer,
or no URL for its hook).

--hook-url is the URL of every hook; --hook-url-for gives one per hook
name and overrides it. A URL without a path gets the path of the hook in
the recorded controller object: --hook-url http://127.0.0.1:8080 sends
sync calls to /sync when the controller's sync webhook is at .../sync.

Exit code: 0 when every call sent got the same answer, 2 when an answer
differs or a call failed, 1 when replay itself could not run (DIR
unreadable or without calls, bad flags, no call sent, or no call reached
the hook at all). With --update, each differing answer replaces the
recorded one in its file and does not count as a difference.`,
		Example: `  metactl replay examples/python/hello-world/recorded --hook-url http://127.0.0.1:8080
  metactl replay recorded --hook-url-for sync=http://127.0.0.1:8080/sync,customize=http://127.0.0.1:8081/customize -o json
  metactl replay recorded --hook-url http://127.0.0.1:8080 --update   # accept the new answers`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReplay(cmd, f, args[0])
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.hookURL, "hook-url", "", "URL of every hook (a URL without a path gets the hook's path from the recorded controller)")
	fs.StringToStringVar(&f.hookURLFor, "hook-url-for", nil, "URL per hook name, overriding --hook-url: sync=URL,finalize=URL,customize=URL")
	fs.DurationVar(&f.requestTimeout, "request-timeout", replay.DefaultTimeout, "longest wait for each answer")
	fs.StringArrayVar(&f.ignore, "ignore", nil, "path of the answer whose changes are not differences, as printed: .status.updatedAt (repeatable)")
	fs.BoolVar(&f.update, "update", false, "replace each differing recorded answer with the new one")
	fs.StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	return cmd
}

func runReplay(cmd *cobra.Command, f *replayFlags, dir string) error {
	if f.output != "text" && f.output != "json" {
		return fmt.Errorf("--output %q: want text or json", f.output)
	}
	if f.requestTimeout <= 0 {
		return fmt.Errorf("--request-timeout %v: want a positive duration", f.requestTimeout)
	}
	if f.hookURL == "" && len(f.hookURLFor) == 0 {
		return errors.New("no hook to send the calls to: give --hook-url URL (or --hook-url-for HOOK=URL)")
	}
	if f.hookURL != "" {
		if err := checkHookURL("--hook-url", f.hookURL); err != nil {
			return err
		}
	}
	for name, u := range f.hookURLFor {
		if !slices.Contains(replay.Hooks, name) {
			return fmt.Errorf("--hook-url-for %s=...: unknown hook %q, want one of %s", name, name, strings.Join(replay.Hooks, ", "))
		}
		if err := checkHookURL("--hook-url-for "+name, u); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	report, err := replay.Run(ctx, dir, replay.Options{HookURL: f.hookURL, HookURLFor: f.hookURLFor, Timeout: f.requestTimeout, Ignore: f.ignore, Update: f.update})
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if f.output == "json" {
		data, err := json.MarshalIndent(report, "", "  ")
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(out, "%s\n", data); err != nil {
			return err
		}
	} else if err := report.Print(out); err != nil {
		return err
	}
	switch {
	case report.Sent() == 0:
		return errors.New("no call was sent: each was recorded without an answer or has no URL for its hook")
	case report.Reached() == 0:
		return errors.New("no call reached the hook: check that it runs and listens at the URL given")
	case report.Summary.Differs+report.Summary.Failed > 0:
		return &ExitError{Code: ExitChanges}
	}
	return nil
}

// checkHookURL checks that a URL given by a flag is an http or https URL
// with a host.
func checkHookURL(flag, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%s %q: %w", flag, raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s %q: want an http:// or https:// URL with a host", flag, raw)
	}
	return nil
}
