"""The rule engine: what a rule is (``rule``), what it produces (``findings``),
where its nodes sit in the text (``spans``, ``source``), which rules exist and
which a run selects (``registry``, its generated ``rule_table``), and one text
through the selected rules with their fixes applied (``core``).

It knows no single rule and no file: ``fixdev.files`` feeds it text, the
rules in ``fixdev.codemods`` plug into it."""
