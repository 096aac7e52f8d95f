"""A run's performance judged: against this machine's baselines, bound to their own
noise, with what changed between the baseline's runs and this one (the build, the
environment, the node's state) weighed as causes."""
