package cli

// ServiceBusHarness is the servicebus:// probe harness, for tests that
// wrap it.
var ServiceBusHarness HarnessFunc = serviceBusHarness
