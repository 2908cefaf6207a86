"""How people and tools reach fixdev: the command line (``cli``, kept thin),
everything a run prints in each output format (``output``) and the language
server for editors (``lsp``). They parse what they are given and call
``fixdev.files``; they decide nothing about code."""
