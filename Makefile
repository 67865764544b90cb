# Targets a newcomer would guess. Each installs what it needs (redis-server
# from Debian's packages, as root) or stops with a clear message.
GO       ?= go
# FAULTS compiles in the engine's fault points (internal/mutation), which
# the tests' controls switch on; builds without it, every shipped binary's,
# carry none of them.
FAULTS   := -tags redlock_faults
# The library (engine, multiplex) is the root module, with only the
# dependencies a service importing it must accept; the tools (bench,
# results, cmd) are modules of their own, tied together by go.work.
MODULES  := . engine/otelredlock bench results cmd
PKGS     := $(patsubst %,./%/...,$(MODULES:.=))
PKGS     := ./... $(PKGS)
RUNS     := results/runs

.PHONY: all modules test bench bench-cluster compare scenarios chaos controls sim lint vet fmt cover benchmark clean deps test-deps

all: test

# deps installs redis-server (with redis-benchmark) when it is missing.
deps:
	@./.ci/ensure-redis

# test-deps adds headless Chromium, which the report test opens
# report.html in.
test-deps: deps
	@./.ci/ensure-chromium

# The in-repo modules require one another at the version the next release
# tags (docs/releasing.md) and carry no replace directives, so that
# `go install .../cmd/redlock@VERSION` works; go.work ties them together for
# development. bin/modcheck (internal/tools/modcheck) checks them as the
# module proxy will serve them, from a file-based proxy made of the tree.
# The tools module (internal/tools: modcheck, staticcheck pinned) is not in
# go.work, so that its dependencies never reach the library's build list.
TOOLS        := internal/tools
MODCHECK     := bin/modcheck
STATICCHECK  := bin/staticcheck
GOTESTSUM    := bin/gotestsum
INSTALL_REV  ?= HEAD

# Phony, so that go build, with its cache, decides whether they are stale.
.PHONY: tidy install-check release-requires $(MODCHECK) $(STATICCHECK) $(GOTESTSUM)
$(MODCHECK):
	@mkdir -p bin && cd $(TOOLS) && GOWORK=off $(GO) build -o ../../$@ ./modcheck
$(STATICCHECK):
	@mkdir -p bin && cd $(TOOLS) && GOWORK=off $(GO) build -o ../../$@ honnef.co/go/tools/cmd/staticcheck
$(GOTESTSUM):
	@mkdir -p bin && cd $(TOOLS) && GOWORK=off $(GO) build -o ../../$@ gotest.tools/gotestsum

# modules checks that each module of go.work is tidy (go.mod, and go.sum
# but for the in-repo modules' lines, which it never carries) and passes
# go vet on its own go.mod, outside the workspace, resolving the in-repo
# modules from the working tree zipped as the module proxy would serve
# them; and that the tools module is tidy, vetted and passes its tests.
modules: $(MODCHECK)
	@cd $(TOOLS) && { GOWORK=off $(GO) mod tidy -diff || \
		{ echo "module $(TOOLS) is not tidy (run: make tidy)"; exit 1; }; }
	@cd $(TOOLS) && GOWORK=off $(GO) vet ./...
	@cd $(TOOLS) && out=$$(GOWORK=off $(GO) test -count=1 ./... 2>&1) || \
		{ printf '%s\n' "$$out"; echo "module $(TOOLS) fails its tests (cd $(TOOLS) && GOWORK=off go test ./...)"; exit 1; }
	@$(MODCHECK) -go $(GO) check

# tidy rewrites each module's go.mod and go.sum as modules wants them.
tidy: $(MODCHECK)
	cd $(TOOLS) && GOWORK=off $(GO) mod tidy
	$(MODCHECK) -go $(GO) tidy

# install-check runs what a user runs, `go install` of cmd/redlock and
# cmd/redlock-bench at the required version, outside the repository, into
# a temporary GOBIN, from the tree at INSTALL_REV (the last commit; empty
# for the working tree), and checks each binary's --version; redlock must
# not download bench's, results' or the otel adapter's code.
install-check: $(MODCHECK)
	$(MODCHECK) -go $(GO) -rev "$(INSTALL_REV)" install

# release-requires VERSION=vX.Y.Z points every in-repo require, and
# go.work's replaces, at VERSION (docs/releasing.md).
release-requires: $(MODCHECK)
	@test -n "$(VERSION)" || { echo "usage: make release-requires VERSION=vX.Y.Z"; exit 1; }
	$(MODCHECK) -go $(GO) require $(VERSION)

# test runs every module's tests with the race detector, printing each
# test as it ends (TEST_FORMAT: a gotestsum format, e.g. pkgname for one
# line a package), then the simulation's hunted cases (TestMutationsFound)
# again without the race detector, which changes the schedules they
# replay; at the end, the ten slowest tests. The JSON of the run is left
# in bin/test.json. make sim runs a budget of seeds.
TEST_FORMAT  ?= testname
TEST_TIMEOUT ?= 12m
# Tests on the shared masters mostly wait: run more of them at once than
# the two cores go test would allow by default.
TEST_PARALLEL ?= 8
# Packages tested at once: most of their time is spent waiting on
# servers, so more than the two cores.
TEST_PACKAGES ?= 4
test: test-deps $(GOTESTSUM)
	@./.ci/gotest $(GOTESTSUM) $(TEST_FORMAT) bin/test.json -- $(FAULTS) -race -count=1 -p $(TEST_PACKAGES) -parallel $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) $(PKGS) && \
	./.ci/gotest $(GOTESTSUM) $(TEST_FORMAT) bin/test.sim.json -- $(FAULTS) -count=1 -run 'TestSimulation$$|TestMutationsFound' ./bench/sim; \
	status=$$?; cat bin/test.json bin/test.sim.json > bin/test.all.json 2>/dev/null; \
	echo "the ten slowest tests:"; $(GOTESTSUM) tool slowest --jsonfile bin/test.all.json | head -n 10; exit $$status

# flaky runs the tests N times (default 5) beside two processes that keep
# both cores busy, and prints each test that failed and in how many runs:
# a test that fails only under load depends on the machine's speed.
# FLAKY_PKGS chooses the packages (default: every module's), e.g.
# make flaky N=5 FLAKY_PKGS=./engine.
N          ?= 5
FLAKY_PKGS ?= $(PKGS)
.PHONY: flaky
flaky: test-deps $(GOTESTSUM)
	@./.ci/flaky $(GOTESTSUM) $(N) $(TEST_TIMEOUT) $(FAULTS) -parallel $(TEST_PARALLEL) $(FLAKY_PKGS)

# benchmark runs the go test micro-benchmarks (one TryLock+Release cycle, ...).
benchmark: deps
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# bench runs the standard set, each run on five freshly started local
# masters, and writes each under results/runs/<UTC timestamp>-<label>:
#   uncontended  100k resources, try
#   contended    1k resources, zipf:1.1, try
#   hotkeys      10 resources, wait, hold 1ms
# Each run prints its line of redlock-bench run -q: throughput, p50 and
# p99, the errors by kind, the violations, and DEGRADED (errors or leases
# lost: the figures include failed operations) or UNSAFE (violations).
# The target fails when a run is unsafe or fails (measures nothing, cannot
# start); degraded runs are listed at the end, and fail the target only
# with BENCH_STRICT=1 (for CI). BENCH_DURATION sets the measured time of
# each run; BENCH_FLAGS adds flags to every run (e.g.
# BENCH_FLAGS="--workers 256").
BENCH_DURATION ?= 10s
BENCH_FLAGS    ?=
BENCH_STRICT   ?=
# BENCH_SUFFIX is appended to every run's label (bench-cluster sets it).
BENCH_SUFFIX   ?=
bench: deps
	@mkdir -p bin
	$(GO) build -o bin/redlock-bench ./cmd/redlock-bench
	@ts=$$(date -u +%Y%m%dT%H%M%SZ); failed=""; degraded=""; \
	one() { label=$$1$(BENCH_SUFFIX); shift; dir=$(RUNS)/$$ts-$$label; \
		echo "== $$label: redlock-bench run $$* --duration $(BENCH_DURATION) $(BENCH_FLAGS)"; \
		line=$$(bin/redlock-bench run -q --label $$label --out $$dir --duration $(BENCH_DURATION) $(BENCH_FLAGS) "$$@"); rc=$$?; \
		if [ -n "$$line" ]; then echo "   $$line"; echo "   results: $$dir"; fi; \
		case $$rc in 0) ;; 130) exit 130 ;; *) failed="$$failed $$label" ;; esac; \
		case "$$line" in *DEGRADED*) degraded="$$degraded $$label" ;; esac; }; \
	one uncontended --resources 100000 --mode try; \
	one contended --resources 1000 --distribution zipf:1.1 --mode try; \
	one hotkeys --resources 10 --mode wait --hold 1ms; \
	echo; echo "results (summary.txt, summary.json, *.hgrm, *.hlog in each): $(RUNS)/$$ts-*"; \
	if [ -n "$$degraded" ]; then echo "DEGRADED:$$degraded: errors or leases lost; their figures include failed operations (see summary.txt)"; fi; \
	if [ -n "$$failed" ]; then echo "FAILED:$$failed: unsafe or not measured (see the messages above)"; exit 1; fi; \
	if [ -n "$$degraded" ] && [ -n "$(BENCH_STRICT)" ]; then echo "BENCH_STRICT is set: a degraded run fails the target"; exit 1; fi

# bench-cluster runs the standard set of bench on three local Redis
# Clusters of CLUSTER_SHARDS shards each, one vote per cluster, instead of
# five masters, with the same output and exit status; the labels end in
# -clusterS (uncontended-cluster3, ...). CLUSTER_SHARDS, or S for short,
# may be a list (S=1,2,4): the set runs once per value, in that order, and
# the target fails if any set does. Each run records its nodes' CPU, which
# `redlock-bench report` turns into the capacity plan's scaling model.
# BENCH_DURATION, BENCH_FLAGS and BENCH_STRICT work as for bench.
CLUSTER_SHARDS ?= $(if $(S),$(S),3)
bench-cluster:
	@status=0; for s in $$(echo "$(CLUSTER_SHARDS)" | tr ',' ' '); do \
		$(MAKE) --no-print-directory bench BENCH_SUFFIX=-cluster$$s \
			BENCH_FLAGS="--local-masters 3 --cluster-shards $$s $(BENCH_FLAGS)" || status=$$?; \
		[ $$status -eq 130 ] && exit 130; \
	done; exit $$status

# compare is the headline comparison: our engine against both redsync
# baselines (redsync over rueidis, redsync over go-redis), uncontended
# (100k resources, try), 256 workers, on five local masters started once,
# alternating the engines for COMPARE_ROUNDS rounds of COMPARE_DURATION each,
# then measuring the masters' pipelined ceiling (--limit). It prints the
# median table and leaves it, with every run, under
# results/runs/<UTC timestamp>-compare-uncontended/. COMPARE_FLAGS replaces
# --limit (e.g. COMPARE_FLAGS="--limit --hold 1ms").
COMPARE_DURATION ?= 5s
COMPARE_ROUNDS   ?= 3
COMPARE_FLAGS    ?= --limit
compare: deps
	@mkdir -p bin
	$(GO) build -o bin/redlock-bench ./cmd/redlock-bench
	bin/redlock-bench compare --label uncontended --engines redlock,redsync-rueidis,redsync-goredis \
		--resources 100000 --mode try --workers 256 \
		--rounds $(COMPARE_ROUNDS) --duration $(COMPARE_DURATION) $(COMPARE_FLAGS)

# scenarios runs every failure-mode scenario of `redlock-bench scenario list`
# with its defaults, plus the variants whose expected outcome differs:
# restart-amnesia with --quarantine off and observed, paused-holder with
# --fencing, failover, cluster-failover and sentinel-failover with
# --quarantine off,
# clock-jump with --fencing.
# Each writes under results/runs/; the target fails if any verdict is wrong. SCENARIO_FLAGS adds flags to every scenario (e.g. --short).
SCENARIO_FLAGS ?=
scenarios: deps
	@mkdir -p bin
	$(GO) build -o bin/redlock-bench ./cmd/redlock-bench
	@status=0; failed=""; \
	one() { echo "== redlock-bench scenario $$* $(SCENARIO_FLAGS)"; \
		out=$$(bin/redlock-bench scenario "$$@" $(SCENARIO_FLAGS) 2>&1); rc=$$?; \
		echo "$$out" | grep -E '^(verdict|results):' | sed 's/^/   /'; \
		if [ $$rc -ne 0 ]; then status=1; failed="$$failed\n  $$*"; echo "$$out" | tail -n 1 | sed 's/^/   /'; fi; }; \
	for name in $$(bin/redlock-bench scenario list --names); do one $$name; done; \
	one restart-amnesia --quarantine off; \
	one restart-amnesia --quarantine observed; \
	one paused-holder --fencing; \
	one failover --quarantine off; \
	one cluster-failover --quarantine off; \
	one sentinel-failover --quarantine off; \
	one clock-jump --fencing; \
	if [ $$status -ne 0 ]; then printf "wrong verdicts:$$failed\n"; fi; \
	exit $$status

# chaos runs the seeded nemesis soak (redlock-bench chaos) on five local
# masters (CHAOS_FLAGS="--cluster-shards 3": three local Redis Clusters of
# 3 shards with a replica each, and faults inside them too): in-model faults (a minority of masters killed and restarted
# empty, stopped, slowed, cut off or dropping connections; clients frozen
# past the TTL) for CHAOS_DURATION, and fails on any overlapping hold, stale
# token or stale write accepted. The seed is printed; on a failure the
# failing window's history is in the run's history.jsonl, and --seed
# replays the schedule. CHAOS_FLAGS adds flags (e.g. CHAOS_FLAGS="--class
# out-of-model", where fencing must reject every stale write).
CHAOS_DURATION ?= 60s
CHAOS_FLAGS    ?=
chaos: deps
	@mkdir -p bin
	$(GO) build -o bin/redlock-bench ./cmd/redlock-bench
	bin/redlock-bench chaos --duration $(CHAOS_DURATION) $(CHAOS_FLAGS)

# controls shows that the safety checks can fail: the engine's controls
# (each turns one fix off, and its test must then see the bug; make test
# runs them too) and chaos with the nolock engine, which grants every
# request; the target fails if either passes.
controls: deps
	@mkdir -p bin
	$(GO) build -o bin/redlock-bench ./cmd/redlock-bench
	$(GO) test $(FAULTS) -count=1 -run 'Control|Catches' ./engine/
	@bin/redlock-bench chaos --engine nolock --duration 10s >/dev/null 2>&1; rc=$$?; \
	if [ $$rc -ne 1 ]; then echo "chaos with the nolock engine exited $$rc, want 1 (violations found)"; exit 1; fi; \
	echo "chaos with the nolock engine found violations, as it must"

# sim runs the deterministic simulation (bench/sim, docs/simulation.md):
# the engine's real code against simulated masters in virtual time, every
# schedule drawn from a seed, the checkers over every history. It runs
# seeds for SIM_BUDGET of wall time in two processes at GOMAXPROCS=1 (one
# per core; they take every other seed from SIM_FIRST, by default the
# clock), prints the seeds run, the simulated time, the virtual-to-wall
# speed, the operations checked and the violations, and fails on any
# violation, after each failing seed's report, replay command and shrunk
# case (in bin/sim.*.log). SIM_FLAGS adds flags (e.g. SIM_FLAGS="-sim.clients=8").
SIM_BUDGET ?= 3m
SIM_FIRST  ?= $(shell date +%s)
SIM_FLAGS  ?=
sim:
	@mkdir -p bin
	$(GO) test $(FAULTS) -c -o bin/sim.test ./bench/sim
	@echo "make sim: seeds from $(SIM_FIRST), $(SIM_BUDGET) of wall time in 2 processes at GOMAXPROCS=1"
	@for i in 0 1; do 		GOMAXPROCS=1 bin/sim.test -test.run 'TestSimulation$$' -test.timeout 0 -sim.budget=$(SIM_BUDGET) 			-sim.first=$$(($(SIM_FIRST)+i)) -sim.stride=2 -sim.summary $(SIM_FLAGS) > bin/sim.$$i.log 2>&1 & 	done; wait
	@grep -h -E -- '--- FAIL: TestSimulation/|^ +[a-z][a-z :]+ at [0-9.]+s: |replay:|shrunk in|stalled' bin/sim.*.log || true
	@awk '/^SIM /{ for (i = 2; i <= NF; i++) { split($$i, kv, "="); t[kv[1]] += kv[2]; if (kv[1] == "wall_ms" && kv[2] > w) w = kv[2] } } 		END { if (!t["seeds"]) { print "make sim: no seeds ran (see bin/sim.*.log)"; exit 1 } 			printf "%d seeds, %.2f simulated hours, %.0fx virtual-to-wall per process (%.0fx for both), %d operations checked, %d violations\n", 				t["seeds"], t["virtual_ms"] / 3.6e6, t["virtual_ms"] / t["wall_ms"], t["virtual_ms"] / w, t["ops"], t["violations"]; 			exit t["violations"] > 0 }' bin/sim.*.log

# redlock builds bin/redlock, the distributed flock(1) (redlock exec).
.PHONY: redlock
redlock:
	@mkdir -p bin
	$(GO) build -o bin/redlock ./cmd/redlock

# lint: gofmt, go vet and staticcheck (pinned in $(TOOLS)/go.mod) over
# every module, the tools module included, and make modules (each module
# tidy and vetted on its own go.mod).
lint: vet modules $(STATICCHECK)
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed (run: make fmt):"; echo "$$out"; exit 1; fi
	@echo "staticcheck $(PKGS) $(TOOLS)/..."; status=0; \
	$(STATICCHECK) $(PKGS) || status=1; \
	$(STATICCHECK) $(FAULTS) $(PKGS) || status=1; \
	(cd $(TOOLS) && GOWORK=off ../../$(STATICCHECK) ./...) || status=1; \
	exit $$status

vet:
	$(GO) vet $(PKGS)
	$(GO) vet $(FAULTS) $(PKGS)
	cd $(TOOLS) && GOWORK=off $(GO) vet ./...

fmt:
	gofmt -w .

cover: test-deps
	$(GO) test $(FAULTS) -count=1 -coverprofile=coverage.out $(PKGS)
	$(GO) tool cover -func=coverage.out | tail -1

clean:
	rm -rf coverage.out bin
