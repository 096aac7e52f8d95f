"""The tools on top of the suite and its history. ``tune`` (the fastest verified
configuration) and ``bisect`` (the files and functions a failing variant must build with
the good flags) build and run trials outside ReFrame (:mod:`apptune.core.run.localrun`) and edit the
data with what they find; ``plan`` (with ``plan_report``) chooses the jobs that fit a
budget from the history's runs; ``bless`` promotes a verified run into the references and
baselines, and ``scaffold`` starts a new application's data (``apptune new``)."""
