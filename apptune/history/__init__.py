"""What is kept of runs and what is concluded from them: a run directory read into records,
the history store (SQLite), change points over a series, the verdicts over the history and
two machines compared. Above the core (:mod:`apptune.core`); below the reports and tools."""
