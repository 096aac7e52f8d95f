"""The test of an application check (:class:`AppRun`): one input tier run against a build,
verified and timed."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from pathlib import Path

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.backends import getlauncher
from reframe.core.builtins import run_after, run_before, sanity_function, variable

from .. import energy, placement
from ..constants import (
    CURVES_DIR,
    REPEATS_ENV,
    RESULT_FILE,
    SKIP_FILE,
    SLURM_STATE_FILE,
)
from ..core.data import recipes, site
from ..core.judge import baselines
from ..core.run import knobs, outcome, prepare, quality, runner, runplan, slurm
from ..core.verification import outputs
from ..errors import ApptuneError
from ..models import BaselineVerdicts, RunRecord
from ..yamlio import atomic_write_json
from .fixtures import (
    KNOWN_WRONG,
    expected_wrong_result,
    selected_environment_patterns,
    site_environments,
)
from .reference import reframe_reference


@rfm.xfail(KNOWN_WRONG, expected_wrong_result)
class AppRun(rfm.RunOnlyRegressionTest):
    """Run one input tier of an application against a build, verify it, time it."""

    #: Application name (a recipe in build-recipes/).
    #: :type: str
    app = variable(str)
    valid_systems = ["*"]
    #: System name used for baselines (reference/baselines/<system>/); defaults to
    #: the ReFrame system name.
    #: :type: str or None
    baseline_system = variable(str, type(None), value=None)
    #: Override the tier's rank count (e.g. ``-S num_ranks=4``).
    #: :type: int or None
    num_ranks = variable(int, type(None), value=None)
    #: Wait at most this many seconds for a quiet node before the timed region (the run's
    #: quality is graded either way; apptune/core/run/quality.py). None: ``$APPTUNE_QUIET_WAIT``
    #: (``apptune run --wait-for-quiet``), else the partition's ``extras.quiet_wait_s``, else 0.
    #: :type: float or None
    quiet_wait = variable(float, int, type(None), value=None, loggable=True)

    #: Where an application that writes files (``run.scratch`` of its recipe) writes them: a
    #: new directory under this one, removed after the run. None: the partition's
    #: ``extras.scratch_dir`` (``scratch_dir:`` of a cluster file's partition).
    #: :type: str or None
    scratch_dir = variable(str, type(None), value=None, loggable=True)

    # Runtime placement (apptune/placement.py). Variables, so that the default names stay;
    # ``-P ranks_per_node=full,half`` turns one into a parameter (the clusters' ``placement`` mode).
    #: Ranks per node: ``full`` (a node's cores / threads per rank), ``half`` (half of them,
    #: the same ranks on twice the nodes), or a number; None: the scheduler packs them.
    #: :type: str or None
    ranks_per_node = variable(str, type(None), value=None, loggable=True)
    #: Cores per rank (``--cpus-per-task``) and ``OMP_NUM_THREADS``.
    #: :type: int
    threads_per_rank = variable(int, value=1, loggable=True)
    #: Rank binding: ``core``, ``socket`` or ``none``, spelled for the launcher; None: its default.
    #: :type: str or None
    binding = variable(str, type(None), value=None, loggable=True)

    # Machine knobs (apptune/core/run/knobs.py), set at run time: ``-P cpu_freq=1800000,2400000``
    # runs the application at each frequency in one session.
    #: The CPU frequency as Slurm's ``--cpu-freq`` takes it (kHz, low, medium, high,
    #: highm1 or a governor); None: the node's own.
    #: :type: str or None
    cpu_freq = variable(str, type(None), value=None, loggable=True)
    #: ``on``: ranks may share a core's hardware threads; ``off``: one thread per core.
    #: :type: str or None
    smt = variable(str, type(None), value=None, loggable=True)
    #: ``on`` or ``off`` (``intel_pstate/no_turbo`` or ``cpufreq/boost``, written by the runner).
    #: :type: str or None
    turbo = variable(str, type(None), value=None, loggable=True)

    @property
    def recipe(self):
        return recipes.load_recipe(self.app)

    @property
    def build_variant(self) -> str:
        info = type(self).get_variant_info(self.variant_num, recurse=True)
        return info["fixtures"]["build"]["params"]["variant"]

    @property
    def run_variant(self) -> str:
        """The build variant, plus ``@placement`` when the check has a runtime placement
        (the recipe's ``placement`` parameter, then ranks per node, threads, binding, the
        knobs and another rank count than the tier's): its run plan's."""
        return self.run_plan.run_variant

    @property
    def asked_knobs(self) -> knobs.Asked:
        try:
            return knobs.Asked.of(self.cpu_freq, self.smt, self.turbo)
        except knobs.KnobError as e:
            raise ApptuneError(None, f"{self.unique_name} (-S/-P)", str(e)) from None

    @run_after("init")
    def select_environments(self):
        r = self.recipe
        envs = recipes.environments_for(r, self.tier, self.build_variant)
        known = site_environments()
        unknown = [e for e in envs if known and e not in known]
        if unknown:
            err = ApptuneError(
                recipes.recipe_path(self.app),
                f"tiers.{self.tier}.variants",
                f"unknown environment {', '.join(unknown)} "
                f"(site config has: {', '.join(sorted(known))})",
            )
            # ReFrame turns an exception here into a warning and drops the test, so the
            # run would pass without it: stop the session instead (exit 1, this one line)
            raise SystemExit(f"apptune: error: {err}")
        # `-S valid_prog_environs=gnu,llvm` and ReFrame's `-p PATTERN` narrow the tier's
        # environments (ReFrame's own pruning by -p is undone by an execution mode's default)
        try:
            preset = list(self.valid_prog_environs)
        except Exception:  # unset: the tier decides
            preset = None
        if preset and preset != ["*"]:
            envs = [e for e in envs if e in preset]
        patterns = selected_environment_patterns()
        if patterns:
            envs = [e for e in envs if any(re.match(p, e) for p in patterns)]
        self.valid_prog_environs = envs
        install = recipes.install_of(r, self.build_variant)
        if install is not None:  # a site's module: loaded in the run's job too
            self.modules = list(install.modules)
        self.tags |= {self.tier, self.app, *r.tiers[self.tier].tags}
        self.descr = f"{self.app} {r.version} {self.build_variant} on tier {self.tier}"
        t = r.tiers[self.tier]
        if self.time_limit is None:  # `-S time_limit=...` wins over the tier's
            self.time_limit = t.time_limit
        self.keep_files = [
            RESULT_FILE,
            "provenance.json",
            "verification.json",
            "energy.json",
            runner.SPEC_FILE,
            runner.RECORD_FILE,
            energy.TRACE_FILE,
            CURVES_DIR,
            *(o.file for o in r.run.outputs if o.file != outputs.STDOUT),
        ]

    @run_before("run")
    def prepare(self):
        """The run as data: every step an argument list in the runner's spec
        (:mod:`apptune.core.run.runner`); the job script only starts the runner."""
        r = self.recipe
        self.apply_placement()
        knob_spec = self.apply_knobs()
        part = self.current_partition
        wait = self.quiet_wait
        if wait is None:
            wait = quality.quiet_wait_s(part.extras)
        if wait > 0:  # the wait happens inside the job: it must not eat the run's time limit
            limit = (
                recipes.time_limit_seconds(str(self.time_limit))
                if isinstance(self.time_limit, str)
                else self.time_limit
            )
            if limit:
                self.time_limit = float(limit) + wait
        meters = list(part.extras.get("energy_meters", []))
        hz = float(part.extras.get("energy_sample_hz", 10))
        exclusive = bool(self.exclusive_access or part.extras.get("exclusive_node"))
        central, self.node_meters = meters, []
        if part.scheduler.registered_name in energy.AGENT_SCHEDULERS:
            # node-local meters run beside the job on each of its nodes (energy/agent.py)
            central, self.node_meters = energy.split_node_local(meters)
        prepared = prepare.prepare(
            r,
            self.run_plan,
            prepare.Where(
                environment=self.current_environ.name,
                system=self.current_system.name,
                partition=part.name,
                scheduler=part.scheduler.registered_name,
                num_cpus=part.processor.num_cpus,
                extras=part.extras,
                declared=site.declared_environment(part.local_env, self.current_environ),
            ),
            launch=self.launch_argv(),
            tag=f"{os.getpid()}-{id(self):x}",
            test=self.unique_name,
            job_id=lambda: self.job.jobid,
            quiet_wait=wait,
            meters=central,
            exclusive=exclusive,
            scratch_dir=self.scratch_dir,
            knob_spec=knob_spec,
        )
        self.spec, self.sampler, self.record_identity = (
            prepared.spec,
            prepared.sampler,
            prepared.identity,
        )
        if self.node_meters:
            self.start_node_agents(self.node_meters, hz, exclusive)
        runner.write_spec(os.path.join(self.stagedir, runner.SPEC_FILE), self.spec)
        # the runner starts the parallel launcher itself (launch_argv), so the job script
        # runs it once
        self.executable = shlex.quote(sys.executable)
        self.executable_opts = ["-m", "apptune.core.run.runner", runner.SPEC_FILE]
        self.job.launcher = getlauncher("local")()

    def launch_argv(self) -> list[str]:
        """The partition's parallel launch (e.g. ``mpirun -np 2 --bind-to core``) as an
        argument list: ReFrame's launcher for this job, with the placement's options."""
        if not hasattr(self, "_launch_argv"):
            job, lau = self.job, self.job.launcher
            # ReFrame copies these only when the job is submitted; the launcher reads them now
            job.num_tasks = self.num_tasks
            job.num_tasks_per_node = self.num_tasks_per_node
            job.num_cpus_per_task = self.num_cpus_per_task
            self._launch_argv = placement.launch_argv(lau, job)
        return list(self._launch_argv)

    def apply_placement(self):
        """The run's plan (:func:`apptune.core.run.runplan.make`, as a trial makes its own): the
        input, the variables, and the recipe's named placement (``placement``), ranks per
        node, threads per rank and binding (apptune/placement.py) applied to the job's
        sizes and the launcher's options."""
        name = getattr(self, "placement", "default")
        part = self.current_partition
        try:
            self.run_plan = p = runplan.make(
                self.recipe,
                self.tier,
                runplan.Partition(
                    launcher=part.launcher_type.registered_name,
                    mpi=recipes.Toolchain.from_environ(self.current_environ).mpi,
                    num_cpus=part.processor.num_cpus,
                    scheduler=part.scheduler.registered_name,
                ),
                stage=Path(self.stagedir),
                build_dir=Path(self.build.stagedir),
                build_variant=self.build_variant,
                ranks=self.num_ranks,
                placement=name,
                ranks_per_node=self.ranks_per_node,
                threads=self.threads_per_rank,
                binding=self.binding,
                knob_labels=self.asked_knobs.label(),
            )
        except placement.NoLauncherOptions as e:
            self.skip_with(f"{e} ({recipes.recipe_path(self.app)}: run.placements.{name})")
        except placement.PlacementError as e:
            raise ApptuneError(None, f"{self.unique_name} (-S/-P)", str(e)) from None
        self.num_tasks = p.ranks
        if p.placement.num_tasks_per_node:
            self.num_tasks_per_node = p.placement.num_tasks_per_node
        if p.placement.num_cpus_per_task:
            self.num_cpus_per_task = p.placement.num_cpus_per_task
        self.job.launcher.options = p.placement.options

    def apply_knobs(self) -> dict:
        """The machine knobs asked for (apptune/core/run/knobs.py): the launcher's options for those
        it sets, and the runner's spec of them. Where the node is this machine (the local
        scheduler), a knob it cannot set skips the check with one line saying why; on a
        cluster the runner refuses it on the job's node."""
        asked = self.asked_knobs
        if not asked.to_dict():
            return {}
        part = self.current_partition
        launcher = part.launcher_type.registered_name
        mpi = recipes.Toolchain.from_environ(self.current_environ).mpi
        if part.scheduler.registered_name == "local":
            refused = knobs.unavailable(asked, knobs.node_state(), launcher, mpi)
            if refused:
                self.skip_with("; ".join(refused.values()))
        self.job.launcher.options = list(self.job.launcher.options) + knobs.launcher_options(
            asked, launcher, mpi
        )
        return {"asked": asked.to_dict(), "launcher": launcher, "mpi": mpi}

    def skip_with(self, reason: str):
        """Skip this check, the reason kept for the report (ReFrame's report drops it)."""
        Path(self.stagedir, SKIP_FILE).write_text(reason + "\n")
        self.skip(reason)

    @run_before("run")
    def watch_slurm_job(self):
        # Slurm: a job pending on DOWN/DRAINED nodes is cancelled after a bounded wait
        # (apptune/core/run/slurm.py)
        self.slurm_watch = slurm.watch(
            self.current_partition,
            lambda: self.job.jobid,
            status_file=os.path.join(self.stagedir, SLURM_STATE_FILE),
        )

    @run_after("run")
    def settle_slurm_job(self):
        # before the energy sampler stops: ReFrame's squeue polling takes a failed squeue
        # for the job's end, so wait for its real final state
        if self.slurm_watch is not None:
            self.slurm_watch.settle()

    def _job_outcome(self) -> tuple[dict, str | None]:
        """The job's record (id, nodes, final state) and, when it did not run to its end
        (time limit, node failure, cancelled on dead nodes, slurmctld gone, ...), one
        sentence saying so."""
        info = {
            "scheduler": self.current_partition.scheduler.registered_name,
            "jobid": str(self.job.jobid),
            "state": self.job.state,
        }
        watch = getattr(self, "slurm_watch", None)
        return watch.record(info) if watch is not None else (info, None)

    def start_node_agents(self, meters: list[str], hz: float, exclusive: bool):
        """One sampling agent per node of the Slurm job, started by the job script before
        the timed region and stopped after it (a stop file in the shared stage directory)."""
        from ..energy import agent

        ex = self.current_partition.extras
        out = agent.NODES_DIR
        argv = [
            sys.executable,
            "-m",
            "apptune.energy.agent",
            "--out",
            out,
            "--meters",
            ",".join(meters),
            "--hz",
            str(hz),
            "--options",
            json.dumps(ex.get("energy_meter_options", {})),
            "--context",
            json.dumps(
                {
                    "power_model": ex.get("power_model"),
                    "ncpus": self.current_partition.processor.num_cpus,
                }
            ),
            "--exclusive",
            str(int(exclusive)),
            "--max-seconds",
            str(int(self.time_limit or 86400) + 300),
        ]
        start = (
            'srun --overlap --nodes="$SLURM_JOB_NUM_NODES" --ntasks="$SLURM_JOB_NUM_NODES" '
            "--ntasks-per-node=1 --cpus-per-task=1 --cpu-bind=none --kill-on-bad-exit=0 "
            f"{shlex.join(argv)} > energy-agents.log 2>&1 & apptune_agents=$!"
        )
        ready = (
            f'for _ in $(seq 200); do [ "$(ls {out}/*/{agent.READY} 2>/dev/null | wc -l)" '
            f'-ge "$SLURM_JOB_NUM_NODES" ] && break; sleep 0.1; done'
        )
        self.prerun_cmds = [start, ready] + list(self.prerun_cmds)
        # the runner touches the stop file when the timed region ends; the job's exit status
        # stays the runner's (the application's)
        self.spec.stop_file = f"{out}/{agent.STOP}"
        self.postrun_cmds = [
            "apptune_status=$?",
            "wait $apptune_agents || true",
            "exit $apptune_status",
        ]
        self.keep_files = list(self.keep_files) + [out, "energy-agents.log"]

    @run_after("run")
    def stop_energy_sampler(self):
        rec = self.sampler.stop()
        if self.node_meters:
            from ..energy import agent

            try:
                nodes = len(self.job.nodelist or []) or None
            except Exception:  # the scheduler could not expand the node list
                nodes = None
            node_rec = agent.merge(Path(self.stagedir, agent.NODES_DIR), Path(self.stagedir), nodes)
            rec = energy.prefer(
                self.current_partition.extras.get("energy_meters", []),
                rec,
                node_rec,
                self.node_meters,
            )
        self.energy_record = rec
        atomic_write_json(os.path.join(self.stagedir, "energy.json"), self.energy_record.to_dict())

    # ----------------------------------------------------------------- results
    @run_after("run")
    def record_run(self):
        """The run record (:func:`apptune.core.run.outcome.evaluate`) with this machine's baseline
        verdict, written as ``apptune-result.json`` for every run that ended, passed or not (the
        sanity function only asserts on it)."""
        if self.is_dry_run():
            return
        job, unfinished = self._job_outcome()
        # `-S num_ranks=N` changes the input: fields that depend on the rank count are not compared
        r = self.recipe
        changed = {"ranks"} if self.num_tasks != r.tiers[self.tier].ranks else set()
        result = outcome.evaluate(
            r,
            self.tier,
            Path(self.stagedir),
            dict(self.record_identity, job=job),
            build_dir=Path(self.build.stagedir),
            stdout=self.stdout.evaluate(),
            energy_record=self.energy_record,
            environment=self.current_environ.name,
            variant=self.run_variant,
            changed_inputs=changed,
            unfinished=unfinished,
            stderr=os.path.join(self.stagedir, self.job.stderr),
            no_record=f"it was killed before it ended (job exit code {self.job.exitcode})",
            nodes=self.run_plan.nodes,
        )
        if result.figures is not None:  # verified or not: the performance verdict goes with it
            result.baseline = self.judge_performance(result)
        outcome.write_record(self.stagedir, result)
        self.apptune_result = result

    @sanity_function
    def validate(self):
        k = self.apptune_result.knobs
        if k is not None and k.problems:  # the axis was not run: skipped, not failed
            self.skip_with("; ".join(k.problems))
        v = self.apptune_result.verification
        if v.fields is None:  # nothing to verify: the reason is the whole verdict
            return sn.assert_true(False, msg=v.summary)
        return sn.assert_true(v.ok, msg=f"{self.app}/{self.tier} {self.run_variant}: {v.summary}")

    def judge_performance(self, result: RunRecord) -> BaselineVerdicts:
        """This run against this machine's baseline
        (:func:`apptune.core.judge.baselines.verdicts`)."""
        return baselines.verdicts(
            self.baseline_system or self.current_system.name,
            self.app,
            [result],
            recipes.figure_specs(self.recipe),
        )

    # ------------------------------------------------------------- performance
    @run_before("performance")
    def set_references(self):
        """ReFrame's references: only the figures :meth:`judge_performance` gives a verdict."""
        if self.is_dry_run():  # nothing ran: no figures
            return
        specs = recipes.figure_specs(self.recipe)
        figures = self.apptune_result.figures or {}
        present = {n for n, v in figures.items() if v is not None}
        judged = self.apptune_result.baseline or self.judge_performance(self.apptune_result)
        # `apptune run --repeats N`: the verdict is the median of the N repeats, given after
        # the run (one repeat's outlier is no regression); ReFrame judges no single repeat
        repeated = int(os.environ.get(REPEATS_ENV, "1") or 1) > 1
        self.reference = {} if repeated else reframe_reference(judged.figures, specs)
        self.perf_variables = {
            name: sn.make_performance_function(self._figure(name), fig.unit)
            for name, fig in specs.items()
            if name in present or (name in self.recipe.run.figures and not fig.optional)
        }

    @sn.deferrable
    def _figure(self, name):
        v = (self.apptune_result.figures or {}).get(name)
        if v is None:
            raise ApptuneError(
                self.recipe.run.outputs[0].file, name, "figure missing from the output"
            )
        return v
