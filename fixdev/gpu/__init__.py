"""A fake CUDA GPU on CPU-only machines: the metadata-only fake GPU
(``fakegpu``), the virtual GPU with real values (``runtime``; ``workers``
carries its devices across processes, ``limits`` says what it does not
model), ``--run`` (``run``, ``hook/``), ``--probe`` (``probe``) and the
pytest plugin (``pytest_plugin``: the ``fake_gpu`` fixture and ``pytest
--fixdev-gpu``, loaded by pytest wherever fixdev is installed).

Kept import-free: pytest imports this package in every run where fixdev is
installed, and torch is imported only when a fake GPU is asked for."""
