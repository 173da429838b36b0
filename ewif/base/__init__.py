"""What every part of the project may use: checks, limits, arithmetic, tables, configurations.

Argument checks (:mod:`.validate`), work limits, arithmetic, text tables, the chosen
configuration (:mod:`.configuration`), the bootstrap's draws (:mod:`.resampling`) and the
row-cost bound of a curve (:mod:`.row_cost`): plain data and definitions, no evaluation, so
``simulate``'s witnesses may use them too. Imports nothing of ewif outside ``ewif.base``."""
