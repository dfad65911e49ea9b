package cli

import "runtime/debug"

// ServiceBusHarness is the servicebus:// probe harness, for tests that
// wrap it.
var ServiceBusHarness HarnessFunc = serviceBusHarness

// VersionOf is versionOf, as the JSON that wary version --json prints.
func VersionOf(bi *debug.BuildInfo) any { return versionOf(bi) }
