"""``csd measure``: measure α and cost coefficients of real models into a model-set file.

Example::

    csd measure path/to/target path/to/drafter --mag --prompts all --limit 4 \\
        --max-new-tokens 32 -o measured.json
    csd recommend --from measured.json

Models are hub ids already in the local cache, local directories or ``.gguf`` files
(converted once); the first is the target, then drafters largest first; ``--mag`` appends
Max-Gram (bigram fallback from ``--bigram FILE``, else counted over the shipped prompts).
"""

from __future__ import annotations

import argparse
import json

HELP = "measure acceptance rates and pass costs of real models (writes a csd.models/1 file)"


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments shared by ``csd measure`` and ``csd realrun``."""
    parser.add_argument("models", nargs="+", metavar="MODEL",
                        help="target first, then drafters largest first (hub id, dir or .gguf)")
    parser.add_argument("--mag", action="store_true", help="append Max-Gram as the last drafter")
    parser.add_argument("--bigram", metavar="FILE", help="Max-Gram bigram table (.npz)")
    parser.add_argument("--prompts", default="all",
                        help="shipped set (gsm8k_style, mmlu_style, code, all) or a JSONL file")
    parser.add_argument("--limit", type=int, default=None, help="use the first N prompts")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--leniences", type=float, nargs="+", default=[1.0, 2.0, 3.0, 5.0])
    parser.add_argument("--max-m", type=int, default=12, help="time passes of m = 1..MAX_M")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("-o", "--output", required=True, help="model-set file to write")


def load_chain(args: argparse.Namespace):
    """(chain of TokenModels/Proposer, tokenizer, prompt id lists, Decoding) from ``args``."""
    import torch
    from transformers.utils import logging as hf_logging

    from ewif import _validate
    from realrun.bigram import BigramTable
    from realrun.hf_model import HFTokenModel
    from realrun.loading import check_shared_vocabulary, load_model
    from realrun.maxgram import MaxGram
    from realrun.prompts import encode, load_prompts
    from simulate.tokens.sampling import Decoding

    hf_logging.disable_progress_bar()
    if args.threads is not None:
        torch.set_num_threads(_validate.count("--threads", args.threads, minimum=1))
    decoding = Decoding(args.temperature, args.top_p)
    prompts = load_prompts(args.prompts, limit=args.limit)
    loaded = []
    for source in args.models:
        loaded.append(load_model(source, device=args.device, dtype=args.dtype))
    names = [m.name for m in loaded]
    if len(set(names)) != len(names):
        raise ValueError(f"models must be distinct, got names {names}")
    check_shared_vocabulary({m.name: m.tokenizer for m in loaded})
    widths = {m.vocab_size for m in loaded}
    if len(widths) != 1:
        raise ValueError("models share a tokenizer but not the logit width: "
                         + ", ".join(f"{m.name}={m.vocab_size}" for m in loaded))
    tokenizer = loaded[0].tokenizer
    chain = [HFTokenModel(m.model, m.name) for m in loaded]
    if args.mag:
        if args.bigram:
            table = BigramTable.load(args.bigram, tokenizer)
        else:
            table = BigramTable.from_corpus([p.text for p in load_prompts("all")], tokenizer,
                                            vocab_size=loaded[0].vocab_size)
        chain.append(MaxGram(table))
    elif args.bigram:
        raise ValueError("--bigram needs --mag")
    if len(chain) < 2:
        raise ValueError("give at least two models (target and a drafter), or one and --mag")
    ids = [encode(p, tokenizer) for p in prompts]
    return chain, tokenizer, ids, decoding


def run(args: argparse.Namespace) -> int:
    from ewif import io as model_io
    from realrun.measure import measure
    from realrun.report import format_model_set

    chain, tokenizer, ids, decoding = load_chain(args)
    model_set = measure(chain, ids, max_new_tokens=args.max_new_tokens,
                        leniences=args.leniences, max_m=args.max_m, repeats=args.repeats,
                        warmup=args.warmup, decoding=decoding,
                        eos_token_id=tokenizer.eos_token_id)
    model_io.save(model_set, args.output)
    if args.json:
        print(json.dumps(model_set.to_dict(), indent=2))
    else:
        print(format_model_set(model_set))
        print(f"written: {args.output}  (next: csd recommend --from {args.output})")
    return 0
