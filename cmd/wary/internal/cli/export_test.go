package cli

import (
	"runtime/debug"

	"github.com/spf13/cobra"
)

// ServiceBusHarness is the servicebus:// probe harness, for tests that
// wrap it.
var ServiceBusHarness HarnessFunc = serviceBusHarness

// VersionOf is versionOf, as the JSON that wary version --json prints.
func VersionOf(bi *debug.BuildInfo) any { return versionOf(bi) }

// Root is the command tree, for tests that walk it (its commands' Example
// texts); running it is Run's.
func Root() *cobra.Command { return (&app{io: IO{Getenv: func(string) string { return "" }}}).root() }
