"""The scheduler: ``@every`` schedules fired by one leader (ADR 018, ADR 062).

``_leader`` the leader lease's timings; ``_tick`` the pure plan of one tick (which fires are due,
within a budget); ``_runner_async`` (and its sync twin ``_runner``) the loop that takes the lease
and runs the ticks through the port.

May import: ``alkstore.port``, ``alkstore.rules`` and ``alkstore.errors``; never the store or the worker.
"""
