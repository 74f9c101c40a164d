package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

// devBinary is the program that `metactl dev` runs. It lives in a binary
// of its own (cmd/metactl-dev) because it carries a control-plane launcher
// (envtest) that would otherwise make up a third of metactl's binary and
// of its resident memory in production.
const devBinary = "metactl-dev"

func newDevCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "dev [flags]",
		Short: "Run a local control plane with metactl in it (and optionally an example)",
		Long: `dev starts etcd, kube-apiserver and kube-controller-manager on this machine
(loopback only), installs metactl's CRDs, writes a kubeconfig, and runs
metactl against it; with --example it also runs that example's hook.
Run "metactl dev --help" for its flags.

dev is the metactl-dev program, looked for next to this binary, then on
$PATH; from a checkout of metactl it is built into the user cache if
neither has it. "make build" builds both.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := findDevBinary()
			if err != nil {
				return err
			}
			// Exec, not a child process: Ctrl-C and SIGTERM reach metactl-dev
			// directly, and no metactl process waits around it.
			return syscall.Exec(path, append([]string{path}, args...), os.Environ())
		},
	}
}

// findDevBinary returns the path of metactl-dev: next to this executable,
// else on $PATH, else built from the checkout in the working directory.
func findDevBinary() (string, error) {
	if self, err := os.Executable(); err == nil {
		candidate := filepath.Join(filepath.Dir(self), devBinary)
		if _, err := os.Stat(candidate); err == nil {
			return candidate, nil
		}
	}
	if path, err := exec.LookPath(devBinary); err == nil {
		return path, nil
	}
	if _, err := os.Stat(filepath.Join("cmd", devBinary)); err != nil {
		return "", fmt.Errorf("%s is neither next to metactl nor on $PATH; build it with `make build` or `go build -o bin/ ./cmd/...` in a checkout of metactl", devBinary)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding a folder to build %s into: %w", devBinary, err)
	}
	out := filepath.Join(cache, "metactl", "bin", devBinary)
	fmt.Fprintf(os.Stderr, "metactl dev: building %s into %s\n", devBinary, out)
	build := exec.Command("go", "build", "-o", out, "./cmd/"+devBinary)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return "", fmt.Errorf("go build ./cmd/%s failed", devBinary)
		}
		return "", fmt.Errorf("go build ./cmd/%s: %w", devBinary, err)
	}
	return out, nil
}
