"""Test support shipped with the package, because a test may start the pipeline as a subprocess
(``python -m kdgat``): nothing here is imported unless a test switches it on."""
