"""apptune: application-tuning build harness on ReFrame."""

__version__ = "0.1.0"
