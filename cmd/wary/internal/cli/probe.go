package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

func (a *app) probeCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "probe URL",
		Short:   "Measure a live broker's promises on a scratch queue and compare them with its declaration",
		Example: `  wary probe 'mem://scratch?profile=sqsfifo'`,
		Args:    cobra.ExactArgs(1),
		RunE:    func(*cobra.Command, []string) error { return errors.New("probe: not built yet") },
	}
}
