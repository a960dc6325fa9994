"""The worker: runs the jobs of a store's queues with the tasks it serves (ADR 021, ADR 062).

``_worker_async`` the worker itself (slots, claim loop, idle wait, drain); ``_execution_async`` a
run of a job's code and its outcome; ``_parts`` its parts that do no I/O (options, counts, a run,
the ack buffer); ``_runs_async`` the table of running jobs;
``_liveness_async`` heartbeats, lease extension and cancellation; ``_reporting_async`` its reports
for operators; ``_maintenance_async`` and ``_upkeep`` the storage upkeep duty and its rules;
``_couriers`` the outboxes it delivers. Each ``*_async`` module has its generated sync twin beside it.

May import: ``alkstore.port``, ``alkstore.rules``, ``alkstore.store`` and ``alkstore.errors``. Nothing
in core imports the worker but the package's ``__init__``.
"""
