"""The port: what core and every engine share, and nothing else (ADR 014, ADR 062).

``_runtime_port_async`` is the runtime port (``AsyncRuntimePort``, ``AsyncWaiter``: what the
store, the worker and the scheduler need), ``_operations_port_async`` the operations port
(``AsyncOperationsPort``: what operators read and do), ``_engine_async`` the engine that is both
(``AsyncEngine``), and ``_steps_port_async`` the steps port an engine may offer beside them
(``AsyncStepsPort``: checkpoints, sleeps, events; ADR 069), each with its generated sync twin;
``_records`` (and ``_step_records``, the steps port's, ``_dependency_records`` for job
dependencies) the records that cross them (normalised values only) and ``_rates`` the rate limit
among them (ADR 070); ``_time`` the clock
port every stamp is read from; ``_telemetry`` the telemetry port as the runtime calls it;
``_acompat`` the runtime primitives (threads, events, spawning) both runtimes and the engines
build on. Engine authors reach all of it through ``alkstore.engine``.

May import: the standard library and ``alkstore.errors`` only. The lowest floor of core.
"""
