"""Loading causal language models and their tokenizer, offline.

A *source* is one of

* a directory written by ``save_pretrained`` (``config.json`` + weights + tokenizer),
* a local ``.gguf`` file, read by transformers' GGUF reader (``gguf_file=``) and
  dequantized ONCE into a safetensors directory under :func:`cache_root`
  (``~/.cache/csd/models/<sha256-prefix>/``, or ``$CSD_CACHE/<sha256-prefix>/``);
  later loads of the same file content reuse that directory,
* a hub id already present in the local Hugging Face cache. Nothing is downloaded:
  every ``from_pretrained`` call passes ``local_files_only=True``.

All models of one cascade must share one tokenizer, because the cascade passes token
ids between them: :func:`realrun.vocabulary.check_shared_vocabulary` checks it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

#: Environment variable overriding the GGUF conversion cache root.
CACHE_ENV = "CSD_CACHE"
#: Hex digits of the GGUF file's sha256 that name its cache directory.
SHA_PREFIX = 16
_MARKER = "csd-gguf-source.json"
_DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
}


@dataclass(frozen=True)
class LoadedModel:
    """A causal LM ready for inference (eval mode, no grad) with its tokenizer."""

    name: str
    source: str
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    device: torch.device
    dtype: torch.dtype

    @property
    def vocab_size(self) -> int:
        """Number of logit columns (may exceed ``len(tokenizer)`` by padding rows)."""
        return int(self.model.get_output_embeddings().weight.shape[0])


def select_device(device: str | torch.device | None = None) -> torch.device:
    """``device`` as given, else ``cuda`` when available, else ``cpu``."""
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        chosen = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {device!r}"
        ) from None
    if chosen.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but CUDA is not available; use 'cpu'")
    return chosen


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """``None``/``"auto"``: float32 on CPU (the exact reference; :mod:`realrun.pipeline`
    measures which dtype is fastest on the CPU at hand instead of assuming), bfloat16 on a
    GPU that supports it, else float16."""
    if isinstance(dtype, torch.dtype):
        if dtype not in _DTYPES.values():
            raise ValueError(f"dtype must be one of {sorted(_DTYPES)}, got {dtype!r}")
        return dtype
    if dtype is None or dtype == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be 'auto' or one of {sorted(_DTYPES)}, got {dtype!r}")
    return _DTYPES[dtype]


def cache_root() -> Path:
    """Root of the GGUF conversion cache: ``$CSD_CACHE`` or ``~/.cache/csd/models``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "csd" / "models"


def file_sha256(path: str | Path) -> str:
    """Hex sha256 of a file's content, read in 16 MiB chunks (with a progress bar)."""
    path = Path(path)
    digest = hashlib.sha256()
    with (
        path.open("rb") as fh,
        tqdm(
            total=path.stat().st_size,
            unit="B",
            unit_scale=True,
            desc=f"sha256 {path.name}",
            disable=path.stat().st_size < 1 << 28,
            leave=False,
        ) as bar,
    ):
        while chunk := fh.read(1 << 24):
            digest.update(chunk)
            bar.update(len(chunk))
    return digest.hexdigest()


def convert_gguf(gguf_path: str | Path) -> Path:
    """Dequantize a local GGUF file into ``cache_root()/<sha256[:16]>/`` once; return it.

    The directory holds ``config.json``, ``model.safetensors`` (float32, i.e. the exact
    dequantized values), the tokenizer transformers builds from the GGUF metadata, and a
    marker with the full sha256. It is written to a temporary sibling and renamed into
    place, so an interrupted conversion never leaves a half-written cache entry.
    """
    gguf_path = Path(gguf_path).expanduser()
    if not gguf_path.is_file():
        raise FileNotFoundError(f"GGUF file {str(gguf_path)!r} does not exist")
    sha = file_sha256(gguf_path)
    target = cache_root() / sha[:SHA_PREFIX]
    marker = target / _MARKER
    if marker.is_file() and json.loads(marker.read_text()).get("sha256") == sha:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    _announce(gguf_path, target)
    staging = Path(tempfile.mkdtemp(prefix=f".{sha[:SHA_PREFIX]}-", dir=target.parent))
    try:
        kwargs = {"gguf_file": gguf_path.name, "local_files_only": True}
        model = AutoModelForCausalLM.from_pretrained(
            str(gguf_path.parent), dtype=torch.float32, **kwargs, **_dense_gguf()
        )
        quantizer = getattr(model, "hf_quantizer", None)
        if quantizer is not None:  # weights are dense now; drop the GGUF bookkeeping
            quantizer.remove_quantization_config(model)
        tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), **kwargs)
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / _MARKER).write_text(
            json.dumps({"sha256": sha, "gguf_file": gguf_path.name}, indent=1)
        )
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return target


def dense_bytes(gguf_path: str | Path) -> int | None:
    """The size of a GGUF file's weights once dequantized to float32 (4 bytes per
    parameter), from its tensor table; None when the file cannot be read as GGUF."""
    try:
        from gguf import GGUFReader

        return 4 * sum(int(t.n_elements) for t in GGUFReader(str(gguf_path)).tensors)
    except Exception:  # the conversion itself reports an unreadable file
        return None


def _announce(gguf_path: Path, target: Path) -> None:
    """One line on stderr before a conversion: what is converted, where it goes and how
    large it will be; refuses when the cache's disk has not that much room."""
    size = dense_bytes(gguf_path)
    free = shutil.disk_usage(target.parent).free
    if size is not None and size > free:
        raise ValueError(
            f"converting {gguf_path.name} needs {size / 1e6:,.0f} MB in {target.parent}, which "
            f"has {free / 1e6:,.0f} MB free; set ${CACHE_ENV} to a folder with room"
        )
    about = f"{size / 1e6:,.0f} MB" if size is not None else "about 4 bytes per parameter"
    print(
        f"csd: converting {gguf_path.name} ({gguf_path.stat().st_size / 1e6:,.0f} MB) once to "
        f"float32 safetensors in {target} ({about}; later runs reuse it; ${CACHE_ENV} moves "
        "the cache)",
        file=sys.stderr,
        flush=True,
    )


def _dense_gguf() -> dict:
    """``from_pretrained`` options that unpack every GGUF weight into a dense tensor
    (transformers >= 5 can keep GGUF blocks packed, which cannot be saved)."""
    try:
        from transformers import GgufConfig
    except ImportError:  # older transformers always dequantize GGUF files
        return {}
    return {"quantization_config": GgufConfig(dequantize=True)}


def resolve_source(source: str | Path) -> Path | str:
    """A local directory for ``source`` (converting a ``.gguf`` file), else the hub id."""
    path = Path(source).expanduser()
    if path.is_file() and path.suffix.lower() == ".gguf":
        return convert_gguf(path)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise FileNotFoundError(
                f"model directory {str(source)!r} has no config.json (not a save_pretrained "
                "directory); for a GGUF model pass the path of the .gguf file"
            )
        return path
    if path.suffix.lower() == ".gguf" or str(source).startswith((".", "/", "~")):
        raise FileNotFoundError(f"model path {str(source)!r} does not exist")
    return str(source)


def load_tokenizer(source: str | Path) -> PreTrainedTokenizerBase:
    """The tokenizer of ``source`` (see the module docstring), offline."""
    resolved = resolve_source(source)
    try:
        return AutoTokenizer.from_pretrained(str(resolved), local_files_only=True)
    except OSError as exc:
        raise _not_found(source) from exc


def load_model(
    source: str | Path,
    *,
    name: str | None = None,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
) -> LoadedModel:
    """Load a decoder-only causal LM and its tokenizer from ``source``, offline.

    ``device``: ``None``/``"auto"`` picks CUDA when available; ``dtype``: see
    :func:`resolve_dtype`. The model is put in eval mode with gradients off.
    """
    resolved = resolve_source(source)
    chosen = select_device(device)
    torch_dtype = resolve_dtype(dtype, chosen)
    try:
        model = AutoModelForCausalLM.from_pretrained(
            str(resolved), dtype=torch_dtype, local_files_only=True
        )
        tokenizer = AutoTokenizer.from_pretrained(str(resolved), local_files_only=True)
    except OSError as exc:
        raise _not_found(source) from exc
    if getattr(model.config, "is_encoder_decoder", False):
        raise ValueError(
            f"model {str(source)!r} is encoder-decoder; realrun needs a decoder-only LM"
        )
    model.to(chosen).eval().requires_grad_(False)
    return LoadedModel(
        name=name or Path(str(source)).name or str(source),
        source=str(source),
        model=model,
        tokenizer=tokenizer,
        device=chosen,
        dtype=torch_dtype,
    )


def _not_found(source: str | Path) -> FileNotFoundError:
    return FileNotFoundError(
        f"model {str(source)!r} not found: it is not a local directory or .gguf file, and "
        "not in the local Hugging Face cache (nothing is downloaded at run time); "
        "pass a local path or a hub id you have already downloaded"
    )
