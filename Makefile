# Gatehouse. `make run` starts it on embedded defaults; `make test` installs
# what the tests need on a fresh Debian machine and runs every test.

GO      ?= go
BIN     ?= bin/gatehouse
PKGS    := ./...

.PHONY: run build deps generate check-generate vet test test-race bench bench-scale fuzz clean

run:
	$(GO) run ./cmd/gatehouse serve

build:
	$(GO) build -o $(BIN) ./cmd/gatehouse

# Everything the tests need that a fresh Debian 12 machine lacks.
deps:
	bash .ci/install-deps

generate:
	$(GO) tool templ generate

# Generated templ code must match its sources.
check-generate: generate
	git diff --exit-code -- '*_templ.go'

vet:
	$(GO) vet $(PKGS)

# The browser tests drive real Chromium with the Playwright driver from npm;
# deps (bash .ci/install-deps) installs both, and they must pass in CI.
# ./browser/ is not run under -race: playwright-go v0.6401.0 races with
# itself (page.go:941 creating a page while request.go:290 reads it for a
# route being aborted, both on its own goroutines), which fails the run
# whatever our code does.
test: deps check-generate vet
	$(GO) test -count=1 -timeout 30m $(PKGS)
	$(GO) test -count=1 -race -timeout 30m ./broker/...

bench:
	$(GO) test -run '^$$' -bench . -benchmem -timeout 60m $(PKGS)

# The scaled-out shape under load: embedded against a three-node cluster
# with one and two brokers (README, "Scaling out").
bench-scale:
	$(GO) test -run '^$$' -bench ScaledOut -benchtime 20000x -timeout 30m ./e2e/

# A short run of every fuzz target in the module; corpora live in each
# package's testdata/fuzz.
FUZZTIME ?= 30s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

clean:
	rm -rf bin
