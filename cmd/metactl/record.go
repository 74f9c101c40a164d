package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/metactl/metactl/internal/explain"
	"github.com/metactl/metactl/internal/hookrecord"
)

func newRecordCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "record",
		Short: "Fetch the hook calls metactl recorded, for metactl replay",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newRecordFetchCommand())
	return cmd
}

// recordFetchFlags are the flags of `metactl record fetch`.
type recordFetchFlags struct {
	kubeFlags
	recordDir string
	metactlFlags
	requestTimeout time.Duration
}

func newRecordFetchCommand() *cobra.Command {
	f := &recordFetchFlags{}
	cmd := &cobra.Command{
		Use:   "fetch compositecontroller/NAME --record-dir DIR",
		Short: "Write the hook calls metactl recorded of a controller into a directory",
		Long: `fetch asks the running metactl for the hook calls it recorded of one
controller (compositecontroller/NAME or decoratorcontroller/NAME; cc/NAME
and dec/NAME too) and writes them into --record-dir, one file per call
(NNNN-HOOK.json, oldest first), the set "metactl replay" reads. A
controller records its calls only when its object is annotated
` + hookrecord.Annotation + `: "true" (or every controller, under "metactl dev
--record-dir"), in memory, the newest --record-max-calls of metactl run.
Calls already in --record-dir are not written again: fetching from time
to time gathers more calls than metactl keeps.

metactl is asked at --endpoint (or $` + endpointEnv + `): its metrics
address, such as http://127.0.0.1:9999; else at the address that
"metactl dev" records in the kubeconfig's context; else through the API
server's Pod proxy, each Running metactl Pod in --metactl-namespace on
--metactl-port (this needs list on pods and get on pods/proxy in that
namespace). It connects as kubectl does: --kubeconfig, else $KUBECONFIG,
else ~/.kube/config, else the in-cluster config.`,
		Example: `  metactl record fetch compositecontroller/hello-controller --record-dir testdata/recorded
  metactl replay testdata/recorded --hook-url http://127.0.0.1:8080`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return recordFetch(cmd.Context(), cmd.OutOrStdout(), cmd.Root().DisplayName(), f, args[0])
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.recordDir, "record-dir", "", "directory to write the calls into (created when missing; required)")
	f.kubeFlags.add(fs, "")
	f.metactlFlags.add(fs)
	fs.DurationVar(&f.requestTimeout, "request-timeout", 30*time.Second, "longest wait for the answer")
	return cmd
}

// controllerKinds maps what `record fetch` takes to the kinds of
// controller: their singular, plural and short names.
var controllerKinds = map[string]string{
	"compositecontroller": "compositecontroller", "compositecontrollers": "compositecontroller", "cc": "compositecontroller", "cctl": "compositecontroller",
	"decoratorcontroller": "decoratorcontroller", "decoratorcontrollers": "decoratorcontroller", "dec": "decoratorcontroller", "decorators": "decoratorcontroller",
}

// controllerArg reads KIND/NAME as the ID of a controller
// ("compositecontroller/NAME").
func controllerArg(arg string) (string, error) {
	kind, name, ok := strings.Cut(arg, "/")
	k := controllerKinds[strings.ToLower(kind)]
	if !ok || k == "" || name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("%q: want compositecontroller/NAME or decoratorcontroller/NAME", arg)
	}
	return k + "/" + name, nil
}

// recordFetch fetches the calls of the controller arg names; self is how
// the user runs metactl ("metactl", or "kubectl metactl" for the plugin),
// for the command it suggests.
func recordFetch(ctx context.Context, out io.Writer, self string, f *recordFetchFlags, arg string) error {
	if f.recordDir == "" {
		// Checked here, not with MarkFlagRequired: the deprecated --dir
		// sets it too (renamedFlags), and cobra would ask for --record-dir.
		return errors.New("--record-dir is required: the directory to write the calls into")
	}
	controller, err := controllerArg(arg)
	if err != nil {
		return err
	}
	loader := f.clientConfig()
	var set *hookrecord.Set
	if endpoint, from := f.directEndpoint(loader, f.context); endpoint != "" {
		// The kubeconfig's token, when there is a kubeconfig, for metactl
		// run's guard (--debug-auth).
		cfg, _ := configOf(loader, "record fetch")
		client, err := debugClient(cfg, f.requestTimeout)
		if err != nil {
			return err
		}
		set, err = hookrecord.Fetch(ctx, client, endpoint, controller)
		if err != nil {
			return fmt.Errorf("%w (endpoint from %s)", err, from)
		}
	} else {
		cfg, err := configOf(loader, "record fetch")
		if err != nil {
			if errors.Is(err, errNoKubeconfig) {
				return fmt.Errorf("no metactl endpoint (--endpoint, $%s), and to reach it through the cluster: %w", endpointEnv, err)
			}
			return err
		}
		cfg.Timeout = f.requestTimeout
		core, err := corev1client.NewForConfig(proxyConfig(cfg))
		if err != nil {
			return err
		}
		if set, err = hookrecord.FetchThroughPods(ctx, core, f.metactlNamespace, explain.PodSelector, f.metactlPort, controller); err != nil {
			return fmt.Errorf("%w; or give metactl's metrics address with --endpoint", err)
		}
	}
	if len(set.Calls) == 0 {
		return fmt.Errorf("metactl recorded no call of %s yet: it records from the time the controller started with %s: \"true\"; let it sync (%s resync RESOURCE/NAME) and fetch again", controller, hookrecord.Annotation, self)
	}
	fresh, err := newCalls(f.recordDir, set.Calls)
	if err != nil {
		return err
	}
	first, err := hookrecord.Next(f.recordDir)
	if err != nil {
		return err
	}
	if err := hookrecord.WriteDir(f.recordDir, first, fresh); err != nil {
		return fmt.Errorf("writing the recorded calls: %w", err)
	}
	if len(fresh) == 0 {
		_, err = fmt.Fprintf(out, "%s: all %d recorded calls are in %s already\n", controller, len(set.Calls), f.recordDir)
		return err
	}
	_, err = fmt.Fprintf(out, "%s: wrote %d calls into %s (%s to %s)\n", controller, len(fresh), f.recordDir,
		hookrecord.FileName(first, fresh[0]), hookrecord.FileName(first+len(fresh)-1, fresh[len(fresh)-1]))
	return err
}

// newCalls returns the calls not in dir already: the same controller,
// hook, object and time.
func newCalls(dir string, calls []hookrecord.Call) ([]hookrecord.Call, error) {
	have, err := hookrecord.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return calls, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the calls in %s: %w", dir, err)
	}
	type key struct {
		controller, hook, object string
		at                       time.Time
	}
	seen := map[key]bool{}
	for _, f := range have {
		seen[key{f.Controller, f.Hook, f.Object, f.Time.UTC()}] = true
	}
	var out []hookrecord.Call
	for _, c := range calls {
		if !seen[key{c.Controller, c.Hook, c.Object, c.Time.UTC()}] {
			out = append(out, c)
		}
	}
	return out, nil
}
