"""What the data files say, read and resolved: recipes and their variants and build plans,
the inputs of each tier, the site (the ReFrame configuration, the clusters), the selection
of part of a run, the tuning spaces and the planted faults."""
