"""What builds, runs and verifies an application: recipes and their variants, sources
and patches, the build and its cache, inputs, the timed run on a node (placement, knobs,
run quality, scratch, energy), the outputs checked against references and baselines, and
every data file validated before anything starts. Below the history and the reports;
above the schemas (:mod:`apptune.models`) and the shared base modules."""
