# udpconduit — see README.md. `make test` is the README's test command and what CI runs.
GO      ?= go
export PATH := $(PATH):/usr/local/go/bin:$(HOME)/go/bin
PROGS   := hello amudprun testam testcore testexit
STATICCHECK_VERSION ?= v0.8.2

.PHONY: all build demo test check unit e2e bench gasnet-bench pgo net-bench shm-bench atomic-bench vis-bench hier-bench routes-bench wire-bench loss scale fuzz deps lint vet cross fmt clean

all: build

# Static binaries (no cgo resolver, no dynamic loader) start about 20% faster,
# which shows in the start-up time of large local jobs.
build:
	@mkdir -p bin
	CGO_ENABLED=0 $(GO) build -o bin/ $(addprefix ./cmd/,$(PROGS))

demo: build
	GASNET_SPAWNFN=L ./bin/hello 4 a b c

# The library's packages under the race detector (some tests build only with
# -race), then every test: unit tests and the end-to-end tests (which build
# the programs themselves), then the end-to-end tests again with every job's
# ranks sharing memory (GASNET_SUPERNODE_MAXSIZE=0; on a machine with more
# than 4 of a job's ranks per CPU they would use UDP, and the fault suite
# pins UDP) and every datagram encrypted (GASNET_ENCRYPT=1: the fault suite,
# testcore over UDP and the jobs across network namespaces and ssh run
# with it).
# It first installs what the tests need (deps does nothing when all is
# there), so that on a fresh machine `make demo` and `make test` are all it
# takes.
test: deps vet
	$(GO) test -race -short -count=1 -timeout 10m ./amudp/... ./retransmit/... ./conduit/... ./spawn/...
	$(GO) test -count=1 -timeout 15m ./...
	GASNET_SUPERNODE_MAXSIZE=0 GASNET_ENCRYPT=1 $(GO) test -count=1 -timeout 15m ./tests/
	UDPCONDUIT_AEGIS_WIDTH=128 GOARCH=arm64 $(GO) test -count=1 -exec qemu-aarch64-static ./amudp/internal/wire/

unit:
	$(GO) test -count=1 -short ./amudp/... ./retransmit/... ./spawn/... ./conduit/...

# A smoke test of under two minutes that needs nothing but Go: build, vet,
# the unit tests of the core packages (the pure logic, shared memory and
# the collective engine), and one job of each way to start one that needs
# no daemon or launcher (L, C through /bin/sh, amudprun).
check: build
	$(GO) vet ./...
	$(GO) test -count=1 -short ./retransmit/... ./amudp/internal/... ./amudp/shmem ./conduit/internal/... ./spawn/internal/ctl ./spawn/internal/verdict ./spawn/internal/envconf
	GASNET_SPAWNFN=L bin/hello 2 L
	GASNET_SPAWNFN=C GASNET_CSPAWN_CMD='for i in $$(seq %N); do %C & done; wait' bin/hello 2 C
	bin/amudprun -np 2 bin/hello amudprun

bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime=2s ./amudp/

# Two ranks of one host through shared memory, against UDP, Open MPI's
# shared-memory transport and a C floor (figures, not a test).
shm-bench:
	scripts/shm-bench.sh

# GASNet-EX's udp-conduit and test programs next to ours, alternating
# rounds (scripts/gasnet-bench.sh; GASNET_TARBALL, ROUNDS, ITERS, ONLY).
gasnet-bench:
	scripts/gasnet-bench.sh

# testam and hello built with profile-guided optimization into bin/pgo,
# from profiles of testam's own runs (scripts/pgo.sh).
pgo:
	scripts/pgo.sh

# The network path in each protection mode against raw-UDP floors
# (scripts/net-bench.sh; ITERS, ROUNDS).
net-bench:
	scripts/net-bench.sh $(or $(ITERS),20000) $(or $(ROUNDS),3)

# Remote atomics' fetch-and-add throughput at N = 2, 4, 8 over UDP and
# shared memory, against Open MPI's MPI_Fetch_and_op over TCP and vader
# (figures, not a test).
atomic-bench:
	scripts/atomic-bench.sh

# A strided Put of 1000 8-byte pieces against 1000 single Puts, two ranks
# over UDP loopback, and their ratio (figures, not a test).
vis-bench:
	$(GO) test -run '^$$' -bench StridedPut -benchtime 2000x ./conduit/ | \
		awk '/strided/ { s = $$3 } /puts/ { p = $$3 } { print } END { if (s > 0) printf "1000 Puts / 1 strided Put: %.1fx\n", p / s }'

# Collectives on namespace hosts of two ranks each (a real sshd in each):
# in two levels, in one, and over UDP alone (figures, not a test).
hier-bench: build
	$(GO) test -tags hierbench -count=1 -run TestHierBench -v ./tests/ | grep -v '^=== '

# Choosing each pair's addresses on namespace hosts of two networks, against
# workers pinned to one (ROUTES_BENCH_ROUNDS; root, iproute2, sshd).
routes-bench: build
	ROUTES_BENCH_ROUNDS=$(or $(ROUNDS),5) $(GO) test -tags routesbench -count=1 -run TestRoutesBench -v ./tests/ | grep -v '^=== '

# The network path between two namespace hosts over veth links of MTU
# 1500 and 9000, next to the raw-UDP floors (tests/wire_bench_test.go; ROUNDS).
wire-bench: build
	WIRE_BENCH_ROUNDS=$(or $(ROUNDS),3) $(GO) test -tags wirebench -count=1 -timeout 30m -run TestWireBench -v ./tests/ | grep -v '^=== '

# testcore at 0%, 10% and 30% UDP loss in a network namespace (root, nftables).
loss:
	scripts/loss-bench.sh 4 3000

# How the cost grows with N: hello N against starting N bare programs, and
# collectives in short round trips (figures, not a test). SCALE_N picks the
# N, SCALE_ROUNDS=R alternates R rounds and prints the median ratios, and
# SCALE_COLL=0 leaves the collectives out.
scale:
	scripts/scale.sh $(SCALE_N)

# Every fuzz target for FUZZTIME each (CI: 50000x, a few seconds each), from
# the seed corpora in testdata/fuzz: the wire decoder and opener, the
# shared-memory ring (its records, and its header under every call), the control-frame
# reader, the C spawner's template expander and server list, and the ssh
# server-list, option and ssh_config parsers. The budget is a count of executions, not
# a duration: with a duration, Go 1.26's fuzz coordinator can report its own
# deadline as a failure ("context deadline exceeded", no input written;
# go.dev/issue/75804, fixed in Go 1.27).
FUZZTIME ?= 500000x
FUZZ_TARGETS := ./amudp/internal/wire/:FuzzDecode ./amudp/internal/wire/:FuzzOpen ./amudp/internal/shmring/:FuzzPeek ./amudp/internal/shmring/:FuzzRing ./spawn/internal/console/:FuzzControlFrame ./spawn/internal/cmdtmpl/:FuzzExpandTemplate \
	./spawn/internal/cmdtmpl/:FuzzSplitServers ./spawn/internal/ctl/:FuzzDecodeTable ./spawn/internal/sshc/:FuzzParseServers ./spawn/internal/sshc/:FuzzParseOptions ./spawn/internal/sshc/:FuzzParseConfig \
	./conduit/internal/ifmatch/:FuzzCandidatesAgree ./conduit/internal/coll/:FuzzBox ./spawn/internal/pmi/:FuzzParse ./spawn/internal/pmi/:FuzzClientReplies ./spawn/internal/pmi/:FuzzParseMapping
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t#*:} ($${t%%:*}) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime=$(FUZZTIME) "$${t%%:*}" >/tmp/fuzz.$$$$ 2>&1 || { cat /tmp/fuzz.$$$$; rm -f /tmp/fuzz.$$$$; exit 1; }; \
		tail -1 /tmp/fuzz.$$$$; rm -f /tmp/fuzz.$$$$; \
	done

# System packages the tests need on a fresh Debian machine (root).
# The launchers of the C spawner's tests: SLURM (srun; a running SLURM is
# used as it is, else the tests start one with scripts/slurm-local.sh and
# stop it after them), Open MPI (mpirun.openmpi), MPICH
# (mpiexec.hydra), libopenmpi-dev for make scale's MPI reference and
# libmpich-dev for scripts/direct-bench.sh's (MPICH's hello);
# nftables for the loss script; OpenSSH (sshd, ssh,
# ssh-keygen) for the S spawner's tests, which start their own sshd;
# qemu-user-static to run the wire package's tests built for arm64 (its
# AEGIS assembly there).
DEB_PKGS := gcc slurmctld slurmd slurm-client munge openmpi-bin libopenmpi-dev mpich libmpich-dev nftables iproute2 openssh-server openssh-client qemu-user-static

deps:
	@missing=$$(for p in $(DEB_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		sudo=; if [ "$$(id -u)" != 0 ]; then \
			command -v sudo >/dev/null || { echo "make deps: installing $$missing needs root (or sudo)"; exit 1; }; sudo="sudo -E"; fi; \
		$$sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -q -o DPkg::Lock::Timeout=600 --no-install-recommends $$missing; \
	fi
	$(GO) mod download

# Also the build without the S spawner (-tags udpconduit_nossh).
vet:
	$(GO) vet ./...
	$(GO) vet -tags udpconduit_nossh ./...

fmt:
	gofmt -l -w .

# Other systems compile (Linux has the raw-syscall socket; the others the
# portable one on net.UDPConn, amudp/udp_conn.go).
cross:
	GOOS=darwin $(GO) vet ./...
	GOOS=freebsd $(GO) vet ./...

lint: vet cross
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) -tags udpconduit_nossh ./spawn/...

clean:
	rm -rf bin
