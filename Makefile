# ibgw — top-level, non-recursive build.
#
# Each module folder builds into one static archive (build/<module>/lib<module>.a);
# binaries and tests link the archives they need. Variants of the whole build go to
# their own output folder: O=build/asan SAN=address,undefined, O=build/tsan SAN=thread,
# O=build/fuzz FUZZ=1 (clang + libFuzzer).
#
#   make            build build/bin/ibgwd and build/bin/gwctl
#   make deps       install every Debian package the build, tests and demo need
#   make check      all tests, then the unit tests again under ASan+UBSan
#   make fuzz       build the libFuzzer harnesses and run each for FUZZ_SECONDS
#   make mutants    plant each bug of test/mutants/mutants.ini, check a test catches it
#   make bench      build and run the benchmarks (ratios against peers, same run)
#   make demo       run the appliance on its embedded default
#   make install    DESTDIR=... PREFIX=/usr
#   make deb        build the Debian package into build/deb/ (docs/packaging.md)

O        ?= build
CC       ?= cc
PREFIX   ?= /usr/local
SYSCONFDIR ?= /etc
SAN      ?=
FUZZ     ?=
FUZZ_SECONDS ?= 20
VERSION  := $(shell cat VERSION)

PKGS     := yaml-0.1 json-c libsystemd libibumad libibverbs liburing \
            libnl-3.0 libnl-route-3.0 liburcu-qsbr libmicrohttpd libsodium libpcap \
            libxdp libbpf
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wformat=2 -Wno-format-nonliteral -Wvla -Wpointer-arith -Wundef
CPPFLAGS += -D_GNU_SOURCE -DIBGW_VERSION='"$(VERSION)"' -DIBGW_SYSCONFDIR='"$(SYSCONFDIR)"' -I. $(PKG_CFLAGS)
CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu11 $(WARN) -fno-strict-aliasing -pthread
# x86-64: the LPM tries count bits per lookup; without POPCNT every popcount is a libgcc
# call (half the bulk rate measured). Every x86-64 server since 2009 has it; a build for
# an older baseline (the Debian package) sets ARCH_FLAGS= to leave it out.
ifeq ($(shell uname -m),x86_64)
ARCH_FLAGS ?= -mpopcnt
endif
CFLAGS   += $(ARCH_FLAGS)
LDFLAGS  += -pthread -Wl,--as-needed
LDLIBS   += $(PKG_LIBS)

ifneq ($(SAN),)
CFLAGS   += -fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS  += -fsanitize=$(SAN)
endif
ifneq ($(FUZZ),)
CC       := clang
CFLAGS   += -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer \
            -DIBGW_FUZZING
LDFLAGS  += -fsanitize=fuzzer,address,undefined
endif

# Modules in link order (a module may use only those after it).
# sim/fabric (the simulated fabric's core) uses lib/ only; sim/host (the IB-host
# program's parts) uses the data plane. Their archives let unit tests and fuzzers link
# them without the programs' mains.
# sim/verbs (the simulated HCA: its RC transport and node reader, in the archive for
# their unit tests; and the verbs shim, sim/verbs/vsim_*.c, built only into
# libibverbs2sim.so) uses lib/ only.
MODULES  := gateway mgmt ha sim/host kernel engine ipoib cm sm-client port table pkt sim/verbs sim/fabric lib
MAINS    := gateway/ibgwd.c mgmt/gwctl.c sim/fabric/main.c sim/host/main.c
# The verbs shim defines libibverbs' entry points: it must never be linked into the
# programs (an archive member would satisfy ib_port_verbs.o before libibverbs does), so
# its sources stay out of the module archive.
VSIM_SRCS := $(wildcard sim/verbs/vsim_*.c)
mod_srcs  = $(filter-out $(MAINS) $(VSIM_SRCS),$(wildcard $(1)/*.c))
mod_objs  = $(patsubst %.c,$(O)/%.o,$(call mod_srcs,$(1)))
mod_ar    = $(O)/$(1)/lib$(subst -,_,$(notdir $(1))).a
ARCHIVES := $(foreach m,$(MODULES),$(if $(call mod_srcs,$(m)),$(call mod_ar,$(m))))

UNIT_SRCS := $(wildcard test/unit/test_*.c)
UNIT_BINS := $(patsubst test/unit/%.c,$(O)/test/%,$(UNIT_SRCS))
FUZZ_SRCS := $(wildcard test/fuzz/fuzz_*.c)
FUZZ_BINS := $(patsubst test/fuzz/%.c,$(O)/fuzz/%,$(FUZZ_SRCS))

# The simulated fabric is its own program (sim/fabric/main.c + the sim/fabric archive).
FABRIC_BIN  := $(if $(wildcard sim/fabric/main.c),$(O)/bin/ibgw-fabric)
# An IB-side host of the simulated rack: the gateway's IPoIB link code in a host role
# driving a TAP device (sim/host/*.c, linked with the gateway's archives).
HOST_BIN    := $(if $(wildcard sim/host/main.c),$(O)/bin/ibgw-host)
# Test helper programs: test/tools/<name>.c -> build/tools/<name>.
TOOL_SRCS := $(wildcard test/tools/*.c)
TOOL_BINS := $(patsubst test/tools/%.c,$(O)/tools/%,$(TOOL_SRCS))
# Test tools that run in the kernel (tc BPF programs): built for BPF like the af_xdp port's.
TOOL_BPF  := $(patsubst test/tools/bpf/%.c,$(O)/tools/%.o,$(wildcard test/tools/bpf/*.bpf.c))

# Benchmarks: bench/<name>.c -> build/bench/<name>; `make bench` runs them all. Peers
# from DPDK (Debian libdpdk-dev, installed by `make bench-deps`) are compiled in when
# present (IBGW_HAVE_DPDK), so a benchmark can print ratios against them.
BENCH_SRCS := $(wildcard bench/*.c)
BENCH_BINS := $(patsubst bench/%.c,$(O)/bench/%,$(BENCH_SRCS))
DPDK_CFLAGS := $(shell pkg-config --cflags libdpdk 2>/dev/null)
DPDK_LIBS   := $(shell pkg-config --libs libdpdk 2>/dev/null)
ifneq ($(DPDK_LIBS),)
BENCH_CPPFLAGS := -DIBGW_HAVE_DPDK $(DPDK_CFLAGS)
endif

# The verbs shim (docs/verbs-sim.md): LD_PRELOADed with libumad2sim into processes on the
# simulated rack. Position-independent copies of the shim and of what it uses from
# sim/verbs and lib/, linked -Bsymbolic and exporting only the ibv_* entry points, so its
# copies of lib/ stay private when a program that has its own is the host.
VSIM_LIB  := $(if $(VSIM_SRCS),$(O)/sim/verbs/libibverbs2sim.so)
VSIM_DEPS := sim/verbs/ib_rc.c sim/verbs/sim_node.c lib/ib_simfab.c lib/ib_packet.c \
             lib/ib_hdr.c lib/ib_crc.c lib/ib_gid.c lib/log.c
VSIM_OBJS := $(patsubst %.c,$(O)/pic/%.o,$(VSIM_SRCS) $(VSIM_DEPS))

# libumad2sim, ibsim 0.10's (Debian 12's libumad2sim0) with one fix (sim/umad2sim/README.md):
# LD_PRELOADed into every process on the simulated rack. Foreign code: ibsim's own flags,
# not the project's warnings, and no sanitizer (it runs under the product, not in it).
UMAD2SIM_LIB := $(O)/sim/umad2sim/libumad2sim.so

BINS     := $(O)/bin/ibgwd $(O)/bin/gwctl $(FABRIC_BIN) $(HOST_BIN) $(VSIM_LIB) $(UMAD2SIM_LIB)

.PHONY: all deps bench-deps check unit-tests unit-check check-tsan fuzz fuzzers bench \
        format format-check demo install install-monitoring deb clean mutants
all: $(BINS)

$(O)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<

# The af_xdp port's XDP program: compiled for BPF with clang (whatever CC is) and built
# into eth_port_afxdp.o (.incbin). The multiarch include dir holds asm/types.h.
BPF_CC     ?= clang
# -ffile-prefix-map: the object's debug info and BTF name the source relative to the tree,
# not the build machine's path (it ends up inside the installed ibgwd).
BPF_CFLAGS := -O2 -g -target bpf -Wall -Werror -ffile-prefix-map=$(CURDIR)=. \
              -I/usr/include/$(shell $(BPF_CC) -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
XSK_PROG   := $(O)/port/bpf/eth_port_afxdp.bpf.o
$(XSK_PROG): port/bpf/eth_port_afxdp.bpf.c
	@mkdir -p $(@D)
	$(BPF_CC) $(BPF_CFLAGS) -c -o $@ $<
$(O)/tools/%.bpf.o: test/tools/bpf/%.bpf.c
	@mkdir -p $(@D)
	$(BPF_CC) $(BPF_CFLAGS) -c -o $@ $<
$(O)/port/eth_port_afxdp.o: $(XSK_PROG)
$(O)/port/eth_port_afxdp.o: CPPFLAGS += -DXSK_PROG_OBJ='"$(XSK_PROG)"'

# The status page's files are built into metrics_http.o (.incbin).
$(O)/mgmt/metrics_http.o: $(wildcard mgmt/www/*)

define archive_rule
$(call mod_ar,$(1)): $(call mod_objs,$(1))
	@mkdir -p $$(@D)
	rm -f $$@ && $(AR) rcs $$@ $$^
endef
$(foreach m,$(MODULES),$(if $(call mod_srcs,$(m)),$(eval $(call archive_rule,$(m)))))

LINK = $(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) -Wl,--start-group $(ARCHIVES) -Wl,--end-group $(LDLIBS)

$(O)/bin/ibgwd: $(O)/gateway/ibgwd.o $(ARCHIVES)
	@mkdir -p $(@D)
	$(LINK)

$(O)/bin/gwctl: $(O)/mgmt/gwctl.o $(ARCHIVES)
	@mkdir -p $(@D)
	$(LINK)

$(O)/bin/ibgw-fabric: $(O)/sim/fabric/main.o $(ARCHIVES)
	@mkdir -p $(@D)
	$(LINK)

$(O)/bin/ibgw-host: $(O)/sim/host/main.o $(ARCHIVES)
	@mkdir -p $(@D)
	$(LINK)

$(O)/pic/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fPIC -MMD -MP -c -o $@ $<

$(O)/sim/verbs/libibverbs2sim.so: $(VSIM_OBJS) sim/verbs/vsim.map
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -shared -fPIC -Wl,-Bsymbolic -Wl,--version-script=sim/verbs/vsim.map \
		-Wl,-soname,libibverbs2sim.so -o $@ $(VSIM_OBJS) $(LDLIBS)

$(UMAD2SIM_LIB): $(wildcard sim/umad2sim/*.[ch])
	@mkdir -p $(@D)
	$(CC) -O2 -g -Wall -fPIC -shared -Isim/umad2sim -o $@ \
		sim/umad2sim/umad2sim.c sim/umad2sim/sim_client.c -libmad -libumad -lpthread -ldl

# The shim's unit tests link its objects (not the .so): their ibv_* calls reach it.
VSIM_TESTS := $(filter $(O)/test/test_verbs_sim%,$(UNIT_BINS))
$(VSIM_TESTS): $(O)/test/%: $(O)/test/unit/%.o $(VSIM_OBJS) $(ARCHIVES)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) -Wl,--start-group $(ARCHIVES) -Wl,--end-group \
		$(LDLIBS) -lcmocka

$(O)/tools/%: $(O)/test/tools/%.o $(ARCHIVES)
	@mkdir -p $(@D)
	$(LINK)

$(O)/bench/%.o: bench/%.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(BENCH_CPPFLAGS) $(CFLAGS) -Wno-cast-qual -MMD -MP -c -o $@ $<

$(O)/bench/%: $(O)/bench/%.o $(ARCHIVES)
	@mkdir -p $(@D)
	$(LINK) $(DPDK_LIBS)

$(O)/test/%: $(O)/test/unit/%.o $(ARCHIVES)
	@mkdir -p $(@D)
	$(LINK) -lcmocka

$(O)/fuzz/%: $(O)/test/fuzz/%.o $(ARCHIVES)
	@mkdir -p $(@D)
	$(LINK)

unit-tests: $(UNIT_BINS) $(BINS) $(TOOL_BINS) $(TOOL_BPF)
fuzzers: $(FUZZ_BINS)

deps:
	@sh packaging/deps.sh

# Benchmark peers (DPDK, real prefix tables): large, so not part of `make deps`.
bench-deps:
	@sh packaging/deps.sh --bench

# The whole suite: unit tests, golden config tests, integration tests, then the unit
# tests under ASan+UBSan and under TSan (the threaded ones: rings, engine workers, RCU
# tables, the control server). test/run prints one closing line: "N passed, N failed".
# Like demo, it first installs what it needs (make deps is quick when all is there).
check:
	@$(MAKE) --no-print-directory deps
	$(MAKE) --no-print-directory all unit-tests
	$(MAKE) --no-print-directory O=build/asan SAN=address,undefined unit-tests
	$(MAKE) --no-print-directory O=build/tsan SAN=thread unit-tests
	test/run --build $(O) --asan-build build/asan --tsan-build build/tsan

# Only the unit tests of one build variant (used by check-tsan and by hand).
unit-check: unit-tests
	test/run --build $(O) --only unit

check-tsan:
	$(MAKE) --no-print-directory O=build/tsan SAN=thread unit-check

# Benchmarks print ratios against peers measured in the same run; never pass/fail.
bench: $(BENCH_BINS)
	@for b in $(BENCH_BINS); do echo "== $$b"; $$b || exit 1; done

fuzz:
	$(MAKE) --no-print-directory O=build/fuzz FUZZ=1 fuzzers
	test/fuzz/run build/fuzz/fuzz $(FUZZ_SECONDS)

# Mutation testing (docs/testing.md): each planted bug of the list, one at a time in a
# scratch copy of the tree, must make one of its unit tests fail. The plain build in
# build/ (when present) seeds the scratch build. Before a release, not in every CI run.
# MUTANTS_ARGS: runner options or mutant names, e.g. MUTANTS_ARGS="cm-rtu-any-rcid".
MUTANTS_ARGS ?=
mutants:
	test/mutants/run --build build $(MUTANTS_ARGS)

FORMAT_SRCS = $(shell git ls-files '*.c' '*.h' ':!sim/umad2sim')
format:
	clang-format -i $(FORMAT_SRCS)
format-check:
	clang-format --dry-run --Werror $(FORMAT_SRCS)

demo:
	@$(MAKE) --no-print-directory deps
	$(MAKE) --no-print-directory all
	sim/demo $(O)

install: $(O)/bin/ibgwd $(O)/bin/gwctl install-monitoring
	install -D -m 0755 $(O)/bin/ibgwd $(DESTDIR)$(PREFIX)/sbin/ibgwd
	install -D -m 0755 $(O)/bin/gwctl $(DESTDIR)$(PREFIX)/bin/gwctl
	install -D -m 0644 etc/ibgwd.yaml $(DESTDIR)$(SYSCONFDIR)/ibgw/ibgwd.yaml
	install -D -m 0644 etc/ibgwd.service $(DESTDIR)$(PREFIX)/lib/systemd/system/ibgwd.service
	sed -i 's|@SBINDIR@|$(PREFIX)/sbin|g; s|@SYSCONFDIR@|$(SYSCONFDIR)|g' \
		$(DESTDIR)$(PREFIX)/lib/systemd/system/ibgwd.service
	install -D -m 0644 docs/man/ibgwd.8 $(DESTDIR)$(PREFIX)/share/man/man8/ibgwd.8
	install -D -m 0644 docs/man/gwctl.8 $(DESTDIR)$(PREFIX)/share/man/man8/gwctl.8
	install -D -m 0644 docs/man/ibgwd.yaml.5 $(DESTDIR)$(PREFIX)/share/man/man5/ibgwd.yaml.5
	install -D -m 0644 etc/examples/ibgwd-annotated.yaml \
		$(DESTDIR)$(PREFIX)/share/doc/ibgw/examples/ibgwd-annotated.yaml
	install -D -m 0644 packaging/bash-completion/gwctl \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions/gwctl
	install -D -m 0644 packaging/iproute2/ibgw.conf \
		$(DESTDIR)$(SYSCONFDIR)/iproute2/rt_protos.d/ibgw.conf
	install -D -m 0644 packaging/systemd/ibgw.catalog \
		$(DESTDIR)$(PREFIX)/lib/systemd/catalog/ibgw.catalog

# The monitoring kit (packaging/monitoring/README.md): alert rules, their promtool unit
# tests and the Grafana dashboard, as examples an operator copies or points Prometheus at.
MONITORING := ibgw-alerts.yml ibgw-alerts.test.yml ibgw-dashboard.json README.md
install-monitoring:
	for f in $(MONITORING); do \
		install -D -m 0644 packaging/monitoring/$$f \
			$(DESTDIR)$(PREFIX)/share/ibgw/monitoring/$$f || exit 1; \
	done

# The Debian package (docs/packaging.md). dpkg-buildpackage wants debian/ at the top of
# the tree it builds, so the source files (git's tracked and untracked-but-not-ignored
# ones less those deleted in the work tree; outside git, everything but build/) are
# copied to $(DEB_DIR)/ibgw-VERSION/ with packaging/debian as its debian/, and the .deb
# lands in $(DEB_DIR). The source tree is not touched. The outer make's variables and
# jobserver are kept out of the package build.
DEB_DIR  ?= build/deb
DEB_SRC  := $(DEB_DIR)/ibgw-$(VERSION)
deb:
	rm -rf $(DEB_DIR)
	mkdir -p $(DEB_SRC)
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
		{ git ls-files -z -co --exclude-standard; git ls-files -z -d; } | \
			sort -z | uniq -z -u | grep -zv '^packaging/debian/' | \
			tar --null -T - -cf - | tar -xf - -C $(DEB_SRC); \
	else \
		tar --exclude=./build --exclude=./.git --exclude=./packaging/debian -cf - . | \
			tar -xf - -C $(DEB_SRC); \
	fi
	cp -a packaging/debian $(DEB_SRC)/debian
	cd $(DEB_SRC) && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u MAKEOVERRIDES \
		DEB_BUILD_OPTIONS="parallel=$$(nproc) $$DEB_BUILD_OPTIONS" \
		dpkg-buildpackage -us -uc -b
	@ls -1 $(DEB_DIR)/*.deb

clean:
	rm -rf build

-include $(shell find $(O) -name '*.d' 2>/dev/null)
