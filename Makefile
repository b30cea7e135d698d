# The two commands a newcomer needs: `make run` and `make test`. Both install what is missing,
# build incrementally with Ninja (and ccache when present), then do their thing.

BUILD_DIR ?= build
# ccache keys compiles on paths relative to the checkout, not on where it lies: a fresh clone
# in another directory (CI's) reuses what an earlier build on this machine compiled.
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= 1
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo

.PHONY: deps build web test run stop stop-all clean bench format

deps:
	@scripts/install-deps.sh

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja $(CMAKE_FLAGS)

build: deps $(BUILD_DIR)/build.ninja web
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The web console (web/): npm installs exactly the committed lock file, Vite builds web/dist,
# which allotd serves. Rebuilt only when its sources change.
WEB_SOURCES := $(shell find web/src web/scripts -type f 2>/dev/null) web/index.html web/vite.config.js
web: web/dist/index.html

web/node_modules/.installed: web/package-lock.json | deps
	cd web && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

web/dist/index.html: web/node_modules/.installed $(WEB_SOURCES)
	cd web && npm run --silent build

test: build
	@scripts/run-tests.sh $(BUILD_DIR) $(JOBS)

run: build
	@scripts/run-local.sh

stop:
	@scripts/run-local.sh stop

# `make stop`, after cancelling every job (make stop leaves running work running; make run
# re-adopts it).
stop-all:
	@scripts/run-local.sh stop-all

bench: build
	@scripts/run-bench.sh

format:
	find src tests bench -name '*.cc' -o -name '*.h' | xargs clang-format -i
	cd web && npx prettier --write --log-level warn src test ../bench/console

clean:
	rm -rf $(BUILD_DIR)
