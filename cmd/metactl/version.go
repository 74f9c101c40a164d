package main

import (
	"encoding/json"
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version and commit, when set at build time with
// -ldflags "-X main.version=v1.2.3 -X main.commit=abc1234", override what
// Go's build information says (the main module's version and the VCS
// revision that `go build` records in a checkout).
var version, commit string

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of metactl, its commit and Go version",
		Long: `version prints metactl's version, the commit it was built from and the Go
version that built it, on one line, or as a JSON object with -o json:
{"version": "v0.3.0", "commit": "abc1234def56", "modified": false,
"goVersion": "go1.26.8"} (commit left out when unknown; modified: the
tree had uncommitted changes).

They come from Go's build information: the main module's version (a tag,
or a pseudo-version of the commit, in a checkout) and the commit that
"go build" records in a checkout; -ldflags "-X main.version=v1.2.3 -X
main.commit=abc1234" overrides them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := buildVersion()
			switch output {
			case "text":
				_, err := fmt.Fprintln(cmd.OutOrStdout(), v)
				return err
			case "json":
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(v.json())
			}
			return fmt.Errorf("--output %q: want text or json", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

// versionInfo is what `metactl version` prints.
type versionInfo struct {
	version   string // v1.2.3, a pseudo-version, or "(devel)"
	commit    string // abbreviated VCS revision, "" if unknown
	modified  bool   // the tree had uncommitted changes
	goVersion string
}

// String reads, e.g., "metactl v0.3.0 (commit abc1234, go1.26.8)".
func (v versionInfo) String() string {
	s := "metactl " + v.version + " ("
	if v.commit != "" {
		s += "commit " + v.commit
		if v.modified {
			s += " with uncommitted changes"
		}
		s += ", "
	}
	return s + v.goVersion + ")"
}

// versionJSON is what `metactl version -o json` prints.
type versionJSON struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	Modified  bool   `json:"modified"`
	GoVersion string `json:"goVersion"`
}

func (v versionInfo) json() versionJSON {
	return versionJSON{Version: v.version, Commit: v.commit, Modified: v.modified, GoVersion: v.goVersion}
}

func buildVersion() versionInfo {
	info, _ := debug.ReadBuildInfo()
	return versionFrom(info, version, commit)
}

// versionFrom reads the version from Go's build information (nil when the
// binary has none), overridden by the -ldflags values when set.
func versionFrom(info *debug.BuildInfo, ldVersion, ldCommit string) versionInfo {
	v := versionInfo{version: "(devel)", goVersion: "go version unknown"}
	if info != nil {
		v.goVersion = info.GoVersion
		if info.Main.Version != "" {
			v.version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				v.commit = s.Value
			case "vcs.modified":
				v.modified = s.Value == "true"
			}
		}
	}
	if ldVersion != "" {
		v.version = ldVersion
	}
	if ldCommit != "" {
		v.commit, v.modified = ldCommit, false
	}
	if len(v.commit) > 12 {
		v.commit = v.commit[:12]
	}
	return v
}
