# Targets a newcomer would guess. Each installs what it needs (redis-server
# from Debian's packages, as root) or stops with a clear message.
GO       ?= go
PKGS     := ./...
RUNS     := results/runs

.PHONY: all test bench compare scenarios lint vet fmt cover benchmark clean deps

all: test

# deps installs redis-server when it is missing.
deps:
	@./.ci/ensure-redis

test: deps
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 12m $(PKGS)

# benchmark runs the go test micro-benchmarks (one TryLock+Release cycle, ...).
benchmark: deps
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

bench: deps
	@echo "bench: not implemented yet" >&2; exit 1

lint: vet
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

fmt:
	gofmt -w .

cover: deps
	$(GO) test -count=1 -coverprofile=coverage.out $(PKGS)
	$(GO) tool cover -func=coverage.out | tail -1

clean:
	rm -rf coverage.out bin
