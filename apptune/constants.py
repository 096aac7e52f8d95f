"""File names shared by the ReFrame checks (writers) and the report (reader)."""

#: Per-test result record written into the test's stage/output directory.
RESULT_FILE = "apptune-result.json"
#: Why a check was skipped (ReFrame's run report does not keep skip messages).
SKIP_FILE = "apptune-skip.txt"
#: Curves (NetPIPE, micro-benchmarks) as CSV data files, in the test's stage/output directory.
CURVES_DIR = "curves"
#: A build that failed as its recipe's ``build.expected_failures`` says (reason, compiler message).
XFAIL_FILE = "apptune-xfail.json"
#: What Slurm says of a check's job while it waits for it (one line, rewritten each poll).
SLURM_STATE_FILE = "slurm-state.txt"
#: What ``apptune run`` knew before ReFrame started (applications left out for their data).
RUN_NOTES_FILE = "apptune-run.json"
#: Set by ``apptune run --repeats N`` for its checks: the performance verdict is then the
#: median of the repeats (the run's summary), not each repeat's in ReFrame.
REPEATS_ENV = "APPTUNE_REPEATS"
#: A stack size limit as recipes and the runner's spec write it (``run.stack``):
#: ``unlimited`` or a size with K, M or G.
STACK_LIMIT_PATTERN = r"^(unlimited|[1-9][0-9]*[KMG])$"
