GO      ?= go
PKGS    ?= ./...
BIN     ?= bin
# Fuzz budget per target inside `make test`: brief, and a count of executions
# rather than a duration — Go 1.26's fuzzing coordinator can fail a target
# with a bare "context deadline exceeded" as a -fuzztime duration ends
# (golang/go#75804, fixed in Go 1.27). `make fuzz FUZZTIME=1m` for longer.
FUZZTIME ?= 2000x

.PHONY: run test race unit bench bench-fleet bench-scale lint build fuzz fmt clean chaos npm-deps

# How bin/lovia is built: no local paths (-trimpath), no symbol table or
# DWARF (-s -w): 64 MB instead of 92 (BENCHMARKS.md, The binary).
BUILDFLAGS ?= -trimpath -ldflags='-s -w'

## run: build bin/lovia and start the whole thing on an embedded default
## (lovia dev; its flags in DEV_FLAGS, e.g. DEV_FLAGS='--nats-port 4223');
## Ctrl-C stops it
run: build
	@exec $(BIN)/lovia dev $(DEV_FLAGS)

## test: vet, format check, race-enabled tests, brief fuzzing of the decoders
test: npm-deps lint race
	@FUZZ_SKIP='pkg/provider' ./scripts/fuzz.sh $(FUZZTIME)

## npm-deps: the npm packages the tests run (MCP servers, the Node tool service; pinned lock files)
npm-deps:
	@./scripts/npm-deps.sh

## race: all tests with the race detector
race:
	$(GO) test -race -count=1 -timeout 14m $(PKGS)

## unit: all tests without the race detector (faster)
unit:
	$(GO) test -count=1 $(PKGS)

## bench: benchmarks (see BENCHMARKS.md)
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

## bench-fleet: BenchmarkRawMix and BenchmarkRawMixAPI (the broker's bound,
## submitted by publish and through a plain responder), BenchmarkFleetRuns
## (through the API) and BenchmarkFleetRawSubmit (by raw publish)
## alternately, PAIRS times (default 5), with each round's ratios fleet/raw
## (runs/s, and CPU time a run)
bench-fleet:
	@GO=$(GO) ./scripts/bench-fleet.sh

## bench-scale: the fleet at scale with real processes (one nats-server,
## lovia workers): LIVE live runs on one worker (time until all run, RSS),
## then N live runs' mass failover after a kill -9 to one fresh survivor and
## to three (time until all resumed); PHASES='live fo1 fo3' (BENCHMARKS.md)
bench-scale:
	@GO=$(GO) ./scripts/bench-scale.sh

## lint: go vet, gofmt, and go.mod/go.sum as go mod tidy leaves them
lint:
	@$(GO) mod tidy -diff || { echo "go.mod or go.sum is not tidy: run 'go mod tidy' and commit the result"; exit 1; }
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## fuzz: run every fuzz target (FUZZTIME each)
fuzz:
	@./scripts/fuzz.sh $(FUZZTIME)

## chaos: the full fault-injection suite (test/faults, build tag chaos): a
## 3-node cluster of real nats-server processes and two lovia workers;
## each stream leader killed in turn, one paused; figures in BENCHMARKS.md
chaos:
	$(GO) test -tags chaos -count=1 -timeout 30m -v ./test/faults/

## build: bin/lovia, and bin/worker and bin/gateway as links to it (under
## those names it is `lovia worker` and `lovia gateway`)
build:
	@if [ ! -x $(BIN)/lovia ]; then echo "make: building $(BIN)/lovia: a first build downloads the modules and compiles some 600 packages, a few minutes; later builds take seconds"; fi
	$(GO) build $(BUILDFLAGS) -o $(BIN)/lovia ./cmd/cli
	@ln -sf lovia $(BIN)/worker && ln -sf lovia $(BIN)/gateway

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN)
