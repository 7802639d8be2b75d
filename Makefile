# tollgate — make test is the command CI runs (.ci/run) on a fresh machine.
# It installs what the tests need: staticcheck (Go module proxy), redis-server,
# lua-check and chromium (Debian packages) and the Temporal CLI dev server (go
# install), each only where missing.

GO          ?= go
GOBIN       ?= $(shell $(GO) env GOPATH)/bin
export PATH := $(GOBIN):/usr/local/go/bin:$(PATH)

STATICCHECK_VERSION ?= v0.8.2
TEMPORAL_VERSION    ?= v1.5.1
FUZZTIME            ?= 30s
REDIS_PORT          ?= 6390
export TOLLGATE_REDIS_ADDR ?= 127.0.0.1:$(REDIS_PORT)
export TOLLGATE_TEMPORAL_CLI ?= $(GOBIN)/temporal

.PHONY: all test unit lint fmt vet staticcheck lualint bench fuzz demo histories tools redis temporal chromium clean

all: test

## test: lint, then every test with the race detector (what CI runs).
test: lint redis temporal chromium
	$(GO) test -race -count=1 -timeout 20m ./...

## unit: tests without lint.
unit:
	$(GO) test -race -count=1 ./...

lint: fmt vet staticcheck lualint

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

staticcheck: $(GOBIN)/staticcheck
	$(GOBIN)/staticcheck ./...

$(GOBIN)/staticcheck:
	GOBIN=$(GOBIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

## lualint: luacheck on the Redis store's scripts as Redis runs them.
lualint:
	@scripts/luacheck.sh
	TOLLGATE_LUACHECK=1 $(GO) test -count=1 -run '^TestLuaLint$$' ./capacity/redisstore

## bench: every benchmark, with allocations.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## fuzz: run each fuzz target for FUZZTIME.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/^func //'); do \
	    echo "== $$pkg $$f ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

## redis: install (Debian's redis-server) and start a throwaway server on REDIS_PORT.
redis:
	@scripts/redis.sh $(REDIS_PORT)

## chromium: install Debian's chromium if missing (a test opens the demo's HTML report in it, headless).
chromium:
	@scripts/chromium.sh

## temporal: build the Temporal CLI dev server with go install if missing.
temporal: $(GOBIN)/temporal

$(GOBIN)/temporal:
	GOBIN=$(GOBIN) $(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_VERSION)

## demo: a nightly batch and an interactive assistant share one quota on a real dev server,
## the budget and the cost ledger in Redis (then: go run ./cmd/tollgate cost -prefix tollgate-demo).
demo: temporal redis
	$(GO) run ./samples/assistant-batch/demo $(DEMO_FLAGS)

## histories: record the replay histories (workflows/testdata/histories) again
## on a dev server the recorder starts; commit them after a deliberate change.
histories: temporal
	TOLLGATE_RECORD_HISTORIES=1 $(GO) test -count=1 -v -run '^TestRecordHistories$$' ./workflows/

clean:
	-@[ -f .redis/redis.pid ] && kill $$(cat .redis/redis.pid) 2>/dev/null; rm -rf .redis
