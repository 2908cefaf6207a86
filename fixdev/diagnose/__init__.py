"""From an error to the fix (``--traceback``): reading a device error's log
(``log``), finding the files and lines it names (``mapping``), why the value
was where it was (``explain``) and the command that puts them together
(``traceback``)."""
