"""fixdev's rules, one module each, plus the analysis they share (``analysis``)."""
