"""Every SQL statement of the Postgres engine, by name: read from ``statements/*.sql``, composed once per schema.

Each file holds named sections (ADR 030). ``-- name: claim`` begins a statement: a field of
``Statements``, or one composed per call (the grants, ``vacuum``). ``-- fragment: claimed`` begins
a piece that statements include as ``{claimed}``; a statement can be included the same way. A
fragment may take one argument, ``-- fragment: state_at(run_at)``, included as
``{state_at: r.run_at}`` with the argument's text in place of its ``{run_at}``. Whole-line ``--``
comments document a section and never reach the server. The few fragments made here are those
derived from a declaration: the job and schedule columns with their other shapes (all NULL, a
dead row as a live one, qualified), and the claim's and the listings' orders and keyset
conditions, from core's ``alkstore.engine.ORDERS``. Every template is expanded at import into
``_TEMPLATES``, which ``.ci/sql_mutants.py`` mutates; a name that resolves to nothing, a fragment
no statement uses, or a statement ``Statements`` does not know stops the import.

The schema is ``{s}``, filled with ``psycopg.sql.Identifier`` (so any schema name is quoted
correctly, and a ``%`` in it is doubled: every statement runs with bound parameters,
``%(name)s``, even an empty set of them); values are never formatted into the text. Functions
such as ``{s}.sweep_3`` are created by the migrations; their names carry the schema version that
made them (ADR 014).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping, Sequence
from importlib import resources

from psycopg import sql

from alkstore.engine import CLAIM_ORDER, ORDERS, JobPhase, order_of

from ._rows import JOB_READ

__all__ = [
    "JOB_COLUMNS",
    "SCHEDULE_COLUMNS",
    "UPKEEP_TABLES",
    "Statements",
    "grants",
    "vacuum",
]

#: A live job's columns as the engine reads them (``_rows`` owns the list: its job rows take them by name).
_JOB = JOB_READ
JOB_COLUMNS = ", ".join(_JOB)
#: What a dead job's row has in place of the live columns it lacks, so both are one row shape.
_DEAD_IN_PLACE = {
    "state": "'dead' AS state",
    "worker_id": "NULL::text AS worker_id",
    "lease_until": "NULL::timestamptz AS lease_until",
    "unique_key": "NULL::text AS unique_key",
    "unique_running": "false AS unique_running",
    "cancel_requested": "false AS cancel_requested",
    "claimed_at": "NULL::timestamptz AS claimed_at",
    "dependents": "0 AS dependents",
}
#: A schedule's columns as the engine reads them (``_rows.SCHEDULE``).
_SCHEDULE = (
    "name", "spec", "interval_s", "queue", "payload", "priority", "max_attempts", "expires_us", "task",
    "next_boundary", "last_boundary", "anchor",
)  # fmt: skip
SCHEDULE_COLUMNS = ", ".join(_SCHEDULE)
#: The tables whose dead rows a worker's maintenance counts and reclaims (ADR 023): every data table.
UPKEEP_TABLES = (
    "action_log", "dead_jobs", "events", "job_dependencies", "jobs", "locks", "queues", "rate_starts", "results",
    "schedules", "steps", "task_figures", "throughput", "waits", "workers",
)  # fmt: skip

# -- the orders (ADR 027) --------------------------------------------------------------------

#: Per order field: its column, and the parameter a listing binds its key's value to (``_rows.listing_params``).
_KEY_COLUMNS = {
    "priority": ("priority", "%(priority)s::bigint"),
    "run_at": ("run_at", "%(at)s::timestamptz"),
    "died_at": ("died_at", "%(at)s::timestamptz"),
    "id": ("id", "%(id)s::bigint"),
}

_Order = tuple[tuple[str, bool], ...]
#: Fields sorted one way, next to each other in an order: compared with the key as one row value.
_Run = tuple[list[str], bool]


def _order_by(order: _Order) -> str:
    """``order`` as the list of an ``ORDER BY``: each field's column, ``DESC`` where it descends."""
    return ", ".join(_KEY_COLUMNS[field][0] + (" DESC" if descending else "") for field, descending in order)


def _runs(order: _Order) -> list[_Run]:
    """``order`` cut into its runs, most significant first."""
    runs: list[_Run] = []
    for field, descending in order:
        if runs and runs[-1][1] == descending:
            runs[-1][0].append(field)
        else:
            runs.append(([field], descending))
    return runs


def _row(fields: list[str], op: str) -> str:
    """The columns of ``fields`` compared with the key's bound values: ``a op p`` or ``(a, b) op (p, q)``."""
    columns = [_KEY_COLUMNS[field][0] for field in fields]
    values = [_KEY_COLUMNS[field][1] for field in fields]
    if len(fields) == 1:
        return f"{columns[0]} {op} {values[0]}"
    return f"({', '.join(columns)}) {op} ({', '.join(values)})"


def _beyond(run: _Run) -> str:
    """Rows past the key on ``run``: further along its direction."""
    fields, descending = run
    return _row(fields, "<" if descending else ">")


def _tied(runs: list[_Run]) -> str:
    """Rows tied with the key on the first run and after it on the rest."""
    return f"{_row(runs[0][0], '=')} AND {_after(runs[1:])}"


def _after(runs: list[_Run]) -> str:
    """The keyset condition of an order's runs: a row sorts strictly after the key (bound as
    ``%(priority)s``, ``%(at)s`` and ``%(id)s``); a disjunction comes in parentheses, to stand after ``AND``."""
    if len(runs) == 1:
        return _beyond(runs[0])
    return f"({_beyond(runs[0])} OR ({_tied(runs)}))"


def _reversed_orders() -> dict[str, str]:
    """The listings' order fragments for the orders turned round (``order_of(phase, reverse=True)``):
    what each ``list_<phase>`` statement is expanded with again to make ``list_<phase>_reversed``."""
    fragments: dict[str, str] = {}
    for phase in ORDERS:
        order = order_of(phase, reverse=True)
        fragments[f"order_{phase.value}"] = _order_by(order)
        fragments[f"after_{phase.value}"] = _after(_runs(order))
    runs = _runs(order_of(JobPhase.READY, reverse=True))
    fragments["after_ready_beyond"] = _beyond(runs[0])
    fragments["after_ready_tied"] = _tied(runs)
    return fragments


#: The listings read in both directions; each also has a ``_reversed`` statement (``Store.jobs(reverse=True)``).
_LISTINGS = tuple(f"list_{phase.value}" for phase in ORDERS)


def _claim_band() -> str:
    """The claim's read from a cursor (ADR 061), one segment ``b`` of the claim order: the claim order's
    first field between ``b.band_hi`` and ``b.band_lo`` (taken in its direction, descending), from the
    lower bound ``(b.band_at, b.band_id)`` on the rest, a row the B-tree takes for the start of its range."""
    runs = _runs(CLAIM_ORDER)
    if len(runs) != 2 or len(runs[0][0]) != 1 or not runs[0][1] or runs[1][0] != ["run_at", "id"] or runs[1][1]:
        raise RuntimeError("a claim from a cursor reads one band field descending, then run_at and id; not this order")
    band = _KEY_COLUMNS[runs[0][0][0]][0]
    return f"{band} <= b.band_hi AND {band} >= b.band_lo AND (run_at, id) >= (b.band_at, b.band_id)"


def _order_fragments() -> Iterator[tuple[str, str]]:
    """``order_claim`` and ``claim_band``, and per phase ``order_<phase>`` and ``after_<phase>``; for the ready
    listing's index ranges, ``after_ready`` in its two parts too (``after_ready_beyond OR (after_ready_tied)``)."""
    yield "order_claim", _order_by(CLAIM_ORDER)
    yield "claim_band", _claim_band()
    for phase, order in ORDERS.items():
        yield f"order_{phase.value}", _order_by(order)
        yield f"after_{phase.value}", _after(_runs(order))
    runs = _runs(ORDERS[JobPhase.READY])
    if len(runs) < 2:
        raise RuntimeError("list_ready reads the ready order as its first run and the rest; this one has one run")
    yield "after_ready_beyond", _beyond(runs[0])
    yield "after_ready_tied", _tied(runs)


def _made_here() -> dict[str, str]:
    """The fragments derived from a declaration rather than written in the files."""
    return {
        "job_columns": JOB_COLUMNS,
        "job_columns_as_null": ", ".join(f"NULL AS {column}" for column in _JOB),
        "dead_as_job": ", ".join(_DEAD_IN_PLACE.get(column, column) for column in _JOB),
        "schedule_columns": SCHEDULE_COLUMNS,
        "schedule_columns_of_s": ", ".join(f"s.{column}" for column in _SCHEDULE),
        **dict(_order_fragments()),
    }


# -- the files -------------------------------------------------------------------------------

_HEADER = re.compile(r"-- (name|fragment): ([a-z_][a-z0-9_]*)(?:\(([a-z_][a-z0-9_]*)\))?")
_LOOKS_LIKE_HEADER = re.compile(r"\s*--\s*(name|fragment)\s*:")
_HOLE = re.compile(r"\{([a-z_][a-z0-9_]*)(?::\s*([^{}]*?)\s*)?\}")
#: The holes psycopg fills as identifiers: the schema, and what the per-call statements name.
_IDENTIFIERS = frozenset({"s", "role", "tables", "table"})


@dataclasses.dataclass(frozen=True, slots=True)
class _Section:
    """One named section: a statement or a fragment, its parameter if it takes one, and where it is."""

    statement: bool
    parameter: str | None
    text: str
    where: str


def _sections(name: str, text: str) -> Iterator[tuple[str, _Section]]:
    """The sections of the file ``name``: each header's lines up to the next, comments and blank lines left out."""
    header: tuple[str, bool, str | None, int] | None = None
    lines: list[str] = []

    def close() -> Iterator[tuple[str, _Section]]:
        if header is not None:
            key, statement, parameter, number = header
            if not lines:
                raise RuntimeError(f"{name}:{number}: {key} has no SQL")
            yield key, _Section(statement, parameter, "\n".join(lines), f"{name}:{number}")

    for number, line in enumerate(text.splitlines(), 1):
        match = _HEADER.fullmatch(line.rstrip())
        if match is not None:
            yield from close()
            kind, key, parameter = match.groups()
            if parameter is not None and (kind == "name" or parameter in _IDENTIFIERS):
                raise RuntimeError(f"{name}:{number}: only a fragment takes a parameter, never {parameter!r}")
            header, lines = (key, kind == "name", parameter, number), []
        elif _LOOKS_LIKE_HEADER.match(line):
            raise RuntimeError(
                f"{name}:{number}: not a header: {line.strip()!r} (write '-- name: key' or '-- fragment: key')"
            )
        elif not line.strip() or line.lstrip().startswith("--"):
            continue
        elif header is None:
            raise RuntimeError(f"{name}:{number}: SQL before the first '-- name:' or '-- fragment:'")
        elif "--" in line:
            raise RuntimeError(f"{name}:{number}: a comment beside SQL would reach the server; give it a line")
        else:
            lines.append(line.rstrip())
    yield from close()


def _read() -> dict[str, _Section]:
    """Every section of the packaged ``statements/*.sql``, by name (names are unique across the files)."""
    found: dict[str, _Section] = {}
    files = resources.files(__package__).joinpath("statements").iterdir()
    for entry in sorted((entry for entry in files if entry.name.endswith(".sql")), key=lambda entry: entry.name):
        for key, section in _sections(entry.name, entry.read_text(encoding="utf-8")):
            if key in found:
                raise RuntimeError(f"{section.where}: {key} is already named at {found[key].where}")
            found[key] = section
    for key, text in _made_here().items():
        if key in found:
            raise RuntimeError(f"{found[key].where}: {key} is made in _sql.py")
        found[key] = _Section(False, None, text, "_sql.py")
    return found


def _expand(text: str, sections: Mapping[str, _Section], bound: Mapping[str, str], inside: tuple[str, ...]) -> str:
    """``text`` with every hole but the identifiers' replaced by its section, expanded in turn; ``inside``
    names the sections being expanded, outermost first."""

    def fill(hole: re.Match[str]) -> str:
        key, argument = hole.group(1), hole.group(2)
        if argument is None and key in bound:
            return bound[key]
        if argument is None and key in _IDENTIFIERS:
            return hole.group(0)
        where = " in ".join(reversed(inside))
        section = sections.get(key)
        if section is None:
            raise RuntimeError(f"{where}: {hole.group(0)} names no statement or fragment")
        if (section.parameter is None) != (argument is None):
            raise RuntimeError(f"{where}: {hole.group(0)} does not match the header of {key} ({section.where})")
        if key in inside:
            raise RuntimeError(f"{where}: {key} includes itself")
        arguments = {section.parameter: argument} if section.parameter is not None and argument is not None else {}
        # A section of several lines continues at the indent of the line it is included in.
        line = text[text.rfind("\n", 0, hole.start()) + 1 : hole.start()]
        indent = line[: len(line) - len(line.lstrip())]
        return ("\n" + indent).join(_expand(section.text, sections, arguments, (*inside, key)).splitlines())

    return _HOLE.sub(fill, text)


def _included(sections: Mapping[str, _Section]) -> set[str]:
    """The names some section includes."""
    return {hole.group(1) for section in sections.values() for hole in _HOLE.finditer(section.text)}


def _templates() -> tuple[dict[str, str], dict[str, str]]:
    """Every statement expanded: those of ``Statements`` (in its order), and those composed per call."""
    sections = _read()
    expanded = {
        key: _expand(section.text, sections, {}, (key,)) for key, section in sections.items() if section.statement
    }
    turned = _reversed_orders()
    for key in _LISTINGS:
        expanded[f"{key}_reversed"] = _expand(sections[key].text, sections, turned, (f"{key}_reversed",))
    included = _included(sections)
    unused = sorted(key for key, section in sections.items() if not section.statement and key not in included)
    if unused:
        raise RuntimeError(f"fragments no statement uses: {', '.join(unused)}")
    fields = [field.name for field in dataclasses.fields(Statements)]
    unknown = sorted(set(expanded) - set(fields) - set(_PER_CALL))
    missing = sorted((set(fields) | set(_PER_CALL)) - set(expanded))
    if unknown or missing:
        raise RuntimeError(f"statements unknown to Statements: {unknown}; missing from the files: {missing}")
    for key, text in expanded.items():
        left = {hole.group(1) for hole in _HOLE.finditer(text)} - (_PER_CALL.get(key) or {"s"})
        if left:
            raise RuntimeError(f"{key} leaves {sorted(left)} unfilled")
    return {field: expanded[field] for field in fields}, {key: expanded[key] for key in _PER_CALL}


@dataclasses.dataclass(frozen=True, slots=True)
class Statements:
    """The engine's statements for one schema, each ready to execute with bound parameters."""

    version_table_exists: str
    schema_version: str
    migration_lock: str
    create_schema: str
    create_version_table: str
    use_schema: str
    record_version: str
    use_utc: str
    server_time: str
    queue_config: str
    queue_configs: str
    configure_queue: str
    unconfigure_queue: str
    set_paused: str
    enqueue_one: str
    enqueue_alike: str
    enqueue_many: str
    lock_ordering_keys: str
    enqueue_keyed: str
    unique_holder: str
    channel: str
    claim: str
    claim_full: str
    claim_waking: str
    claim_waking_full: str
    claim_rated: str
    ack_and_claim: str
    ack_and_claim_full: str
    lease_probe: str
    soonest_due: str
    listen: str
    unlisten: str
    ack_one: str
    ack_many: str
    ack_many_before_claim: str
    retry: str
    bury: str
    release: str
    heartbeat: str
    get_job: str
    lock_parents: str
    finished_parents: str
    enqueue_dependent: str
    requeued_links: str
    relink_requeued: str
    follow_parent: str
    dependency_links: str
    dead_ordering_keys: str
    requeue_dead: str
    try_lock: str
    renew_lock: str
    renew_lock_peek: str
    release_lock: str
    lock_schedules: str
    insert_schedules: str
    update_schedules: str
    unschedule: str
    schedules: str
    due_schedules: str
    next_job_ids: str
    insert_fires: str
    advance_schedules: str
    notify_queues: str
    soonest_boundary: str
    application_roles: str
    data_tables: str
    # -- inspection and actions
    queue_counts: str
    queue_counts_one: str
    list_ready: str
    list_delayed: str
    list_waiting: str
    list_running: str
    list_dead: str
    list_ready_reversed: str
    list_delayed_reversed: str
    list_waiting_reversed: str
    list_running_reversed: str
    list_dead_reversed: str
    read_lock: str
    list_locks: str
    cancel: str
    request_cancel: str
    cancel_requested: str
    purge_dead: str
    purge_dead_jobs: str
    record_worker: str
    record_worker_counting: str
    remove_worker: str
    workers: str
    forget_workers: str
    throughput: str
    purge_throughput: str
    task_figures: str
    roll_up_task_figures: str
    purge_task_figures: str
    record_action: str
    list_actions: str
    purge_actions: str
    table_stats: str
    # -- kept results (ADR 042)
    ack_keeping: str
    ack_keeping_before_claim: str
    ack_keeping_one: str
    ack_keeping_and_claim: str
    ack_keeping_and_claim_full: str
    get_result: str
    list_results: str
    purge_results: str
    # -- steps, durable sleep and events (ADR 069)
    step_resume: str
    step_save: str
    step_skip: str
    event_lock: str
    step_suspend: str
    emit: str
    read_event: str
    job_steps: str
    purge_steps: str

    @classmethod
    def for_schema(cls, schema: str) -> Statements:
        """Compose every template with ``schema`` quoted as an identifier (its ``%`` doubled)."""
        ident = _identifier(schema)
        return cls(**{name: _compose(template, ident) for name, template in _TEMPLATES.items()})


#: The statements composed per call, and the identifiers each names besides the schema.
_PER_CALL: dict[str, set[str]] = {
    "grant_schema": {"s", "role"},
    "grant_tables": {"s", "tables", "role"},
    "grant_version_table": {"s", "role"},
    "grant_sequences": {"s", "role"},
    "grant_functions": {"s", "role"},
    "vacuum": {"s", "table"},
    "lock_exclusive": {"s", "table"},
}
#: What an application role is granted, in this order (the grants' own comment is in schema.sql).
_GRANTS = ("grant_schema", "grant_tables", "grant_version_table", "grant_sequences", "grant_functions")

_TEMPLATES, _PER_CALL_TEMPLATES = _templates()


def grants(schema: str, role: str, tables: Sequence[str]) -> list[str]:
    """The statements that give ``role`` what an application role needs on ``schema`` and its ``tables``."""
    names = {
        "s": _identifier(schema),
        "role": _identifier(role),
        "tables": sql.SQL(", ").join(sql.SQL("{}.{}").format(_identifier(schema), _identifier(t)) for t in tables),
    }
    wanted = [key for key in _GRANTS if tables or key != "grant_tables"]
    return [sql.SQL(_PER_CALL_TEMPLATES[key]).format(**names).as_string() for key in wanted]


def vacuum(schema: str, table: str) -> str:
    """``VACUUM`` of one table of ``schema`` (ADR 023): never waiting for a lock another vacuum
    holds, always cleaning the indexes (the claim reads their dead entries), never truncating."""
    template = _PER_CALL_TEMPLATES["vacuum"]
    return sql.SQL(template).format(s=_identifier(schema), table=_identifier(table)).as_string()


def lock_exclusive(schema: str, table: str) -> str:
    """``LOCK TABLE`` of one table of ``schema`` in ACCESS EXCLUSIVE mode, ahead of the migrations (ADR 010)."""
    template = _PER_CALL_TEMPLATES["lock_exclusive"]
    return sql.SQL(template).format(s=_identifier(schema), table=_identifier(table)).as_string()


def _identifier(name: str) -> sql.SQL:
    """``name`` quoted as an identifier, its ``%`` doubled (the statement runs with bound parameters)."""
    return sql.SQL(sql.Identifier(name).as_string().replace("%", "%%"))


def _compose(template: str, schema: sql.Composable) -> str:
    # Rendered once to plain text: executing a str is cheaper than re-quoting the identifier,
    # or re-rendering an ``sql.SQL``, on every call, and psycopg encodes a str per connection,
    # so any client encoding works.
    return sql.SQL(template).format(s=schema).as_string()
