"""The port: what core and every engine share, and nothing else (ADR 014, ADR 062).

``_engine_async`` is the engine port (``AsyncEngine``, ``AsyncWaiter``; ``_engine`` its generated
sync twin); ``_records`` the records that cross it (normalised values only); ``_time`` the clock
port every stamp is read from; ``_telemetry`` the telemetry port as the runtime calls it;
``_acompat`` the runtime primitives (threads, events, spawning) both runtimes and the engines
build on. Engine authors reach all of it through ``alkstore.engine``.

May import: the standard library and ``alkstore.errors`` only. The lowest floor of core.
"""
