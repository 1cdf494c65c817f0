# Two entry points: `make demo` and `make test`. Each creates .venv if missing and installs
# everything it needs (CPU torch first, so no multi-GB CUDA build is pulled in).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEMO := .demo/workspace
DEMO_FROM ?= example_workspace
# (the test suite runs `make demo` with DEMO_FROM set to its own indexed copy of
# example_workspace/, BIN to its interpreter's folder and `-o $(STAMP)`: nothing reinstalled,
# nothing embedded again: tests/integration/test_readme.py)

PG_CONFIG ?= pg_config
PGVECTOR_SRC ?= ../shared/vendor/pgvector-0.8.6.tar.gz

.PHONY: demo test unit test-deep clean pgvector docs

# constraints.txt pins what this machine resolves quickly (the CPU torch on disk, litellm
# 1.106.2); the package itself declares ranges.
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt torch
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# The PostgreSQL index tests need the pgvector extension in the local PostgreSQL. Debian has no
# package of it for PostgreSQL 15: when it is missing and we can (root, apt-get), install the
# server headers and build it from the vendored source (../shared/vendor/README.md), about 10 s.
# OPTFLAGS="" keeps the build portable (-march=native dies with SIGILL on other CPUs). When we
# cannot, say why and go on: the PostgreSQL tests then skip, with the reason. Checks one file
# when it is already there.
pgvector:
	@if ! command -v $(PG_CONFIG) >/dev/null 2>&1; then \
		echo "pgvector: PostgreSQL is not installed (no pg_config): the PostgreSQL tests skip"; \
	elif test -f "$$($(PG_CONFIG) --sharedir)/extension/vector.control"; then :; \
	elif [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
		echo "pgvector: not installed in $$($(PG_CONFIG) --sharedir), and building it needs root"\
			"and apt-get (see ../shared/vendor/README.md): the PostgreSQL tests skip"; \
	elif ! test -f $(PGVECTOR_SRC); then \
		echo "pgvector: not installed and $(PGVECTOR_SRC) is missing: the PostgreSQL tests skip"; \
	else \
		echo "pgvector: building it from $(PGVECTOR_SRC) (server headers from apt, ~1 min)"; \
		d=$$(mktemp -d) && \
		( apt-get install -y -qq postgresql-server-dev-15 >/dev/null 2>&1 || \
			{ apt-get update -qq && apt-get install -y -qq postgresql-server-dev-15 >/dev/null; } ) && \
		tar xzf $(PGVECTOR_SRC) -C "$$d" && \
		$(MAKE) -s -C "$$d/pgvector-0.8.6" OPTFLAGS="" PG_CONFIG=$(PG_CONFIG) >/dev/null && \
		$(MAKE) -s -C "$$d/pgvector-0.8.6" OPTFLAGS="" PG_CONFIG=$(PG_CONFIG) install >/dev/null \
		|| echo "pgvector: the build failed (see above): the PostgreSQL tests skip"; \
		rm -rf "$$d"; \
	fi

demo: $(STAMP)
	rm -rf $(DEMO) && mkdir -p .demo && cp -rp $(DEMO_FROM) $(DEMO)
	$(BIN)/mdmem -w $(DEMO) remember "User wants every CLI command to print --json on request" --type preference --importance 0.8
	$(BIN)/mdmem -w $(DEMO) remember "Integration tests need the db service: docker compose up -d db" --type skill
	$(BIN)/mdmem -w $(DEMO) entries memory.md
	$(BIN)/mdmem -w $(DEMO) index
	$(BIN)/mdmem -w $(DEMO) search "which port does the test database use" -k 3
	@echo "--- a person edits world_state.md by hand (5433 -> 6543); the next search sees it:"
	$(BIN)/python -c "import pathlib; p = pathlib.Path('$(DEMO)/world_state.md'); \
		p.write_text(p.read_text().replace('host port 5433', 'host port 6543'))"
	$(BIN)/mdmem -w $(DEMO) search "which port does the test database use" -k 3 --explain
	$(BIN)/mdmem -w $(DEMO) search "中文" -k 2 --mode keyword
	$(BIN)/mdmem -w $(DEMO) status
	@echo "--- full mode: the task, the world, the sessions, and the memory section of a prompt"
	$(BIN)/mdmem -w $(DEMO) task
	$(BIN)/mdmem -w $(DEMO) world db
	$(BIN)/mdmem -w $(DEMO) sessions
	$(BIN)/mdmem -w $(DEMO) context "which port does the test database use" --budget-tokens 800 --model gpt-4o
	@echo "--- compaction and extraction, offline (no API key): a dry run shows the diff, then for real"
	$(BIN)/mdmem -w $(DEMO) compact enum-ci --offline --dry-run
	$(BIN)/mdmem -w $(DEMO) compact enum-ci --offline
	$(BIN)/mdmem -w $(DEMO) sessions record enum-ci
	@echo "--- an agent runs the rest of the task through the library (examples/agent_loop.py)"
	$(BIN)/python examples/agent_loop.py $(DEMO)
	@echo "--- a team: a researcher and a writer in one workspace, a child agent with a parent, GLOBAL (examples/team.py)"
	rm -rf .demo/team
	MDMEM_GLOBAL=$(CURDIR)/.demo/team/global $(BIN)/python examples/team.py .demo/team

# The docs site (mkdocs.yml): the references regenerated from the code, then built into .site/
# with every warning an error.
docs: $(STAMP)
	$(BIN)/python scripts/docs_references.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

test: $(STAMP) pgvector
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/python scripts/docs_references.py --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet
	$(BIN)/python -m pytest -q -n 4 --maxschedchunk 1 -m 'not serial' --durations=25
	$(BIN)/python -m pytest -q -m serial --durations=5

# The unit tests alone: no process started, no model loaded (tests/unit/conftest.py refuses both),
# about a minute; `make test` runs them with the integration tests.
unit: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 tests/unit

# The property tests only, with many random examples (the `deep` profile in tests/conftest.py).
# Pin what it finds with @example so every run checks it from then on.
test-deep: $(STAMP)
	HYPOTHESIS_PROFILE=deep $(BIN)/python -m pytest -q -m hypothesis

clean:
	rm -rf .demo .pytest_cache .ruff_cache .site
