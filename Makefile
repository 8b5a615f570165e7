# crucible-agent: common tasks. `make demo` is the quickest way to see the agent work.
CARGO ?= cargo

.PHONY: build test e2e bench bench-long bench-remote fuzz fmt demo llm-server clean dist dist-check docs mdbook picture

# The shipped binary (statically linked on Linux/glibc: see scripts/build.sh),
# at target/release/crucible-agent.
build:
	CARGO=$(CARGO) bash scripts/build.sh

# Formatting, lints, then tests; stops at the first step that fails. The
# Crucible-client chat runs once more against the release binary, the one
# Crucible launches.
test:
	$(CARGO) fmt --check
	$(CARGO) clippy --all-targets -- -D warnings
	$(CARGO) test
	CARGO=$(CARGO) bash scripts/build.sh
	CRUCIBLE_AGENT_BIN=$(CURDIR)/target/release/crucible-agent $(CARGO) test --test all crucible_client::

# End-to-end: the release binary driven by acpx and the Python and TypeScript
# ACP SDKs (against a scripted model), a real llama-server (built and cached on
# first use, ~7 min) and real MCP servers. Installs cached in ~/.cache/crucible-e2e.
e2e:
	CARGO=$(CARGO) bash scripts/e2e.sh

# Benchmarks side by side with codex-acp; prints a table, writes bench/results.md.
# Ends with bench-long's session (BENCH_LONG=0 leaves it out).
bench:
	CARGO=$(CARGO) bash scripts/bench.sh

# The 30-turn session on the real local model (llama-server + SmolLM2, about
# 15-30 minutes): per request the tokens processed and reused, the slot, the
# compactions and warm-ups; per turn the time to first token. Replaces its
# section of bench/results.md. BENCH_AGENT=path runs another build,
# BENCH_LABEL names the run, BENCH_PAUSE the seconds between prompts (10).
bench-long:
	CARGO=$(CARGO) bash scripts/bench.sh long

# Only the remote section: serve over WebSocket and Streamable HTTP beside
# stdio (a 200-chunk turn, initialize, 1,000 idle connections, 100 at once).
bench-remote:
	CARGO=$(CARGO) bash scripts/bench.sh remote

# A long fuzz run: 10^6 inputs per target (`make test` runs 256 each).
# FUZZ_CASES=N to change it.
FUZZ_CASES ?= 1000000
fuzz:
	PROPTEST_CASES=$(FUZZ_CASES) $(CARGO) test --release --test all fuzz:: -- --test-threads=2

fmt:
	$(CARGO) fmt

# Release files in dist/: crucible-agent-VERSION-TARGET.tar.gz/.zip (binary,
# README.md, LICENSE) and their .sha256, an npm package and a wheel per target
# (dist/npm/, dist/python/), the npm launcher package, the ACP registry entry
# agent.json and icon.svg. Here: static musl Linux x86_64 and aarch64 builds
# and a mingw Windows x86_64 build (Debian's rustc-web, installed with apt on
# first use); on a Mac, the two macOS builds. DIST_REPO / DIST_BASE_URL set the
# download URLs; DIST_TARGETS="linux-x86_64 …" names the targets (default: all
# this host builds); see scripts/dist.sh.
DIST_TARGETS ?=
dist:
	bash scripts/dist.sh $(DIST_TARGETS)

# Checks dist/ as the ACP registry's CI would (schema, rules, icon, the
# initialize answer and its authMethods), plus checksums, archive contents,
# the Linux binaries statically linked (aarch64 run under qemu-aarch64), the
# Windows one under Wine, the npm packages and wheels installed offline from
# their files and run through npx, npm -g, pip and uvx, the npm launcher's
# tests, and the GitHub workflows against GitHub's schema.
# DIST_AUTH=warn only warns when initialize names no `agent` or `terminal`
# auth method (which the registry requires).
DIST_AUTH ?= require
dist-check:
	bash scripts/dist.sh check --wine --auth $(DIST_AUTH)

# Builds the agent, starts a local LLM server (first run builds it: ~7 min) and
# holds a short ACP conversation with the agent. See scripts/demo.sh.
demo:
	bash scripts/demo.sh

# Builds llama-server and fetches the model into ~/.cache/llm-server-e2e (once).
llm-server:
	bash scripts/llm-server.sh build

# The manual (docs/, an mdBook) built into docs/book/; fails on any warning
# mdbook prints (a broken SUMMARY.md entry, a missing page). mdbook is pinned
# and installed once with cargo into the cache (a few minutes on 2 cores).
MDBOOK_VERSION ?= 0.5.4
MDBOOK_ROOT ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/crucible-docs/mdbook-$(MDBOOK_VERSION)
MDBOOK := $(MDBOOK_ROOT)/bin/mdbook
docs: mdbook
	@out=$$($(MDBOOK) build docs 2>&1); status=$$?; printf '%s\n' "$$out"; \
	if [ $$status -ne 0 ]; then exit $$status; fi; \
	if printf '%s\n' "$$out" | grep -Eq '(WARN|ERROR)'; then echo "mdbook printed warnings (above)" >&2; exit 1; fi

mdbook: $(MDBOOK)
$(MDBOOK):
	$(CARGO) install --locked mdbook --version $(MDBOOK_VERSION) --no-default-features --features search --root $(MDBOOK_ROOT)

# The README's picture, assets/demo.svg, made again from a real model: SmolLM2
# on llama-server, as `make demo` runs it (see scripts/demo-picture.sh).
picture:
	CARGO=$(CARGO) bash scripts/demo-picture.sh

clean:
	$(CARGO) clean
