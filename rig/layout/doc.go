// Package layout holds the tests of the repository's shape, which the
// guide docs/layout.md promises:
//
//   - what a user downloads: a program importing broker, drivers/rabbit,
//     idem and idem/postgres, given wary's modules as a fresh module proxy
//     would serve them, costs at most 22 module zips and 150 MB of module
//     cache after go mod tidy, and keeps its own AWS and Azure versions;
//   - the layers read one way: no two top-level folders import each other,
//     and no package imports a folder on a floor above its own;
//   - the wary command does not link package testing.
//
// The weight test serves the committed tree (git HEAD) and needs git and
// the Go module proxy; without them it skips, and fails under
// WARY_REQUIRE_SERVICES=1.
package layout
