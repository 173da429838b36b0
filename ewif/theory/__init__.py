"""The paper's theory: probability generating functions, T_α, the vertical and horizontal
closed forms (Section 4) and their sympy proofs. Imports ``ewif.base`` only."""
