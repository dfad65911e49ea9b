package cli

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionJSON is what wary version prints.
type versionJSON struct {
	// Module is the command's module path, Version its version: a
	// release tag (v0.3.0), a pseudo-version, or "(devel)" for a build
	// from a work tree.
	Module  string `json:"module"`
	Version string `json:"version"`
	// Revision and Modified are the VCS revision of a build from a work
	// tree, and whether it had uncommitted changes.
	Revision string `json:"revision,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

// versionOf reads the version from the binary's build information (nil:
// none, as in a binary built without module support).
func versionOf(bi *debug.BuildInfo) versionJSON {
	v := versionJSON{Module: "github.com/wary-go/wary/cmd/wary", Version: "unknown", Go: runtime.Version()}
	if bi == nil {
		return v
	}
	if bi.Main.Path != "" {
		v.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of wary this command was built from",
		Long: `version prints the module version the binary was built from (a release
tag for "go install ...@v0.3.0", "(devel)" for a build from a clone, with
its VCS revision) and the Go version.`,
		Example: `  wary version
  wary version --json`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			bi, _ := debug.ReadBuildInfo()
			v := versionOf(bi)
			return a.out(v, func(w io.Writer) {
				fmt.Fprintf(w, "%s %s", v.Module, v.Version)
				if v.Revision != "" {
					fmt.Fprintf(w, " (%s", v.Revision)
					if v.Modified {
						fmt.Fprint(w, ", modified")
					}
					fmt.Fprint(w, ")")
				}
				fmt.Fprintf(w, " %s\n", v.Go)
			})
		},
	}
}
