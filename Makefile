# Every target bootstraps .venv/ with the pinned stack on first use.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
RESULTS ?= results
# The cost table that prices the time strategies and every record's predicted GPU time in make bench.
COSTS ?= docs/cost-table/h100.json

.PHONY: help all test test-all bench bench-cache bench-rerun bench-workers bench-asv bench-explorer asv dashboard venv explorer system-deps vgf-host arm64-device clean

# `make`: everything the harness and every target need on this machine.
all: system-deps venv vgf-host explorer arm64-device ## set up everything: .venv/, Debian packages, the VGF host runtime, the emulated arm64 device

# `make help`: the targets a user runs, each with the text after its `##`.
help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## /  \1\t/' | expand -t 18

# Debian packages, each with a command or file that shows it is there: graphviz renders
# `explain --graph`, chromium opens the report, the graph and the asv dashboard headless,
# npm fetches the dashboard's scripts, mksh is Android's sh (the tests run a bundle's run.sh
# under it), mesa-vulkan-drivers is lavapipe (the vgf target's Vulkan driver),
# g++-aarch64-linux-gnu cross-builds the runtime for an arm64 device (`runtime build --toolchain`),
# qemu-user and the arm64 packages (multiarch: its C and C++ libraries, Vulkan loader and
# lavapipe) run that runtime on the emulated arm64 device the tests use (`make arm64-device`).
# Each entry is PACKAGE:CHECK (the package may name its architecture). Installed only where missing.
SYSTEM_PACKAGES := graphviz:dot chromium:chromium npm:npm mksh:mksh busybox:busybox mesa-vulkan-drivers:/usr/share/vulkan/icd.d/lvp_icd.x86_64.json \
	g++-aarch64-linux-gnu:aarch64-linux-gnu-g++ qemu-user:qemu-aarch64 libc6:arm64:/lib/ld-linux-aarch64.so.1 \
	libstdc++6:arm64:/usr/lib/aarch64-linux-gnu/libstdc++.so.6 libvulkan1:arm64:/usr/lib/aarch64-linux-gnu/libvulkan.so.1 \
	mesa-vulkan-drivers:arm64:/usr/share/vulkan/icd.d/lvp_icd.aarch64.json
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT := $(SUDO) apt-get

system-deps:
	@missing=""; for entry in $(SYSTEM_PACKAGES); do \
	  check=$${entry##*:}; command -v $$check >/dev/null || test -e $$check || missing="$$missing $${entry%:*}"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  case "$$missing" in *:arm64*) dpkg --print-foreign-architectures | grep -qx arm64 || $(SUDO) dpkg --add-architecture arm64;; esac; \
	  $(APT) update -qq && DEBIAN_FRONTEND=noninteractive $(APT) install -y -qq --no-install-recommends $$missing; \
	fi

# The emulated arm64 device (tests/helpers/arm64_device.py): Debian's arm64 mksh, busybox and
# vulkaninfo unpacked into the cache, qemu-aarch64 registered with binfmt_misc (root only). A
# host where that fails still builds; the tests that need the device skip, saying why.
arm64-device: $(STAMP) system-deps
	@$(PY) -m tests.helpers.arm64_device || echo "make: the emulated arm64 device's tests will be skipped (reason above)"

venv: $(STAMP)

# The pinned stack is requirements*.txt (pyproject.toml reads the first and the test one).
$(STAMP): pyproject.toml requirements.txt requirements-test.txt requirements-arm.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first and exactly pinned, so pip takes the local CPU wheel and never a CUDA build.
	$(PY) -m pip install --quiet $$(grep '^torch==' requirements.txt)
	$(PY) -m pip install --quiet -e '.[test]'
	$(PY) -m pip install --quiet --no-deps -r requirements-arm.txt
	touch $(STAMP)

# Model Explorer with ExecuTorch's extension (layoutbench explore): the `explorer` extra,
# pinned in requirements-explorer.txt; kept out of the package's own requirements by its size.
EXPLORER_STAMP := $(VENV)/.explorer-installed
explorer: $(EXPLORER_STAMP)
$(EXPLORER_STAMP): $(STAMP) requirements-explorer.txt
	$(PY) -m pip install --quiet -e '.[explorer]'
	touch $(EXPLORER_STAMP)

# The Arm ML SDK binaries need a newer glibc and Vulkan loader than Debian 12 has: this
# fetches Debian trixie's into ~/.cache/layoutbench/vgf-host (harness/targets/arm/vgf_host.py). A host
# where that fails still builds; its vgf records are skipped with the reason.
vgf-host: $(STAMP) system-deps
	$(PY) -m harness.targets.arm.vgf_host || echo "make: vgf records will be skipped on this host (reason above)"

# The import contracts (pyproject.toml, [tool.importlinter]) first: a broken dependency rule
# fails the build before any test runs. Then the suite on every core (pytest-xdist), a test
# file to a worker, so a module-scoped fixture is made once; the slowest tests are listed at
# the end. Two tiers by measured cost (docs/testing.md): `make test` leaves out the tests
# marked slow; `make test-all` (CI, through .ci/run) runs every test.
# PYTEST_ARGS adds options: `make test PYTEST_ARGS="--cov --cov-report="` measures each tier's line coverage.
PYTEST := $(PY) -m pytest -n auto --dist loadfile --durations=20 $(PYTEST_ARGS)

test: $(STAMP) system-deps vgf-host explorer arm64-device ## the fast tier: the import contracts, then every test not marked slow (minutes)
	$(VENV)/bin/lint-imports --no-cache
	$(PYTEST) -m "not slow"

test-all: $(STAMP) system-deps vgf-host explorer arm64-device ## every test, both tiers (what CI runs, through .ci/run)
	$(VENV)/bin/lint-imports --no-cache
	$(PYTEST)

# The report is written even when some records failed; the exit status is the run's.
bench: $(STAMP) ## the quick zoo x all built-in strategies into results/ (priced by the H100 table), then its report
	$(VENV)/bin/layoutbench run --zoo quick --strategies all --costs $(COSTS) --out $(RESULTS); status=$$?; \
	$(VENV)/bin/layoutbench report $(RESULTS) && exit $$status

# The quick zoo x every strategy with --fresh, lowering-prefix cache cold then warm.
bench-cache: $(STAMP) ## the lowering-prefix cache cold then warm
	$(PY) -m pytest tests/test_cache_benchmark.py --benchmark-enable -s -p no:cacheprovider

# A re-run after editing one strategy, without and with a warm server (layoutbench serve).
bench-rerun: $(STAMP) ## a re-run after editing one strategy
	$(PY) -m pytest tests/test_rerun_benchmark.py --benchmark-enable -s -p no:cacheprovider

# One worker against two on the quick zoo (isolated workers, harness/sweep/workers.py).
bench-workers: $(STAMP) ## one worker against two
	$(PY) -m pytest tests/test_workers_benchmark.py --benchmark-enable -s -p no:cacheprovider

# Model Explorer drawing a ViT with every overlay in headless Chromium, against its 10 s target.
bench-explorer: $(STAMP) explorer ## Model Explorer drawing a ViT
	$(PY) -m pytest tests/test_explorer_benchmark.py --benchmark-enable -s -p no:cacheprovider

# asv --quick: a cold run of HEAD against a warm run of a child commit that changes one
# strategy (a clone with its own asv environment and caches, under pytest's temporary directory).
bench-asv: $(STAMP) ## asv: a cold run against a warm one
	$(PY) -m pytest tests/test_asv_benchmark.py --benchmark-enable -s -p no:cacheprovider

# asv over the last commit (quick: one sample each); the environment is created once.
asv: $(STAMP) ## asv over the last commit (quick: one sample each)
	$(VENV)/bin/asv machine --yes
	$(VENV)/bin/asv run --quick HEAD^!

# asv's dashboard, made to work without CDN access (scripts fetched through npm).
dashboard: $(STAMP) ## asv's dashboard, working offline
	$(VENV)/bin/asv publish
	$(VENV)/bin/layoutbench dashboard .asv/html

clean: ## remove .venv/ and results/
	rm -rf $(VENV) $(RESULTS) *.egg-info
