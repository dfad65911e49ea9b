# The one test command the README names; .ci/run calls it.
GO ?= go

# Every Go module of the repository (docs/layout.md): the library, the Node
# emulators' test support (nodeproc), the drivers that are modules of their
# own, the command, the examples, the test rig and the peer benchmarks.
MODULES := . nodeproc drivers/kafka drivers/sqsfifo drivers/servicebus drivers/nats drivers/gcppubsub cmd/wary examples rig bench/peers

# The build tags the examples module is also vetted, linted and tested
# with, beyond its default build: examples/orders builds each service in
# only under a tag of its name, so that its first run builds only the
# embedded pair (SQLite and the memory broker), and its tests run them all.
EXAMPLES_TAGS := postgres,rabbit,kafka,sqsfifo,servicebus,nats,gcppubsub,trace

# staticcheck, pinned; go run fetches it through the module proxy.
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: test vet lint bench quickstart tidy

test: lint
	@set -e; for m in $(MODULES); do \
	  echo "== $$m"; tags=; [ $$m != examples ] || tags=$(EXAMPLES_TAGS); \
	  (cd $$m && $(GO) vet ./... && { [ -z "$$tags" ] || $(GO) vet -tags "$$tags" ./...; } && \
	    $(GO) test -race -count=1 -tags "$$tags" -timeout 30m ./...); \
	done

vet:
	@set -e; for m in $(MODULES); do tags=; [ $$m != examples ] || tags=$(EXAMPLES_TAGS); \
	  (cd $$m && $(GO) vet ./... && { [ -z "$$tags" ] || $(GO) vet -tags "$$tags" ./...; }); done

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './node_modules/*')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	@set -e; for m in $(MODULES); do echo "== staticcheck $$m"; tags=; [ $$m != examples ] || tags=$(EXAMPLES_TAGS); \
	  (cd $$m && $(STATICCHECK) ./... && { [ -z "$$tags" ] || $(STATICCHECK) -tags "$$tags" ./...; }); done

bench:
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) test -run '^$$' -bench . -benchtime 2s ./...); done

tidy:
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) mod tidy); done

quickstart:
	cd examples && $(GO) run ./quickstart
