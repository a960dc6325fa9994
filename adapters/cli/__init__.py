"""The ``alkstore`` command line: a driving adapter over the public API."""
