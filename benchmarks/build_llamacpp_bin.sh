#!/usr/bin/env bash
# Build llama.cpp's own programs (llama-completion: plain decoding; llama-speculative-simple:
# draft-model and n-gram speculation; llama-lookup: n-gram cache lookup decoding;
# llama-server: the HTTP server with parallel slots, built without its web UI) from the
# source vendored in the llama-cpp-python sdist, with -DGGML_NATIVE=ON, once, into
# ${CSD_CACHE:-$HOME/.cache/csd}/llamacpp-bin/<version>/; reuse them when present.
# Prints the directory holding the binaries. Used by benchmarks/peer_llamacpp.py and
# benchmarks/serving_llamacpp.py.
set -euo pipefail
VERSION="${LLAMACPP_VERSION:-0.3.36}"
CACHE="${CSD_CACHE:-$HOME/.cache/csd}"
OUT="$CACHE/llamacpp-bin/$VERSION"
TARGETS=(llama-completion llama-speculative-simple llama-lookup llama-server)
have_all() { for t in "${TARGETS[@]}"; do [[ -x "$OUT/bin/$t" ]] || return 1; done; }
if have_all; then echo "$OUT/bin"; exit 0; fi
SDIST="$("$(dirname "$0")/fetch_llamacpp_sdist.sh")"
WORK="$CACHE/llamacpp-bin/src-$VERSION"
rm -rf "$WORK" && mkdir -p "$WORK"
tar xzf "$SDIST" -C "$WORK"
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
# llama.cpp's logger is asynchronous and not flushed at exit (upstream issue #22142): the
# final lines (timings, acceptance) are lost now and then. Flush it at exit; nothing else
# changes.
sed -i '0,/log->set_colors(tty_can_use_colors());/s||&\n        std::atexit([] { common_log_pause(common_log_main()); });|' \
  "$SRC/common/log.cpp"
[[ $(grep -c 'std::atexit(\[\] { common_log_pause' "$SRC/common/log.cpp") == 1 ]]
start=$(date +%s)
cmake -S "$SRC" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_EXAMPLES=ON \
  -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF >&2
cmake --build "$WORK/build" -j "${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" --target "${TARGETS[@]}" >&2
mkdir -p "$OUT/bin"
for t in "${TARGETS[@]}"; do cp "$WORK/build/bin/$t" "$OUT/bin/"; done
echo "built llama.cpp programs in $(( $(date +%s) - start )) s" >&2
rm -rf "$WORK"
echo "$OUT/bin"
