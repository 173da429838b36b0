"""Serving engines' own speculative-decoding counters, read: one module per format.

* **vLLM Prometheus exposition** and **llama.cpp ``llama-server`` /metrics** — one text
  format, the same counter names under two prefixes (:mod:`.prometheus`);
* **vLLM per-request metrics** JSON (:mod:`.vllm_per_request`);
* **llama.cpp ``llama-speculative-simple``'s printed statistics** (:mod:`.speculative_simple`);
* **SGLang** exports no comparable counters: rejected with that message (:mod:`.reading`).

Each format's names and label sets are read from the engine's source (cited in its module).
Every format becomes one :class:`~.spec_counters.SpecCounters`, checked for consistency;
:func:`~.reading.read_counters` reads files of any of them (the format recognised by
content). What the counters say about α is :mod:`realrun.engine_metrics`.
"""
