"""One timed run of an application, the same for the checks and for tune and bisect: its
plan and preparation, the runner on the job's node (the steps, the run quality, the
ranks and their binding, the machine knobs, the scratch directory, the libraries loaded),
the run record made of what it left, and the watch over Slurm jobs and ReFrame itself."""
