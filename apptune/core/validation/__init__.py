"""Every data file checked before anything is built (:mod:`~apptune.core.validation.validate`),
one application's data at a time (:mod:`~apptune.core.validation.datachecks`)."""
