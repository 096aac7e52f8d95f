"""A run's outputs read (one module of :mod:`~apptune.core.verification.formats` per
format, the netCDF checksums of the files an I/O benchmark wrote) and verified against
the stored reference, field by field, with tolerances."""
