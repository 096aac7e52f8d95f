"""The tools that build and run trials outside ReFrame (:mod:`apptune.localrun`) and edit
the data with what they find: ``tune`` (the fastest verified configuration) and
``bisect`` (the files and functions a failing variant must build with the good flags)."""
