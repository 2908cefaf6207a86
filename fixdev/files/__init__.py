"""Running over files: which files a run looks at (``discovery``), the
settings that apply to each (``config``), one file through the pipeline
(``runner``: read, decode, rules, re-parse check, write), notebooks as one
program (``notebook``), many files on several cores (``parallel``), results
kept by what determines them (``cache``) and writes that never leave a file
half-written (``writer``)."""
