"""The store and its handles: what an application holds (ADR 028, ADR 062).

``_store_async`` the facade (``AsyncStore``, ``open_async``) and ``_inspection_async`` its calls for
operators; ``_kernel_async`` the one layer behind it that every handle calls (engine, clock,
codec, telemetry, queue configs), and the one door through which a claimed job is finished;
the handles ``_queue_async``, ``_job_async`` (a claimed job), ``_outbox_async`` and
``_locks_async``; ``_steps_async`` a claimed job's steps, sleeps and waits and a store's emits
(ADR 069); ``_tasks`` the task registry (no I/O; it enqueues through either runtime).
Each ``*_async`` module has its generated sync twin beside it.

May import: ``alkstore.port``, ``alkstore.rules``, ``alkstore.scheduler`` (a store serves its
schedules) and ``alkstore.errors``; never the worker, nor the public modules above it (the
telemetry it reports to is the port's ``TelemetryPort``).
"""
