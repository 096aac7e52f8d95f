"""The history store: every run's results (figures, verdicts, provenance, energy) in SQLite.

Two kinds of run: a ``check`` run is one ``apptune run`` (a ReFrame session), a ``trial``
run is one ``apptune tune`` or ``apptune bisect`` command (its trials, each from its
run record); only check runs are judged (change points, trends, regressions).

One database file, ``history.sqlite``, in the history directory
(``$APPTUNE_HISTORY``, default ``${XDG_DATA_HOME:-~/.local/share}/apptune/history``),
next to ReFrame's own results database (``reframe-results.db``, which
``apptune run`` enables).  The schema is in ``MIGRATIONS`` and documented in
docs/regressions.md.

Safe with several writers (nightly, a developer, a second partition's job):
WAL journal, a busy timeout, and every change in one ``BEGIN IMMEDIATE``
transaction, so a run is stored whole or not at all (a crash or a kill in the
middle leaves nothing behind).  Ingesting a run twice stores it once: a run is
keyed by ReFrame's session uuid (a trial session by :attr:`TrialSession.uuid`).
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import sqlite3
from pathlib import Path

from .. import locks, paths
from ..errors import ApptuneError
from .ingest import BUSY_TIMEOUT_S, RunRec, TrialSession, read_run, read_trials

DB_FILE = "history.sqlite"
#: ReFrame's results database (``--performance-compare``, ``--list-stored-sessions``).
REFRAME_DB_FILE = "reframe-results.db"
LOCK_FILE = "history.lock"

#: Ordered schema migrations: version -> statements.  A new version appends an entry
#: (never edits an old one); opening a database applies the missing ones in one
#: transaction each.
MIGRATIONS: list[tuple[int, list[str]]] = [
    (
        1,
        [
            """CREATE TABLE runs (
             id INTEGER PRIMARY KEY,
             session_uuid TEXT NOT NULL UNIQUE,  -- ReFrame's session uuid
             run_dir TEXT,
             started_unix REAL,
             started TEXT,                       -- ISO 8601, UTC
             mode TEXT,                          -- ReFrame --mode (ci, nightly, dev), if any
             hostname TEXT,
             reframe_version TEXT,
             cmdline TEXT,
             num_cases INTEGER,
             num_failures INTEGER,
             ingested TEXT NOT NULL
           )""",
            """CREATE TABLE provenance (
             id INTEGER PRIMARY KEY,
             -- of the canonical JSON: one row per distinct build
             sha256 TEXT NOT NULL UNIQUE,
             json TEXT NOT NULL
           )""",
            """CREATE TABLE results (
             id INTEGER PRIMARY KEY,
             run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
             test TEXT NOT NULL,                 -- ReFrame display name without the repeat
             repeat INTEGER NOT NULL DEFAULT 0,  -- --repeat index
             system TEXT,                        -- system:partition
             app TEXT, tier TEXT, environment TEXT, variant TEXT,
             result TEXT NOT NULL,               -- ReFrame's: pass, fail, skip, xfail, ...
             fail_phase TEXT,
             reason TEXT,                        -- failure/skip reason, or verification summary
             verified INTEGER NOT NULL,          -- 1 when the numbers matched the reference
             provenance_id INTEGER REFERENCES provenance(id),
             energy TEXT,                        -- energy record (JSON)
             UNIQUE (run_id, test, environment, repeat)
           )""",
            """CREATE TABLE figures (
             result_id INTEGER NOT NULL REFERENCES results(id) ON DELETE CASCADE,
             figure TEXT NOT NULL,
             value REAL NOT NULL,
             unit TEXT,
             better TEXT,                        -- higher or lower
             baseline REAL,                      -- the baseline file's value, if any
             baseline_verdict TEXT,              -- regression, improvement, within threshold, ...
             PRIMARY KEY (result_id, figure)
           )""",
            "CREATE INDEX results_series ON results(system, app, tier, environment, variant)",
            "CREATE INDEX runs_started ON runs(started_unix)",
        ],
    ),
    (
        2,
        [
            # run quality (apptune/core/run/quality.py) and the machine (apptune/machine.py) of
            # each result: only clean runs enter the change-point series, a series never
            # mixes machines
            "ALTER TABLE results ADD COLUMN quality_grade TEXT",  # clean, disturbed, unmeasured
            "ALTER TABLE results ADD COLUMN quality TEXT",  # the run-quality record (JSON)
            "ALTER TABLE results ADD COLUMN machine_id TEXT",
            "CREATE INDEX results_machine ON results(machine_id)",
        ],
    ),
    (
        3,
        [
            # the trials of `apptune tune` and `apptune bisect` (apptune/core/run/localrun.py): one
            # run of kind 'trial' per session (mode: the tool), never part of a check's series
            "ALTER TABLE runs ADD COLUMN kind TEXT NOT NULL DEFAULT 'check' "
            "CHECK (kind IN ('check', 'trial'))",
            "CREATE INDEX runs_kind ON runs(kind)",
        ],
    ),
    (
        4,
        [
            # where the ranks ran (the record's placement_layout: ranks, ranks per node,
            # threads, nodes, binding) and the CPU frequency the run asked for, if any:
            # what `apptune plan` reproduces (JSON; NULL for results stored before)
            "ALTER TABLE results ADD COLUMN layout TEXT",
        ],
    ),
    (
        5,
        [
            # the fingerprint behind each machine id (apptune/machine.py), so a page or a
            # comparison names a machine by its CPU, cores and memory, not only by its id
            """CREATE TABLE machines (
             machine_id TEXT PRIMARY KEY,
             json TEXT NOT NULL                  -- the fingerprint's fields (JSON)
           )""",
        ],
    ),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]


#: The history directory (:func:`apptune.paths.history_dir`).
history_dir = paths.history_dir


def private(db: Path) -> None:
    """The database readable by its owner alone (made 0600; an existing one loses the
    permissions of others, its group's stay as its owner set them): it holds the run
    directories, host names and the names of the site's variables. SQLite gives its WAL
    and shared-memory files the database's permissions."""
    if not db.exists():
        os.close(os.open(db, os.O_WRONLY | os.O_CREAT, 0o600))
    for f in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        with contextlib.suppress(OSError):  # gone, or another user's: theirs to change
            mode = f.stat().st_mode
            if mode & 0o007:
                os.chmod(f, mode & 0o7770)


class History:
    """A connection to the history database (created and migrated on open; with
    ``create=False``, for commands that only read it, a missing database is an error)."""

    def __init__(self, directory: str | os.PathLike | None = None, create: bool = True):
        self.dir = Path(directory) if directory else history_dir()
        self.path = self.dir / DB_FILE
        if not create and not self.path.is_file():
            raise ApptuneError(
                self.path,
                None,
                "no history database here (`apptune run` and "
                "`apptune history ingest RUN_DIR` create it; --history or "
                "$APPTUNE_HISTORY choose the directory)",
            )
        try:
            self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            private(self.path)
            # Opening is serialised between processes: switching a new database to WAL
            # needs an exclusive lock and SQLite does not wait for it (no busy handler),
            # so two first openers racing each other got "database is locked".
            with locks.locked(self.dir / LOCK_FILE):
                # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE below)
                self.db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
                self.db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_S * 1000}")
                self.db.execute("PRAGMA journal_mode = WAL")
                self.db.execute("PRAGMA foreign_keys = ON")
                self.db.row_factory = sqlite3.Row
                self._migrate()
        except sqlite3.Error as e:
            raise ApptuneError(self.path, None, f"history database: {e}") from None
        except OSError as e:
            raise ApptuneError(self.dir, None, f"history directory: {e.strerror or e}") from None

    def close(self):
        self.db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @contextlib.contextmanager
    def transaction(self):
        """One write transaction: all of it is stored, or none (also after a crash)."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def version(self) -> int:
        self.db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = self.db.execute("SELECT max(version) FROM schema_version").fetchone()
        return row[0] or 0

    def _migrate(self):
        if self.version() > SCHEMA_VERSION:
            raise ApptuneError(
                self.path,
                "schema_version",
                f"version {self.version()} is newer than this apptune knows "
                f"({SCHEMA_VERSION}): update apptune",
            )
        for version, statements in MIGRATIONS:
            with self.transaction() as db:
                # checked inside the write lock: a concurrent opener may have just applied it
                if (
                    db.execute("SELECT max(version) FROM schema_version").fetchone()[0] or 0
                ) >= version:
                    continue
                for s in statements:
                    db.execute(s)
                db.execute("INSERT INTO schema_version VALUES (?)", (version,))

    # ------------------------------------------------------------------ ingest
    def ingest(
        self,
        run_dir: str | os.PathLike,
        report_file: str | os.PathLike | None = None,
        report: dict | None = None,
    ) -> tuple[str, int, bool]:
        """Store a run (its ReFrame run report and apptune's per-test results).

        Returns (session uuid, number of results, whether it was stored now).
        """
        run = read_run(Path(run_dir), Path(report_file) if report_file else None, report)
        return self._store(run)

    def ingest_trials(self, session: TrialSession) -> tuple[str, int, bool]:
        """Store the trials of one ``apptune tune`` or ``apptune bisect`` command as one run of
        kind ``trial`` (each trial's result as a check's is stored; never judged).

        Returns (session uuid, number of trials, whether it was stored now)."""
        return self._store(read_trials(session))

    def _store(self, run: RunRec) -> tuple[str, int, bool]:
        with self.transaction() as db:
            if db.execute("SELECT 1 FROM runs WHERE session_uuid = ?", (run.uuid,)).fetchone():
                return run.uuid, len(run.results), False
            cur = db.execute(
                "INSERT INTO runs (session_uuid, run_dir, started_unix, started, mode, hostname, "
                "reframe_version, cmdline, num_cases, num_failures, ingested, kind) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    run.uuid,
                    str(run.run_dir),
                    run.started_unix,
                    run.started,
                    run.mode,
                    run.hostname,
                    run.reframe_version,
                    run.cmdline,
                    run.num_cases,
                    run.num_failures,
                    datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                    run.kind,
                ),
            )
            run_id = cur.lastrowid
            for r in run.results:
                prov_id = self._provenance_id(db, r.provenance) if r.provenance else None
                cur = db.execute(
                    "INSERT INTO results (run_id, test, repeat, system, app, tier, environment, "
                    "variant, "
                    "result, fail_phase, reason, verified, provenance_id, energy, quality_grade, "
                    "quality, "
                    "machine_id, layout) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        run_id,
                        r.test,
                        r.repeat,
                        r.system,
                        r.app,
                        r.tier,
                        r.environment,
                        r.variant,
                        r.result,
                        r.fail_phase,
                        r.reason,
                        int(r.verified),
                        prov_id,
                        json.dumps(r.energy.data(), sort_keys=True) if r.energy else None,
                        r.quality.grade if r.quality else None,
                        json.dumps(r.quality.data(), sort_keys=True) if r.quality else None,
                        r.machine_id,
                        json.dumps(r.layout, sort_keys=True) if r.layout else None,
                    ),
                )
                db.executemany(
                    "INSERT INTO figures (result_id, figure, value, unit, better, baseline, "
                    "baseline_verdict) VALUES (?,?,?,?,?,?,?)",
                    [
                        (cur.lastrowid, f.name, f.value, f.unit, f.better, f.baseline, f.verdict)
                        for f in r.figures
                    ],
                )
                if r.machine_id and r.machine:
                    db.execute(
                        "INSERT OR IGNORE INTO machines (machine_id, json) VALUES (?, ?)",
                        (r.machine_id, json.dumps(r.machine, sort_keys=True)),
                    )
        return run.uuid, len(run.results), True

    @staticmethod
    def _provenance_id(db, prov: dict) -> int:
        text = json.dumps(prov, sort_keys=True)
        sha = hashlib.sha256(text.encode()).hexdigest()
        db.execute("INSERT OR IGNORE INTO provenance (sha256, json) VALUES (?, ?)", (sha, text))
        return db.execute("SELECT id FROM provenance WHERE sha256 = ?", (sha,)).fetchone()[0]

    # ------------------------------------------------------------------- query
    # Every query takes ``kind``: runs of kind 'check' unless a caller asks for the trials
    # ('trial') or for both (None); what judges the checks never sees a trial.
    def stored(self, what: str, kind: str | None = "check") -> list[str]:
        """The distinct values stored of ``app``, ``system`` (system:partition) or ``mode``."""
        col = {"app": "results.app", "system": "results.system", "mode": "runs.mode"}[what]
        src = "runs" if col.startswith("runs.") else "results JOIN runs ON results.run_id = runs.id"
        where, args = _kind_where(kind)
        return [
            r[0]
            for r in self.db.execute(
                f"SELECT DISTINCT {col} FROM {src} WHERE {col} IS NOT NULL{where} ORDER BY 1", args
            )
        ]

    def mode_of(self, session_uuid: str | None) -> str | None:
        """The ReFrame mode of the stored run of a session (None: not stored, or no mode)."""
        row = self.db.execute(
            "SELECT mode FROM runs WHERE session_uuid = ?", (session_uuid,)
        ).fetchone()
        return row["mode"] if row else None

    def runs(self, mode: str | None = None, kind: str | None = "check") -> list[sqlite3.Row]:
        where, args = _kind_where(kind)
        if mode:
            where, args = where + " AND mode = ?", [*args, mode]
        q = f"SELECT * FROM runs WHERE 1{where} ORDER BY started_unix, id"
        return self.db.execute(q, args).fetchall()

    def recent_run_dirs(
        self, n: int, system: str | None = None, mode: str | None = None, app: str | None = None
    ) -> list[Path]:
        """The run directories of the last ``n`` stored check sessions with results of the
        selection (oldest first) that still exist on disk: the nights a baseline can be
        recorded from."""
        where, args = _selection(["runs.run_dir IS NOT NULL"], system, mode, app)
        k, kargs = _kind_where("check")
        rows = self.db.execute(
            "SELECT DISTINCT runs.id, runs.run_dir, runs.started_unix "
            "FROM results res JOIN runs ON res.run_id = runs.id "
            f"WHERE {' AND '.join(where)}{k} ORDER BY runs.started_unix DESC, runs.id DESC",
            args + kargs,
        ).fetchall()
        dirs = [Path(r["run_dir"]) for r in rows if (Path(r["run_dir"]) / "report.json").exists()]
        return dirs[:n][::-1]

    def grades(
        self,
        system: str | None = None,
        mode: str | None = None,
        app: str | None = None,
        kind: str | None = "check",
    ) -> dict[str, int]:
        """How the stored results of a selection stand: ``results`` in all, ``unverified``,
        and of the verified ones ``clean`` and ``disturbed`` (any other grade, or none)."""
        where, args = _selection(["1 = 1"], system, mode, app)
        k, kargs = _kind_where(kind)
        row = self.db.execute(
            "SELECT count(*), sum(res.verified = 0), "
            "sum(res.verified = 1 AND res.quality_grade = 'clean'), "
            "sum(res.verified = 1 AND coalesce(res.quality_grade, '') != 'clean') "
            "FROM results res JOIN runs ON res.run_id = runs.id "
            f"WHERE {' AND '.join(where)}{k}",
            args + kargs,
        ).fetchone()
        keys = ("results", "unverified", "clean", "disturbed")
        return dict(zip(keys, (x or 0 for x in row), strict=True))

    def samples(
        self,
        system: str | None = None,
        mode: str | None = None,
        app: str | None = None,
        kind: str | None = "check",
        clean: bool = True,
    ) -> list[sqlite3.Row]:
        """Every verified figure value of a clean run, with its run, in run order (disturbed
        or unmeasured runs are stored, never part of a series); ``clean=False``: of runs of
        every grade (``quality_grade`` says which), for what shows them as such."""
        where, args = _selection(
            ["res.verified = 1", "res.result IN ('pass', 'fail')"]
            + (["res.quality_grade = 'clean'"] if clean else []),
            system,
            mode,
            app,
        )
        k, kargs = _kind_where(kind)
        return self.db.execute(
            "SELECT runs.session_uuid, runs.started, runs.started_unix, runs.run_dir, runs.mode, "
            "res.system, res.app, res.tier, res.environment, res.variant, res.test, res.repeat, "
            "f.figure, f.value, f.unit, f.better, f.baseline, p.json AS provenance, "
            "res.machine_id, res.quality_grade, res.quality, "
            "json_extract(res.energy, '$.trust') AS energy_trust FROM figures f "
            "JOIN results res ON f.result_id = res.id JOIN runs ON res.run_id = runs.id LEFT JOIN "
            f"provenance p ON res.provenance_id = p.id WHERE {' AND '.join(where)}{k} ORDER BY "
            "runs.started_unix, runs.id, res.repeat",
            args + kargs,
        ).fetchall()

    def verified_runs(
        self, tier: str, system: str | None = None, machine_id: str | None = None
    ) -> list[sqlite3.Row]:
        """Every verified result of a check of ``tier`` on ``system`` (a system matches its
        partitions) or the machine ``machine_id``, with its wall time, energy and recorded
        peak power figures, the energy's grade (``trust``), its layout and the run's mode, in
        run order."""
        where, args = _selection(["res.verified = 1", "res.tier = ?"], system, None, None)
        args = [tier, *args]
        if machine_id:
            where.append("res.machine_id = ?")
            args.append(machine_id)
        fig = "(SELECT value FROM figures WHERE result_id = res.id AND figure = '{}')"
        return self.db.execute(
            "SELECT res.app, res.tier, res.environment, res.variant, res.system, res.layout, "
            "res.quality_grade, json_extract(res.energy, '$.trust') AS trust, runs.mode, "
            f"runs.started_unix, {fig.format('wall_time')} AS wall_time, "
            f"{fig.format('energy_J')} AS energy_J, {fig.format('peak_power_W')} AS peak_power_W "
            "FROM results res JOIN runs ON "
            f"res.run_id = runs.id WHERE runs.kind = 'check' AND {' AND '.join(where)} "
            "ORDER BY runs.started_unix, runs.id, res.repeat",
            args,
        ).fetchall()

    def machines(self) -> dict[str, dict]:
        """The fingerprint of each machine id stored (runs stored before the fingerprints
        were kept have an id only, and are not here)."""
        return {
            r["machine_id"]: json.loads(r["json"])
            for r in self.db.execute("SELECT machine_id, json FROM machines ORDER BY machine_id")
        }

    def session(self, prefix: str, kind: str | None = "trial") -> sqlite3.Row:
        """The one stored run whose session uuid starts with ``prefix``."""
        where, args = _kind_where(kind)
        rows = self.db.execute(
            f"SELECT * FROM runs WHERE substr(session_uuid, 1, ?) = ?{where} ORDER BY started_unix",
            [len(prefix), prefix, *args],
        ).fetchall()
        if len(rows) != 1:
            what = "tune or bisect session" if kind == "trial" else "run"
            raise ApptuneError(
                self.path,
                None,
                f"no {what} '{prefix}'"
                if not rows
                else f"{len(rows)} sessions start with '{prefix}': give more of the uuid",
            )
        return rows[0]

    def results(self, session_uuid: str) -> list[dict]:
        """The results of one stored run, each with its figures (name -> (value, unit))."""
        rows = self.db.execute(
            "SELECT res.* FROM results res JOIN runs ON res.run_id = runs.id "
            "WHERE runs.session_uuid = ? ORDER BY res.id",
            (session_uuid,),
        ).fetchall()
        out = []
        for r in rows:
            figs = self.db.execute(
                "SELECT figure, value, unit FROM figures WHERE result_id = ? ORDER BY figure",
                (r["id"],),
            ).fetchall()
            out.append(dict(r) | {"figures": {f["figure"]: (f["value"], f["unit"]) for f in figs}})
        return out


def _selection(
    where: list[str], system: str | None, mode: str | None, app: str | None
) -> tuple[list[str], list]:
    """``where`` with the conditions of a selection of results (a system matches its
    partitions too: ``local`` is ``local:default``), and their arguments."""
    where, args = list(where), []
    for col, val in (("res.system", system), ("runs.mode", mode), ("res.app", app)):
        if val:
            where.append(f"({col} = ? OR {col} LIKE ?)" if col == "res.system" else f"{col} = ?")
            args += [val, f"{val}:%"] if col == "res.system" else [val]
    return where, args


def json_field(text: str | None):
    """A JSON column's value (None for NULL)."""
    return json.loads(text) if text else None


def _kind_where(kind: str | None) -> tuple[str, list]:
    """The condition on ``runs.kind`` (None: every kind), to append to a WHERE clause."""
    return ("", []) if kind is None else (" AND runs.kind = ?", [kind])
