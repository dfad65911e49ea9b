// Package telemetry holds the tests of what broker and idem report to
// OpenTelemetry (spans, links, counters and histograms), read back through
// the SDK's in-memory exporters. They live in the test rig so that a user
// of broker or idem does not download the OpenTelemetry SDK.
package telemetry
