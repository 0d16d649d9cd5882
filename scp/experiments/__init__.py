"""The paper's experiments: one module per notebook's computations, each docstring naming its notebook.

Only the CLI, the notebooks and the tests import from here.
"""
