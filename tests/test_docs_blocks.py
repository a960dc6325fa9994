"""Every code block of the README and docs/*.md is run by a named test, or says why it is not runnable.

``MANIFEST`` lists each block of each page (and each inline ``pip install …`` of its prose) by a
needle, a piece of its text no other block of the page holds, and either the one test that runs
it (``Run``) or a few words on why it is shown, not run (``Shown``). The audit fails on a block
nobody claims (a new example), on a claim whose block is gone, on a claim of a test that does not
exist, and on a test that never names its block's needle (so it cannot be reading that block).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from tests._docs import PAGES, ROOT, Block, items_of


@dataclass(frozen=True)
class Run:
    """The block runs (or, for a by-hand command, is checked as far as ``how`` says) in ``test``: ``path::name``."""

    test: str
    how: str = ""


@dataclass(frozen=True)
class Shown:
    """The block is not runnable: ``why``, in a few words."""

    why: str


T_README = "tests/cli/test_readme.py"
T_OPS = "tests/cli/test_docs_operations.py"
T_DEPLOY = "tests/postgres/test_docs_deploying.py"
T_INSTALL = "tests/test_install_lines.py::test_every_install_line_resolves_from_the_checkout"
T_DJANGO_INSTALL = "tests/django/test_docs_django.py::test_the_django_install_line_resolves_from_the_checkout"
T_BY_HAND = "tests/test_by_hand_commands.py"
T_WEB = "tests/web/test_docs_web.py"
T_STARLETTE = (
    "tests/aio/test_readme_async.py::test_the_app_and_its_worker_run_as_the_readme_says_and_the_webhook_is_delivered"
)

#: page -> {needle: claim}. A needle is found in exactly one block (or inline install line) of its page.
MANIFEST: dict[str, dict[str, Run | Shown]] = {
    "README.md": {
        ".venv/bin/alkstore demo": Run(
            f"{T_README}::test_ci_runs_the_readmes_two_commands_as_written_in_a_fresh_clone",
            "run literally by .ci/run in a fresh clone; the test pins .ci/run to the block",
        ),
        "install '.[test,dev]' && .venv/bin/pytest": Run(
            f"{T_README}::test_ci_runs_the_readmes_two_commands_as_written_in_a_fresh_clone",
            "run literally by .ci/run in a fresh clone; the test pins .ci/run to the block",
        ),
        "PY312 -m venv .venv312": Run(T_INSTALL, "its pip line resolved; .ci/run runs the rest"),
        "# myapp/jobs.py": Run(f"{T_README}::test_the_first_example_is_a_task_run_by_alkstore_worker"),
        "send_email.enqueue(store": Run(f"{T_README}::test_the_first_example_is_a_task_run_by_alkstore_worker"),
        "alkstore worker --app myapp.jobs:tasks": Run(
            f"{T_README}::test_the_first_example_is_a_task_run_by_alkstore_worker"
        ),
        "# myapp/web.py": Run(f"{T_STARLETTE}"),
        "uvicorn myapp.web:app --port 8000": Run(f"{T_STARLETTE}"),
        "pip install starlette uvicorn 'sqlalchemy[asyncio]'": Run(T_INSTALL),
        "pip install '.[django]'": Run(T_DJANGO_INSTALL),
        "# settings.py": Run(
            "tests/django/test_readme_django.py::test_the_settings_configure_a_backend_that_passes_its_checks"
        ),
        "# shop/tasks.py": Run(
            "tests/django/test_readme_django.py::test_place_order_commits_the_order_with_its_job_and_the_worker_command_runs_it"
        ),
        "python manage.py alkstore_migrate": Run(
            "tests/django/test_readme_django.py::test_place_order_commits_the_order_with_its_job_and_the_worker_command_runs_it"
        ),
    },
    "docs/async.md": {
        "asyncio.run(main())": Run("tests/aio/test_docs.py::test_the_example_runs_as_written"),
    },
    "docs/steps.md": {
        'store.emit("shipped:42"': Run("tests/test_docs_steps.py::test_the_steps_example_runs_as_written"),
        'with job.step_tx("invoice") as step:': Shown("a fragment of a task on PostgreSQL"),
    },
    "docs/benchmarks.md": {
        "Sort (actual time=": Shown("EXPLAIN output of one benchmark run"),
        "worker_per_job.py postgres --load-only": Shown("a by-hand measurement under valgrind"),
        "worker_per_job.py floor --load-only": Shown("a by-hand count of the prefetching worker against the floor"),
        "async_call_counts.py --runtime async --calls": Shown("a by-hand count of an enqueue's calls and instructions"),
        "peer_server_instructions.py": Shown("a by-hand count under a server run by callgrind"),
        "wake_server_instructions.py": Shown("a by-hand count of an idle wake under a server run by callgrind"),
    },
    "docs/deploying.md": {
        "--grant app": Run(
            f"{T_OPS}::test_migrate_with_grant_makes_the_role_an_application_role",
            "owner, application role and database replaced by the test's own",
        ),
        "prepare_threshold=None": Run(
            f"{T_DEPLOY}::test_the_pgbouncer_example_works_through_a_transaction_pooler",
            "the pooler's and the server's URLs replaced by the test's",
        ),
        "with Session(engine) as session": Run(
            f"{T_DEPLOY}::test_the_sqlalchemy_example_commits_the_order_with_its_message"
        ),
    },
    "docs/dashboard.md": {
        "pip install '.[web]'": Run(T_INSTALL),
        "alkstore demo --web": Run(
            f"{T_WEB}::test_the_documented_commands_serve_as_their_comments_say",
            "each line through the command line with the server stubbed; the demo's line parsed only",
        ),
        "dashboard = create_app(store, read_only=True)": Run(
            f"{T_WEB}::test_the_documented_create_app_mounts_read_only"
        ),
        "bench/dashboard_screenshots.py": Run(
            f"{T_BY_HAND}::test_the_screenshot_command_starts", "by hand (headless Chromium): --help only"
        ),
    },
    "docs/design.md": {
        "one distribution, import name": Shown("a tree diagram of the source layout"),
    },
    "docs/development.md": {
        "pip install -e '.[test,dev]'": Run(T_INSTALL),
    },
    "docs/django.md": {
        "pip install '.[django]'": Run(T_DJANGO_INSTALL),
        "# settings.py": Run("tests/django/test_docs_django.py::test_the_settings_pass_the_checks"),
        "def place_order(email: str) -> Order:": Run(
            "tests/django/test_docs_django.py::test_place_order_commits_the_order_with_its_receipt_or_neither"
        ),
        "# create or upgrade the schema": Run(
            "tests/django/test_docs_django.py::test_the_commands_migrate_and_run_a_worker"
        ),
        "send_receipt.get_result(result.id)": Shown("a sketch: `...` stands for a worker's run elsewhere"),
        "await notify.aenqueue(request.user.pk)": Shown("a sketch of a view (`...` body, no imports)"),
        '"shop.tasks.cleanup": "@every 1h"': Run(
            "tests/django/test_docs_django.py::test_the_periodic_settings_pass_the_checks",
            "its two task paths given tasks by the test",
        ),
        "# urls.py": Run("tests/django/test_docs_django.py::test_the_urls_route_the_admin_pages", "with its imports"),
    },
    "docs/workflows.md": {
        "store.enqueue_graph(pipeline)": Run(
            "tests/test_docs_workflows.py::test_the_order_pipeline_runs_as_written_and_prints_what_the_page_shows"
        ),
        "report waits for 2 jobs": Run(
            "tests/test_docs_workflows.py::test_the_order_pipeline_runs_as_written_and_prints_what_the_page_shows",
            "compared with what the pipeline prints",
        ),
        'on_parent_failure="cancel"': Run(
            "tests/test_docs_workflows.py::test_the_fragments_run_on_a_store_as_the_page_describes",
            "run with a memory store as store",
        ),
        "ids = store.enqueue_graph_tx(tx, graph)": Run(
            "tests/test_docs_workflows.py::test_the_fragments_run_on_a_store_as_the_page_describes",
            "run with a memory store as store",
        ),
    },
    "docs/engines.md": {
        "runtime port (AsyncRuntimePort)": Run(
            "tests/test_docs_engines.py::test_the_listing_gives_each_port_exactly_its_abstract_methods",
            "the listing compared with each port's abstract methods",
        ),
        "async def open_engine(url: str": Run(
            "tests/test_docs_engines.py::test_the_memory_engine_excerpts_are_its_code", "found verbatim in its module"
        ),
        "def default_clock(self) -> Clock:": Run(
            "tests/test_docs_engines.py::test_the_memory_engine_excerpts_are_its_code", "found verbatim in its module"
        ),
        "async def claim(self, request: port.ClaimRequest)": Run(
            "tests/test_docs_engines.py::test_the_memory_engine_excerpts_are_its_code", "found verbatim in its module"
        ),
        "async def ack(self, held: Sequence[port.Held])": Run(
            "tests/test_docs_engines.py::test_the_memory_engine_excerpts_are_its_code", "found verbatim in its module"
        ),
        '[project.entry-points."alkstore.engines"]': Run(
            "tests/test_docs_engines.py::test_the_entry_points_are_the_memory_engines_own",
            "each entry found in pyproject.toml under its group",
        ),
        "engine = MemoryEngine()": Run("tests/test_docs_engines.py::test_a_store_on_an_engine_runs_as_written"),
        "-m runtime_port": Run(
            "tests/test_docs_engines.py::test_the_commands_select_each_ports_contract_tests",
            "collected only (--collect-only): each command selects its port's tests",
        ),
    },
    "docs/mutation.md": {
        ".ci/mutation core 'alkstore.scheduler._tick.*'": Run(
            f"{T_BY_HAND}::test_the_mutation_commands_name_what_the_scripts_take",
            "by hand (an hour): targets and options checked against the scripts, never run",
        ),
        "FAILED tests/postgres/test_stored_format.py": Shown("a recorded failure of a planted mutant"),
    },
    "docs/operations.md": {
        "alkstore status --schema readme_demo": Run(
            f"{T_OPS}::test_status_prints_what_the_docs_show", "documented output: the same lines, columns and names"
        ),
        "alkstore jobs list emails --state dead": Run(f"{T_OPS}::test_the_operators_commands_run_as_written"),
        "HEALTHCHECK --interval=30s": Run(f"{T_OPS}::test_the_container_probes_run_healthcheck"),
        "livenessProbe:": Run(f"{T_OPS}::test_the_container_probes_run_healthcheck"),
        "alkstore status at 2030-01-01 00:10:42 UTC": Run(
            "tests/cli/test_inspect.py::test_status_shows_queues_schedules_the_leader_and_workers_in_80_columns",
            "documented output: exactly what the command prints",
        ),
        "pip install '.[web]'": Run(T_INSTALL),
        "(here: reading only)": Run(
            f"{T_WEB}::test_the_documented_commands_serve_as_their_comments_say",
            "each line through the command line with the server stubbed",
        ),
        "dashboard = create_app(store, read_only=True)": Run(
            f"{T_WEB}::test_the_documented_create_app_mounts_read_only"
        ),
        '"lag_seconds": 642.0': Run(
            "tests/cli/test_inspect.py::test_the_documented_json_shapes_are_what_the_commands_print",
            "documented output: the same keys",
        ),
        '"last_error": "550 mailbox unavailable"': Run(
            "tests/cli/test_inspect.py::test_the_documented_json_shapes_are_what_the_commands_print",
            "documented output: the same keys",
        ),
        '"result": {"rows": [1, 2]}': Run(
            "tests/cli/test_inspect.py::test_the_documented_json_shapes_are_what_the_commands_print",
            "documented output: the same keys",
        ),
    },
    "docs/rate-limits.md": {
        "calls.configure(rate=RateLimit(10, per=1)": Run(
            "tests/test_docs_rate_limits.py::test_the_rate_limits_example_runs_as_written"
        ),
    },
    "docs/reliability.md": {
        "-p no:cacheprovider tests/nemesis/test_nemesis.py": Run(
            f"{T_BY_HAND}::test_the_nemesis_commands_parse",
            "collected only: the run itself is test_nemesis.py's own test",
        ),
        "python -m tests.nemesis.run --operations 1000000": Run(
            f"{T_BY_HAND}::test_the_nemesis_commands_parse",
            "by hand (75 minutes): the check runs, the options are the runner's; the worktree is not made",
        ),
    },
    "docs/telemetry.md": {
        "pip install '.[otel]'": Run(T_INSTALL),
        "pip install opentelemetry-exporter-prometheus": Run(T_INSTALL),
        "PrometheusMetricReader()": Run(
            "tests/otel/test_docs_telemetry.py::test_the_prometheus_example_serves_the_documented_names",
            "the URL and the port (a free one: the machine is shared) replaced",
        ),
    },
    "docs/tour.md": {
        'alkstore.open("memory://"': Run(f"{T_README}::test_the_tour_runs_as_written"),
        "outbox_enqueue_tx(conn": Run(f"{T_README}::test_the_postgres_example_runs_against_a_fresh_schema"),
    },
}


def unclaimed_message(block: Block) -> str:
    return (
        f"{block.where()} is claimed by no entry of MANIFEST in tests/test_docs_blocks.py. "
        "If it is runnable, run it in a test that reads it (tests._docs.block(page, needle)), then add "
        f"{{needle: Run('tests/…py::test_name')}} under {block.page!r}; if it is not (program output, a "
        "diagram), add {needle: Shown('why, in a few words')}. The needle is a piece of the block no other "
        "block of the page holds."
    )


def audit(pages: dict[str, str] | None = None) -> list[str]:
    """Every complaint of the audit, over the real pages or over ``pages`` (page -> text, for its own test)."""
    complaints: list[str] = []
    for page in PAGES if pages is None else pages:
        items = items_of(page, None if pages is None else pages[page])
        claims = MANIFEST.get(page, {})
        for block in items:
            holders = [needle for needle in claims if needle in block.body]
            if not holders:
                complaints.append(unclaimed_message(block))
            elif len(holders) > 1:
                complaints.append(f"{block.where()} is claimed {len(holders)} times: {holders}; keep one")
        for needle in claims:
            holding = [block for block in items if needle in block.body]
            if len(holding) != 1:
                complaints.append(
                    f"the needle {needle!r} of {page} is in {len(holding)} blocks ({[b.where() for b in holding]}): "
                    "it must name exactly one (a claim whose block is gone: remove it)"
                )
    return complaints


def test_every_block_is_claimed_once_and_every_claim_names_one_block() -> None:
    complaints = audit()
    assert not complaints, "\n".join(complaints)


def test_every_page_has_an_entry_and_every_entry_a_page() -> None:
    assert set(MANIFEST) <= set(PAGES), set(MANIFEST) - set(PAGES)


@cache
def _module(path: str) -> ast.Module:
    return ast.parse((ROOT / path).read_text(encoding="utf-8"))


def _strings_reached(path: str, name: str) -> set[str]:
    """The string constants of test ``name`` in ``path`` and of the module's functions, fixtures and
    constants it reaches by name (its helpers and fixtures, transitively)."""
    module = _module(path)
    functions: dict[str, ast.AST] = {}
    constants: dict[str, ast.AST] = {}
    for node in ast.walk(module):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            functions.setdefault(node.name, node)
    for node in module.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    constants[target.id] = node
    seen: set[str] = set()
    strings: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        found = functions.get(current) or constants.get(current)
        if found is None:
            continue
        for inner in ast.walk(found):
            if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                strings.add(inner.value)
            elif isinstance(inner, ast.Name):
                todo.append(inner.id)
            elif isinstance(inner, ast.arg):
                todo.append(inner.arg)
    return strings


CLAIMS = sorted(
    {
        (page, needle, claim.test)
        for page, claims in MANIFEST.items()
        for needle, claim in claims.items()
        if isinstance(claim, Run)
    }
)


@pytest.mark.parametrize(("page", "needle", "test"), CLAIMS, ids=[f"{p}:{n[:30]}" for p, n, _ in CLAIMS])
def test_each_claiming_test_exists_and_reads_its_block(page: str, needle: str, test: str) -> None:
    path, _, name = test.partition("::")
    assert (ROOT / path).is_file(), f"{test}: no such file (claimed for {needle!r} of {page})"
    names = {node.name for node in ast.walk(_module(path)) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
    assert name in names, f"{test}: no such test in {path} (claimed for {needle!r} of {page})"
    assert name.startswith("test_"), f"{test} is not a test"
    assert any(needle in text for text in _strings_reached(path, name)), (
        f"{test} never names {needle!r}: read the block through tests._docs.block({page!r}, {needle!r})"
    )
    source = (ROOT / path).read_text(encoding="utf-8")
    assert Path(page).stem in source, f"{path} never names the page {page}"


def test_each_not_runnable_block_says_why() -> None:
    for page, claims in MANIFEST.items():
        for needle, claim in claims.items():
            if isinstance(claim, Shown):
                assert 3 <= len(claim.why.split()) <= 20, f"{page} {needle!r}: say why in a few words"


def test_a_new_block_fails_the_audit_saying_what_to_do() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    planted = readme + "\n```sh\nalkstore frobnicate --now\n```\n"

    (complaint,) = audit({"README.md": planted})

    assert "alkstore frobnicate --now" in complaint
    assert "claimed by no entry of MANIFEST" in complaint
    assert "Run('tests/" in complaint
    assert "Shown(" in complaint


def test_an_indented_block_and_an_inline_install_line_are_audited_too() -> None:
    text = "Intro.\n\n    pip install '.[frob]'\n\nAnd `pip install frob` inline.\n\n- a list\n\n    continued\n"

    items = items_of("docs/new.md", text)

    assert [(b.kind, b.body) for b in items] == [
        ("indented", "pip install '.[frob]'\n"),
        ("inline", "pip install frob\n"),
    ]
