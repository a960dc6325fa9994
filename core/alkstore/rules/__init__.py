"""The rules: core's pure decisions, with no I/O, each with one owner (ADR 014, ADR 062).

Names and their validation (``_names``), ``@every`` specs and boundaries (``_spec``,
``_boundary``), options and their resolution (``_options``), listing orders (``_orders``), the
payload codec (``_codec``), a URL's redaction (``_urls``), the job lifecycle's decisions
(``_lifecycle``), kept results (``_results``), job graphs and their validation (``_graphs``),
operators' limits and cursors (``_operations``), steps, sleeps and events (``_steps``), rate limits
(``_rates``), the public records the stores hand out (``_records``) and the facades' argument
checks (``_args``). Every runtime asks these and carries out the answer through the port.

May import: ``alkstore.port`` and ``alkstore.errors``; never the scheduler, the store or the worker.
"""
