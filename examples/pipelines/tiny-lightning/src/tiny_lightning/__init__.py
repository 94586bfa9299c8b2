"""tiny-lightning: a small Lightning MLP classifier trained on a synthetic, in-process dataset.

Run it with ``python -m tiny_lightning.cli train ...``; ``python -m tiny_lightning.cli schema`` prints
the JSON Schema of the ``key=value`` overrides it accepts.
"""

__version__ = "0.1.0"
