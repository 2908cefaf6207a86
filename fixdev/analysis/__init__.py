"""What the rules know about code, shared by all of them and owned by none:
where a value lives (``flow``, the device-flow analysis over CPython's ast),
what a file's syntax tells beyond the flow (``file_analysis``: parents, spans,
which classes are modules, how to spell a device), where a name is bound and a
new definition can go (``placement``), whether code moves a new tensor
itself before it meets anything (``moved``), and what the other files of a run tell
one file (``project``)."""
