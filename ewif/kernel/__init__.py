"""The exact evaluation kernel: pass costs, the K structure, one review call, the catch-up
pass, finite generations and :class:`~ewif.kernel.cascade.Cascade`. Imports ``ewif.base``
and ``ewif.theory``; never the file formats."""
