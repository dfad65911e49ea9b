# The one test command the README names; .ci/run calls it.
GO ?= go

.PHONY: test vet bench quickstart

test:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 30m ./...

vet:
	$(GO) vet ./...

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...

quickstart:
	$(GO) run ./examples/quickstart
