# Every target bootstraps .venv/ with the pinned stack on first use.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
RESULTS ?= results

.PHONY: test bench asv dashboard venv system-deps clean

# Debian packages the tests need: graphviz renders `explain --graph`, chromium opens the
# report, the graph and the asv dashboard headless, npm fetches the dashboard's scripts.
# Installed only where missing.
SYSTEM_PACKAGES := graphviz:dot chromium:chromium npm:npm
APT := $(shell [ "$$(id -u)" = 0 ] || echo sudo) apt-get

system-deps:
	@missing=""; for entry in $(SYSTEM_PACKAGES); do \
	  command -v $${entry#*:} >/dev/null || missing="$$missing $${entry%%:*}"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(APT) update -qq && DEBIAN_FRONTEND=noninteractive $(APT) install -y -qq --no-install-recommends $$missing; \
	fi

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first and exactly pinned, so pip takes the local CPU wheel and never a CUDA build.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

test: $(STAMP) system-deps
	$(PY) -m pytest

# The report is written even when some records failed; the exit status is compare's.
bench: $(STAMP)
	$(VENV)/bin/layoutbench compare --zoo quick --strategies all --out $(RESULTS); status=$$?; \
	$(VENV)/bin/layoutbench report $(RESULTS) && exit $$status

# asv over the last commit (quick: one sample each); the environment is created once.
asv: $(STAMP)
	$(VENV)/bin/asv machine --yes
	$(VENV)/bin/asv run --quick HEAD^!

# asv's dashboard, made to work without CDN access (scripts fetched through npm).
dashboard: $(STAMP)
	$(VENV)/bin/asv publish
	$(VENV)/bin/layoutbench dashboard .asv/html

clean:
	rm -rf $(VENV) $(RESULTS) *.egg-info
