# Gatehouse. `make run` starts it on embedded defaults; `make test` installs
# what the tests need on a fresh Debian machine and runs every test.

GO      ?= go
BIN     ?= bin/gatehouse
PKGS    := ./...

.PHONY: run build deps generate check-generate vet test test-race bench fuzz clean

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

test: deps check-generate vet
	$(GO) test -count=1 -timeout 30m $(PKGS)
	$(GO) test -count=1 -race -timeout 30m ./broker/...

bench:
	$(GO) test -run '^$$' -bench . -benchmem -timeout 60m ./policy/... ./broker/... ./e2e/...

# A short run of every fuzz target; the corpus lives in each package's testdata/fuzz.
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./policy/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeEffectRequest$$' -fuzztime $(FUZZTIME) ./broker/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeOpenWork$$' -fuzztime $(FUZZTIME) ./broker/
	$(GO) test -run '^$$' -fuzz '^FuzzParseLine$$' -fuzztime $(FUZZTIME) ./broker/journal/
	$(GO) test -run '^$$' -fuzz '^FuzzVerify$$' -fuzztime $(FUZZTIME) ./broker/journal/

clean:
	rm -rf bin
