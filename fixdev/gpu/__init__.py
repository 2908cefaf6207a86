"""A fake CUDA GPU on CPU-only machines: the runtime (``fakegpu``), ``--probe``
(``probe``) and the ``fake_gpu`` pytest fixture (``pytest_plugin``, loaded by
pytest wherever fixdev is installed).

Kept import-free: pytest imports this package in every run where fixdev is
installed, and torch is imported only when a fake GPU is asked for."""
