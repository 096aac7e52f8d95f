"""What builds, runs and verifies an application, in wings, each importing only itself
and the wings below it (tests/test_imports.py ``CORE_WINGS``), top down:

* :mod:`~apptune.core.validation`: every data file validated before anything starts;
* :mod:`~apptune.core.judge`: performance against the machine's baselines, and what
  changed between two runs;
* :mod:`~apptune.core.run`: the timed run on a node (placement, knobs, run quality,
  scratch, energy) and its run record, for the checks and for tune and bisect;
* :mod:`~apptune.core.builds` and :mod:`~apptune.core.verification`, side by side: the
  sources, patches, the build's steps and the build cache; the outputs read and checked
  against their references;
* :mod:`~apptune.core.data`: what the data files say: recipes and their variants, inputs,
  the site, the tuning spaces, the planted faults.

Below the history and the reports; above the schemas (:mod:`apptune.models`) and the shared
base modules."""
