"""``alkstore status``, ``jobs``, ``schedules`` and ``healthcheck`` over a memory store the test prepares.

The commands open their store through ``_operate.open_store``; here it hands out stores over one
memory engine and a manual clock, so every line the commands print is known in advance.
"""

from __future__ import annotations

import json
import signal
from datetime import timedelta

import pytest

from alkstore import EnqueueOpts, JobSuspended, Tasks
from alkstore.adapters.cli import EXIT_ERROR, EXIT_OK, EXIT_USAGE, URL_VARIABLE, main
from alkstore.adapters.cli._args import parse_duration
from alkstore.engine import NewJob, WorkerRecord
from alkstore.rules._names import SCHEDULER_LOCK
from tests._docs import block
from tests._proc import ALKSTORE, LiveProcess, run
from tests.cli._seed import delayed_running_and_dead
from tests.cli.conftest import Prepared
from tests.support import must_claim


@pytest.fixture
def busy(shared: Prepared) -> Prepared:
    """Queues with jobs in every phase, two schedules (one fired), a leader and a worker."""
    store, clock, ids = shared.store, shared.clock, shared.ids
    store.schedule("nightly-digest", "@every 1d", "reports", {"kind": "digest"})
    store.schedule("cleanup", "@every 10m", "maintenance")
    emails = store.queue("emails")
    ids["ready"] = emails.enqueue({"to": "ada@example.com"})
    clock.advance(30)
    ids["ready-2"] = emails.enqueue({"to": "grace@example.com"}, EnqueueOpts(priority=5))
    delayed_running_and_dead(emails, ids, "web-1:4242")
    (ids["raw"],) = store.engine.enqueue([NewJob("reports", b"\xff\x00", 0, clock.now(), None, 3)], clock.now())
    clock.advance(timedelta(minutes=10))  # cleanup fires once
    store.tick()
    clock.advance(12)
    now = clock.now()
    assert store.engine.try_lock(SCHEDULER_LOCK, "web-1:4240:1893456000:5f3a9c21", now, now + timedelta(seconds=8))
    store.engine.record_worker(
        WorkerRecord(
            "web-1:4242",
            "web-1",
            4242,
            ("emails", "reports"),
            8,
            now - timedelta(hours=2),
            now - timedelta(seconds=3),
            running=1,
            processed=1200,
            failed=7,
        )
    )
    return shared


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--url", "memory://"])
    out, err = capsys.readouterr()
    return code, out, err


STATUS = """\
alkstore status at 2030-01-01 00:10:42 UTC
memory://

QUEUE                     READY   DELAYED   WAITING   RUNNING      DEAD     LAG
emails                        2         1         0         1         1  10m42s
maintenance                   1         0         0         0         0   12.0s
reports                       1         0         0         0         0  10m12s

SCHEDULE         EVERY  QUEUE          NEXT (UTC)           LAST (UTC)
cleanup          10m    maintenance    2030-01-01 00:20:00  2030-01-01 00:10:00
nightly-digest   1d     reports        2030-01-02 00:00:00  -

leader: web-1:4240:1893456000:5f3a9c21, lease ends in 8.0s

WORKER         HOST           PID QUEUES          BUSY     DONE FAILED   SEEN
web-1:4242     web-1         4242 emails,repo…     1/8     1200      7   3.0s
"""


def test_status_shows_queues_schedules_the_leader_and_workers_in_80_columns(
    busy: Prepared, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, "status")

    assert (code, err) == (EXIT_OK, "")
    assert out == STATUS
    assert max(len(line) for line in out.splitlines()) <= 79
    assert block("docs/operations.md", "alkstore status at 2030-01-01 00:10:42 UTC") == STATUS, "docs/operations.md"


def test_status_json_is_the_documented_shape(busy: Prepared, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "status", "--json")

    assert code == EXIT_OK
    document = json.loads(out)
    assert list(document) == ["at", "queues", "outboxes", "schedules", "leader", "workers"]
    assert document["outboxes"] == []
    assert document["at"] == "2030-01-01T00:10:42+00:00"
    assert document["queues"][0] == {
        "queue": "emails",
        "ready": 2,
        "delayed": 1,
        "waiting": 0,
        "running": 1,
        "dead": 1,
        "lag_seconds": 642.0,
        "cap": 10000,
        "paused": False,
    }
    assert [queue["queue"] for queue in document["queues"]] == ["emails", "maintenance", "reports"]
    assert document["schedules"] == [
        {
            "name": "cleanup",
            "spec": "@every 10m",
            "queue": "maintenance",
            "next_boundary": "2030-01-01T00:20:00+00:00",
            "last_boundary": "2030-01-01T00:10:00+00:00",
            "payload": None,
            "payload_base64": None,
            "priority": None,
            "max_attempts": None,
            "expires_seconds": None,
        },
        {
            "name": "nightly-digest",
            "spec": "@every 1d",
            "queue": "reports",
            "next_boundary": "2030-01-02T00:00:00+00:00",
            "last_boundary": None,
            "payload": {"kind": "digest"},
            "payload_base64": None,
            "priority": None,
            "max_attempts": None,
            "expires_seconds": None,
        },
    ]
    assert document["leader"] == {
        "owner": "web-1:4240:1893456000:5f3a9c21",
        "lease_until": "2030-01-01T00:10:50+00:00",
    }
    assert document["workers"] == [
        {
            "id": "web-1:4242",
            "host": "web-1",
            "pid": 4242,
            "queues": ["emails", "reports"],
            "concurrency": 8,
            "started_at": "2029-12-31T22:10:42+00:00",
            "seen_at": "2030-01-01T00:10:39+00:00",
            "running": 1,
            "processed": 1200,
            "failed": 7,
        }
    ]


def test_status_shows_each_outbox_with_its_couriers_and_says_when_none_delivers_it(
    shared: Prepared, capsys: pytest.CaptureFixture[str]
) -> None:
    store, clock = shared.store, shared.clock
    webhooks, audit = store.outbox("webhooks"), store.outbox("audit")
    webhooks.enqueue({"event": "order.created"})
    audit.enqueue({"event": "login"})
    store.queue("emails").enqueue({"to": "ada@example.com"})
    clock.advance(30)
    now = clock.now()
    for n in (1, 2):  # two workers deliver webhooks; none delivers audit
        worker = WorkerRecord(f"web-{n}", "web", n, ("emails", webhooks.queue), 4, now, now)
        store.engine.record_worker(worker)

    code, out, _ = cli(capsys, "status")

    assert code == EXIT_OK
    assert "\nemails                        1         0         0         0         0   30.0s\n" in out
    assert "__alkstore_outbox" not in out.split("WORKER")[0], "outboxes are not listed as queues"
    assert (
        "\nOUTBOX                    READY   DELAYED   RUNNING      DEAD     LAG COURIERS\n"
        "audit                         1         0         0         0   30.0s        0\n"
        "webhooks                      1         0         0         0   30.0s        2\n"
        "outbox 'audit': no worker delivers it (see @tasks.courier)\n\n"
    ) in out
    assert max(len(line) for line in out.splitlines()) <= 79

    document = json.loads(cli(capsys, "status", "--json")[1])
    assert document["outboxes"] == [
        {
            "outbox": outbox,
            "queue": f"__alkstore_outbox:{outbox}",
            "ready": 1,
            "delayed": 0,
            "running": 0,
            "dead": 0,
            "lag_seconds": 30.0,
            "cap": 10000,
            "couriers": couriers,
        }
        for outbox, couriers in (("audit", 0), ("webhooks", 2))
    ]
    assert "__alkstore_outbox:webhooks" in [queue["queue"] for queue in document["queues"]]


def shape(document: object) -> object:
    """The keys of a ``--json`` document, nested (a list by its first item); payloads and results are data."""
    if isinstance(document, dict):
        return {key: None if key in ("payload", "result") else shape(value) for key, value in document.items()}
    if isinstance(document, list) and document and isinstance(document[0], dict):
        return [shape(document[0])]
    return None


def test_the_documented_json_shapes_are_what_the_commands_print(
    busy: Prepared, capsys: pytest.CaptureFixture[str]
) -> None:
    status = json.loads(block("docs/operations.md", '"lag_seconds": 642.0'))
    job = json.loads(block("docs/operations.md", '"last_error": "550 mailbox unavailable"'))
    kept = json.loads(block("docs/operations.md", '"result": {"rows": [1, 2]}'))
    reports = busy.store.queue("kept")
    reports.configure(keep_results=timedelta(days=1))
    kept_id = reports.enqueue({"month": 1})
    must_claim(reports, "web-1").retry("timeout", delay=0)
    must_claim(reports, "web-2").ack(result={"rows": [1, 2]})
    busy.store.outbox("webhooks").enqueue({"event": "order.created"})  # the document lists outboxes too

    printed_status = json.loads(cli(capsys, "status", "--json")[1])
    printed_job = json.loads(cli(capsys, "jobs", "show", str(busy.ids["dead"]), "--json")[1])
    listed = json.loads(cli(capsys, "jobs", "list", "emails", "--state", "dead", "--json")[1])["jobs"]
    printed_kept = json.loads(cli(capsys, "jobs", "show", str(kept_id), "--json")[1])
    listed_kept = json.loads(cli(capsys, "jobs", "list", "kept", "--state", "done", "--json")[1])["jobs"]

    assert shape(printed_status) == shape(status)
    assert shape(printed_job) == shape(listed[0]) == shape(job)
    assert shape(printed_kept) == shape(listed_kept[0]) == shape(kept)
    assert printed_job == job | {"id": busy.ids["dead"]}, "the documented job is the test's dead one"


def test_status_of_an_empty_store_says_so_and_within_narrows_the_workers(
    busy: Prepared, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, "status", "--within", "2s")
    assert code == EXIT_OK
    assert out.endswith("\nno workers seen in the last 2 s\n")

    busy.clock.advance(10)
    code, out, _ = cli(capsys, "status", "--json")
    assert json.loads(out)["leader"] is None
    assert "leader: none (no scheduler holds the lease)\n" in cli(capsys, "status")[1]


def test_status_on_a_fresh_store_has_nothing_to_show(shared: Prepared, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "status")
    assert code == EXIT_OK
    assert out.splitlines()[3:] == [
        "no jobs in any queue",
        "",
        "no schedules",
        "",
        "leader: none (no scheduler holds the lease)",
        "",
        "no workers seen in the last 60 s",
    ]
    assert json.loads(cli(capsys, "status", "--json")[1]) == {
        "at": "2030-01-01T00:00:00+00:00",
        "queues": [],
        "outboxes": [],
        "schedules": [],
        "leader": None,
        "workers": [],
    }


def test_status_counts_up_to_10000_unless_asked_for_exact_counts(
    shared: Prepared, capsys: pytest.CaptureFixture[str]
) -> None:
    now = shared.clock.now()
    shared.store.engine.enqueue([NewJob("backlog", b"1", 0, now, None, 3)] * 10_001, now)

    counted = "\nbacklog" + " " * 18 + "10000+         0         0         0         0      0s\n"
    assert counted in cli(capsys, "status")[1]
    assert (
        "\nbacklog                   10001         0         0         0         0      0s\n"
        in (cli(capsys, "status", "--exact")[1])
    )
    (capped,) = json.loads(cli(capsys, "status", "--json")[1])["queues"]
    assert (capped["ready"], capped["cap"]) == (10_000, 10_000)
    (exact,) = json.loads(cli(capsys, "status", "--json", "--exact")[1])["queues"]
    assert (exact["ready"], exact["cap"]) == (10_001, None)


def test_status_shows_a_periodic_tasks_long_name_whole_with_the_columns_widened_to_it(
    shared: Prepared, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = Tasks()

    # Named as a task of an application's module is by default (module:qualname).
    @tasks.periodic("@every 1h", queue="maintenance_and_reporting", name="myapp.warehouse:vacuum_the_largest_tables")
    def vacuum() -> None:
        """A task whose name is longer than the schedules' column."""

    (periodic,) = tasks.periodic_tasks
    name = periodic.task.name
    shared.store.schedule(name, periodic.spec, periodic.task.queue)
    shared.store.queue("maintenance_and_reporting").enqueue(1)

    lines = cli(capsys, "status")[1].splitlines()

    header = next(line for line in lines if line.startswith("SCHEDULE"))
    (row,) = [line for line in lines if line.startswith(name)]
    assert row.split()[:3] == [name, "1h", "maintenance_and_reporting"]
    assert header.index("EVERY") == row.index(" 1h ") + 1, "the columns after the name move over, aligned"
    (queue,) = [line for line in lines if line.startswith("maintenance_and_reporting ")]
    assert queue.split() == ["maintenance_and_reporting", "1", "0", "0", "0", "0", "0s"]
    assert "…" not in "\n".join(lines)


def test_long_queue_and_schedule_names_are_whole_and_other_long_fields_are_cut_to_80_columns(
    shared: Prepared, capsys: pytest.CaptureFixture[str]
) -> None:
    store, clock = shared.store, shared.clock
    long = "q" * 128
    store.queue(long).enqueue(1)
    store.schedule("s" * 128, "@every 3650d", long)
    now = clock.now()
    assert store.engine.try_lock(SCHEDULER_LOCK, "o" * 128, now, now + timedelta(seconds=10))
    store.engine.record_worker(
        WorkerRecord("w" * 128, "h" * 255, 2**22, (long,) * 3, 10**6, now, now, 10**6, 10**12, 10**12)
    )

    out = cli(capsys, "status")[1]

    lines = out.splitlines()
    assert [line.split()[0] for line in lines if line.startswith(("q", "s"))] == [long, "s" * 128]
    (schedule,) = [line for line in lines if line.startswith("s")]
    assert schedule.split()[:3] == ["s" * 128, "3650d", long]
    assert max(len(line) for line in lines if not line.startswith(("q", "s", "QUEUE", "SCHEDULE"))) <= 79
    (leader,) = [line for line in out.splitlines() if line.startswith("leader: ")]
    assert leader == "leader: " + "o" * 49 + "…, lease ends in 10.0s"
    assert (
        out.splitlines()[-1] == "w" * 13 + "… " + "h" * 9 + "… 4194304 " + "q" * 11 + "…   1M/1M     1.0T   1.0T     0s"
    )


# -- jobs ---------------------------------------------------------------------------------------


def test_jobs_list_shows_a_page_in_the_listings_order_and_how_to_get_the_next(
    busy: Prepared, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = busy.ids
    code, out, _ = cli(capsys, "jobs", "list", "emails", "--limit", "1")
    assert code == EXIT_OK
    lines = out.splitlines()
    assert lines[:2] == [
        "        ID    PRI TRIES   RUN AT (UTC)        PAYLOAD",
        f'{ids["ready-2"]:>10}      5 0/3     2030-01-01 00:00:30 {{"to":"grace@example.com"}}',
    ]
    assert lines[2] == ""
    cursor = lines[3].removeprefix("more: add --cursor ")
    code, out, _ = cli(capsys, "jobs", "list", "emails", "--cursor", cursor)
    assert out.splitlines()[1] == f'{ids["ready"]:>10}      0 0/3     2030-01-01 00:00:00 {{"to":"ada@example.com"}}'
    assert "more:" not in out


@pytest.mark.parametrize(
    ("state", "row"),
    [
        ("delayed", '{id:>10}      0 0/3     2030-01-01 01:00:30 {{"to":"later@example.com"}}'),
        ("running", "{id:>10}      9 1/3     2030-01-01 00:05:30 web-1:4242"),
        ("dead", "{id:>10}      9 1/3     2030-01-01 00:00:30 550 mailbox unavailable"),
    ],
)
def test_jobs_list_shows_each_state_with_what_matters_for_it(
    busy: Prepared, capsys: pytest.CaptureFixture[str], state: str, row: str
) -> None:
    code, out, _ = cli(capsys, "jobs", "list", "emails", "--state", state)
    assert code == EXIT_OK
    assert out.splitlines()[1:] == [row.format(id=busy.ids[state])]


def test_an_error_of_several_lines_stays_on_its_row(shared: Prepared, capsys: pytest.CaptureFixture[str]) -> None:
    shared.store.queue("q").enqueue(1)
    job = must_claim(shared.store.queue("q"))
    job.fail("Traceback:\n\tboom")

    out = cli(capsys, "jobs", "list", "q", "--state", "dead")[1]

    assert out.splitlines()[1].endswith(" Traceback:  boom")
    assert len(out.splitlines()) == 2


def test_jobs_list_shows_bytes_as_bytes_and_says_when_there_is_nothing(
    busy: Prepared, capsys: pytest.CaptureFixture[str]
) -> None:
    out = cli(capsys, "jobs", "list", "reports")[1]
    assert out.splitlines()[1].endswith("<2 bytes> ff00")
    assert cli(capsys, "jobs", "list", "reports", "--state", "dead") == (EXIT_OK, "no dead jobs on 'reports'\n", "")


def test_jobs_list_json_carries_the_jobs_and_the_cursor(busy: Prepared, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "jobs", "list", "reports", "--json")
    assert code == EXIT_OK
    document = json.loads(out)
    assert document["queue"] == "reports"
    assert document["state"] == "ready"
    assert document["cursor"] is None
    (job,) = document["jobs"]
    assert job == {
        "id": busy.ids["raw"],
        "queue": "reports",
        "state": "pending",
        "priority": 0,
        "run_at": "2030-01-01T00:00:30+00:00",
        "expires_at": None,
        "attempts": 0,
        "max_attempts": 3,
        "last_error": None,
        "schedule": None,
        "boundary": None,
        "enqueued_at": "2030-01-01T00:00:30+00:00",
        "worker_id": None,
        "lease_until": None,
        "died_at": None,
        "task": None,
        "last_traceback": None,
        "trace": None,
        "waits_for": None,
        "steps": [],
        "payload": None,
        "payload_base64": "/wA=",
    }
    paged = json.loads(cli(capsys, "jobs", "list", "emails", "--limit", "1", "--json")[1])
    assert isinstance(paged["cursor"], str)
    following = json.loads(cli(capsys, "jobs", "list", "emails", "--json", "--cursor", paged["cursor"])[1])
    assert [job["id"] for job in paged["jobs"] + following["jobs"]] == [busy.ids["ready-2"], busy.ids["ready"]]


def test_jobs_show_prints_every_field_and_the_payload_decoded(
    busy: Prepared, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, "jobs", "show", str(busy.ids["dead"]))
    assert code == EXIT_OK
    assert out.splitlines() == [
        f"id              {busy.ids['dead']}",
        "queue           emails",
        "state           dead",
        "priority        9",
        "run_at          2030-01-01T00:00:30+00:00",
        "expires_at      -",
        "attempts        1",
        "max_attempts    3",
        "last_error      550 mailbox unavailable",
        "schedule        -",
        "boundary        -",
        "enqueued_at     2030-01-01T00:00:30+00:00",
        "worker_id       -",
        "lease_until     -",
        "died_at         2030-01-01T00:00:30+00:00",
        "task            -",
        "last_traceback  -",
        "trace           -",
        "waits_for       -",
        "steps           -",
        "payload         {",
        '                  "to": "bounce@example.com"',
        "                }",
    ]
    shown = json.loads(cli(capsys, "jobs", "show", str(busy.ids["raw"]), "--json")[1])
    assert (shown["payload"], shown["payload_base64"]) == (None, "/wA=")
    assert cli(capsys, "jobs", "show", str(busy.ids["raw"]))[1].splitlines()[-1] == (
        "payload         <2 bytes, base64> /wA="
    )


def test_jobs_show_prints_a_sleeping_jobs_wait_and_its_finished_steps(
    shared: Prepared, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = shared.store.queue("flows").enqueue(1)
    job = must_claim(shared.store.queue("flows"))
    job.step("charge", lambda: "ch_1")
    with pytest.raises(JobSuspended):
        job.wait_for("paid", timeout=60)

    lines = cli(capsys, "jobs", "show", str(job_id))[1].splitlines()

    assert "waits_for       event 'paid' until 2030-01-01T00:01:00+00:00" in lines
    assert "steps           2030-01-01T00:00:00+00:00 charge" in lines
    shown = json.loads(cli(capsys, "jobs", "show", str(job_id), "--json")[1])
    assert shown["waits_for"] == {"until": "2030-01-01T00:01:00+00:00", "event": "paid"}
    assert shown["steps"] == [{"name": "charge", "at": "2030-01-01T00:00:00+00:00"}]


def test_jobs_show_indents_a_traceback_under_its_name(shared: Prepared, capsys: pytest.CaptureFixture[str]) -> None:
    shared.store.queue("q").enqueue(1)
    job = must_claim(shared.store.queue("q"))
    try:
        raise ValueError("bad input")
    except ValueError as exc:
        job.fail(exc)

    lines = cli(capsys, "jobs", "show", str(job.id))[1].splitlines()

    start = next(i for i, line in enumerate(lines) if line.startswith("last_traceback  Traceback"))
    assert lines[start + 1].startswith("                  File ")
    assert any(line == "                ValueError: bad input" for line in lines[start:])
    shown = json.loads(cli(capsys, "jobs", "show", str(job.id), "--json")[1])
    assert shown["last_traceback"].startswith("Traceback (most recent call last):")


def test_jobs_show_prints_a_kept_result_and_jobs_list_lists_them(
    shared: Prepared, capsys: pytest.CaptureFixture[str]
) -> None:
    store, clock = shared.store, shared.clock
    reports = store.queue("reports")
    reports.configure(keep_results=timedelta(days=1))
    job_id = reports.enqueue({"month": 1})
    first = must_claim(reports, "web-1")
    first.retry("timeout", delay=0)
    clock.advance(2)
    must_claim(reports, "web-2").ack(result={"rows": [1, 2]})
    code, out, _ = cli(capsys, "jobs", "show", str(job_id))
    assert code == EXIT_OK
    assert out.splitlines() == [
        f"id            {job_id}",
        "queue         reports",
        "state         done",
        "task          -",
        "attempts      2",
        "max_attempts  3",
        "enqueued_at   2030-01-01T00:00:00+00:00",
        "started_at    2030-01-01T00:00:02+00:00",
        "finished_at   2030-01-01T00:00:02+00:00",
        "keep_until    2030-01-02T00:00:02+00:00",
        "worker_ids    web-1, web-2",
        "errors        2030-01-01T00:00:00+00:00 web-1 -: timeout",
        "payload       {",
        '                "month": 1',
        "              }",
        "result        {",
        '                "rows": [',
        "                  1,",
        "                  2",
        "                ]",
        "              }",
    ]
    shown = json.loads(cli(capsys, "jobs", "show", str(job_id), "--json")[1])
    assert (shown["state"], shown["result"], shown["result_base64"]) == ("done", {"rows": [1, 2]}, None)
    assert shown["errors"][0]["worker_id"] == "web-1"
    listed = cli(capsys, "jobs", "list", "reports", "--state", "done")[1].splitlines()
    assert listed[1:] == [f"{job_id:>10} 2/3     2030-01-01 00:00:02 " + '{"rows":[1,2]}']
    assert json.loads(cli(capsys, "jobs", "list", "reports", "--state", "done", "--json")[1])["jobs"][0]["id"] == job_id
    assert cli(capsys, "jobs", "list", "emails", "--state", "done")[1] == "no done jobs kept on 'emails'\n"


def test_jobs_show_of_a_missing_job_exits_1(shared: Prepared, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "jobs", "show", "99")
    assert (code, out) == (EXIT_ERROR, "")
    assert err == "alkstore: no job 99 (done and gone, cancelled, purged, or never stored)\n"


def test_jobs_cancel_reports_each_job_and_exits_1_unless_all_were_cancelled(
    busy: Prepared, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = busy.ids
    assert cli(capsys, "jobs", "cancel", str(ids["ready"]), str(ids["delayed"])) == (
        EXIT_OK,
        f"job {ids['ready']}: cancelled\njob {ids['delayed']}: cancelled\n",
        "",
    )
    code, out, _ = cli(capsys, "jobs", "cancel", str(ids["running"]), str(ids["dead"]), str(ids["ready"]))
    assert code == EXIT_ERROR
    assert out.splitlines() == [
        f"job {ids['running']}: running: its worker is told to stop it, and it ends cancelled",
        f"job {ids['dead']}: dead, not cancelled (purge or requeue it)",
        f"job {ids['ready']}: no such job (done and gone, cancelled, or never stored)",
    ]
    code, out, _ = cli(capsys, "jobs", "cancel", str(ids["ready-2"]), str(ids["running"]), "--json")
    assert code == EXIT_OK
    assert json.loads(out) == {str(ids["ready-2"]): "cancelled", str(ids["running"]): "cancelling"}
    running = busy.store.get_job(ids["running"])
    assert running is not None
    assert running.cancel_requested


def test_jobs_skip_step_stores_a_step_of_a_job_nobody_holds_and_refuses_the_rest(
    busy: Prepared, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = busy.ids
    ready, dead = str(ids["ready"]), str(ids["dead"])
    assert cli(capsys, "jobs", "skip-step", ready, "charge", "--result", '{"charge": "by hand"}') == (
        EXIT_OK,
        f"job {ready}: step 'charge' stored as finished (pending: its next run gets this result)\n",
        "",
    )
    job = busy.store.get_job(ids["ready"])
    assert job is not None
    assert [(step.name, step.result) for step in job.steps] == [("charge", {"charge": "by hand"})]
    code, out, _ = cli(capsys, "jobs", "skip-step", dead, "send", "--json")
    assert (code, json.loads(out)) == (EXIT_OK, {"id": ids["dead"], "step": "send", "state": "dead"})
    code, out, err = cli(capsys, "jobs", "skip-step", str(ids["running"]), "charge")
    assert (code, out) == (EXIT_ERROR, "")
    assert err == f"alkstore: job {ids['running']} is running: its step 'charge' can be skipped once the run ends\n"
    code, _, err = cli(capsys, "jobs", "skip-step", "99", "charge")
    assert (code, err) == (
        EXIT_ERROR,
        "alkstore: job 99 is stored neither live nor dead: no step of it can be skipped\n",
    )
    code, _, err = cli(capsys, "jobs", "skip-step", ready, "mail", "--result", "{'a': 1}")
    assert code == EXIT_ERROR
    assert err.startswith("alkstore: --result is not JSON: ")
    code, _, err = cli(capsys, "jobs", "skip-step", ready, "__alkstore_wait:1")
    assert code == EXIT_ERROR
    assert "reserved" in err
    job = busy.store.get_job(ids["ready"])
    assert job is not None
    assert [step.name for step in job.steps] == ["charge"]


def test_jobs_requeue_by_id_or_by_queue(busy: Prepared, capsys: pytest.CaptureFixture[str]) -> None:
    ids = busy.ids
    code, out, _ = cli(capsys, "jobs", "requeue", str(ids["dead"]), str(ids["ready"]))
    assert code == EXIT_ERROR
    assert out == f"job {ids['dead']}: requeued\njob {ids['ready']}: not dead, left alone\n"
    requeued = busy.store.get_job(ids["dead"])
    assert requeued is not None
    assert requeued.attempts == 0

    emails = busy.store.queue("emails")
    job = must_claim(emails)
    job.fail("again")
    assert cli(capsys, "jobs", "requeue", "--queue", "emails", "--json") == (
        EXIT_OK,
        '{\n  "queue": "emails",\n  "requeued": 1\n}\n',
        "",
    )
    assert cli(capsys, "jobs", "requeue", "--queue", "emails")[1] == "requeued 0 dead jobs of 'emails'\n"
    assert json.loads(cli(capsys, "jobs", "requeue", "7", "--json")[1]) == {"requeued": [], "not_dead": [7]}


def test_jobs_purge_deletes_dead_jobs_older_than_asked(busy: Prepared, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(capsys, "jobs", "purge", "emails", "--older-than", "1h")[1] == (
        "purged 0 dead jobs of 'emails' that died at least 1h ago\n"
    )
    assert cli(capsys, "jobs", "purge", "emails", "--older-than", "10m") == (
        EXIT_OK,
        "purged 1 dead job of 'emails' that died at least 10m ago\n",
        "",
    )
    assert busy.store.get_job(busy.ids["dead"]) is None
    assert json.loads(cli(capsys, "jobs", "purge", "emails", "--older-than", "0", "--json")[1]) == {
        "queue": "emails",
        "purged": 0,
    }


# -- schedules ---------------------------------------------------------------------------------


def test_schedules_add_list_and_remove(shared: Prepared, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(capsys, "schedules", "list") == (EXIT_OK, "no schedules\n", "")
    code, out, _ = cli(
        capsys,
        "schedules",
        "add",
        "digest",
        "@every 1d",
        "reports",
        "--payload",
        '{"kind": "digest"}',
        "--priority",
        "3",
        "--max-attempts",
        "2",
        "--expires",
        "1h",
    )
    assert code == EXIT_OK
    assert out == "schedule 'digest' fires onto 'reports' @every 1d; next boundary 2030-01-02 00:00:00 UTC\n"
    (stored,) = shared.store.schedules()
    assert (stored.payload, stored.opts.priority, stored.opts.max_attempts) == ({"kind": "digest"}, 3, 2)
    assert stored.opts.expires == timedelta(hours=1)

    assert cli(capsys, "schedules", "list")[1].splitlines() == [
        "SCHEDULE         EVERY  QUEUE          NEXT (UTC)           LAST (UTC)",
        "digest           1d     reports        2030-01-02 00:00:00  -",
    ]
    (listed,) = json.loads(cli(capsys, "schedules", "list", "--json")[1])
    assert listed["expires_seconds"] == 3600.0
    assert listed["priority"] == 3

    assert cli(capsys, "schedules", "remove", "digest") == (
        EXIT_OK,
        "removed schedule 'digest' (the jobs it fired stay)\n",
        "",
    )
    assert cli(capsys, "schedules", "remove", "digest") == (EXIT_ERROR, "", "alkstore: no schedule named 'digest'\n")
    assert json.loads(cli(capsys, "schedules", "remove", "digest", "--json")[1]) == {"name": "digest", "removed": False}


def test_a_bad_schedule_is_a_usage_error_naming_the_problem(
    shared: Prepared, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, "schedules", "add", "digest", "0 3 * * *", "reports")
    assert (code, out) == (EXIT_USAGE, ""), "a usage error, found before the store is opened"
    assert "cron expressions are not supported" in err
    assert shared.store.schedules() == []


# -- healthcheck -------------------------------------------------------------------------------


def test_healthcheck_is_healthy_without_schedules_or_with_a_leader(
    busy: Prepared, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(capsys, "healthcheck") == (
        EXIT_OK,
        "ok    database  reachable: memory://\n"
        "ok    schema    current\n"
        "ok    leader    web-1:4240:1893456000:5f3a9c21, lease until 2030-01-01 00:10:50 UTC\n"
        "healthy\n",
        "",
    )


def test_healthcheck_is_unhealthy_when_schedules_exist_and_no_one_leads(
    busy: Prepared, capsys: pytest.CaptureFixture[str]
) -> None:
    busy.clock.advance(8)  # the lease lapses

    code, out, _ = cli(capsys, "healthcheck")

    assert code == EXIT_ERROR
    assert out.splitlines()[2:] == [
        "FAIL  leader    no scheduler leads while 2 schedules exist (is `alkstore run-schedules` running?)",
        "unhealthy",
    ]
    document = json.loads(cli(capsys, "healthcheck", "--json")[1])
    assert document == {
        "healthy": False,
        "checks": [
            {"name": "database", "ok": True, "detail": "reachable: memory://"},
            {"name": "schema", "ok": True, "detail": "current"},
            {
                "name": "leader",
                "ok": False,
                "detail": "no scheduler leads while 2 schedules exist (is `alkstore run-schedules` running?)",
            },
        ],
    }
    for name in ("nightly-digest", "cleanup"):
        busy.store.unschedule(name)
    assert cli(capsys, "healthcheck")[0] == EXIT_OK


# -- the URL, usage and watching -------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["status"],
        ["healthcheck"],
        ["jobs", "list", "q"],
        ["jobs", "show", "1"],
        ["jobs", "requeue", "1"],
        ["jobs", "cancel", "1"],
        ["jobs", "purge", "q", "--older-than", "1d"],
        ["schedules", "list"],
        ["schedules", "add", "s", "@every 1m", "q"],
        ["schedules", "remove", "s"],
        ["migrate"],
        ["tick"],
        ["run-schedules"],
    ],
    ids=" ".join,
)
def test_every_database_command_needs_a_url_from_the_option_or_the_environment(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"alkstore: the following arguments are required: --url (or set {URL_VARIABLE})")
    assert err.count("\n") == 1


def test_the_url_comes_from_the_environment_when_no_option_gives_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(URL_VARIABLE, "memory://")
    assert main(["healthcheck"]) == EXIT_OK
    assert "reachable: memory://" in capsys.readouterr().out
    monkeypatch.setenv(URL_VARIABLE, "carrier-pigeon://coop")
    assert main(["tick", "--url", "memory://"]) == EXIT_OK, "--url wins over the environment"
    assert main(["tick"]) == EXIT_ERROR
    assert "no alkstore engine for scheme 'carrier-pigeon'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["status", "--watch", "0"], "must be > 0"),
        (["status", "--watch", "2d"], "at most 86400"),
        (["status", "--within", "soon"], "not a duration"),
        (["jobs", "list"], "required: queue"),
        (["jobs", "list", "q", "--state", "pending"], "invalid choice: 'pending'"),
        (["jobs", "list", "q", "--limit", "many"], "not an integer"),
        (["jobs", "show", "0"], "positive integer"),
        (["jobs", "show", "x"], "not a job id"),
        (["jobs", "requeue"], "one of the arguments ID --queue is required"),
        (["jobs", "requeue", "1", "--queue", "q"], "not allowed with argument"),
        (["jobs", "cancel"], "required: ID"),
        (["jobs", "purge", "q"], "required: --older-than"),
        (["jobs", "purge", "q", "--older-than=-1d"], "not a duration"),
        (["jobs", "purge", "q", "--older-than", "1w"], "not a duration"),
        (["schedules", "add", "s", "@every 1m"], "required: queue"),
        (["schedules", "add", "s", "@every 1m", "q", "--payload", "{oops"], "not JSON"),
        (["schedules", "add", "s", "@every 1m", "q", "--expires", "0"], "must be > 0"),
    ],
)
def test_usage_errors_of_the_inspection_commands_exit_2_with_one_line(
    argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--url", "memory://"]) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1, err
    assert err.startswith("alkstore: ")
    assert complaint in err


def test_a_command_group_without_its_action_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    for group in ("jobs", "schedules"):
        assert main([group]) == EXIT_USAGE
        assert "required: ACTION" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("0", 0.0), ("90", 90.0), ("1.5", 1.5), ("90s", 90.0), ("15m", 900.0), ("12h", 43200.0), ("7d", 604800.0)],
)
def test_durations_are_seconds_or_a_number_and_a_unit(value: str, seconds: float) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["jobs", "list", "__alkstore_scheduler"], "reserved prefix"),
        (["jobs", "list", "q", "--limit", "0"], "limit must be between 1 and 1000"),
        (["jobs", "list", "q", "--cursor", "nope"], "not a job listing cursor"),
        (["jobs", "purge", " q", "--older-than", "0"], "leading or trailing whitespace"),
    ],
)
def test_input_the_store_refuses_exits_1_with_its_message(
    argv: list[str], complaint: str, shared: Prepared, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, *argv)
    assert (code, out) == (EXIT_ERROR, "")
    assert complaint in err


def test_status_watch_shows_the_status_until_interrupted_and_exits_0() -> None:
    with LiveProcess([ALKSTORE, "status", "--watch", "0.2", "--url", "memory://"]) as watcher:
        for _ in range(2):
            watcher.wait_for(lambda stream, line: line.startswith("alkstore status at"), timeout=60)
        watcher.proc.send_signal(signal.SIGINT)
        code = watcher.finish(timeout=60)
    assert code == EXIT_OK, watcher.stderr
    assert "".join(watcher.stdout).count("no workers seen in the last 60 s") >= 2
    assert "\x1b[" not in "".join(watcher.stdout), "output that is not a terminal is never redrawn in place"


def test_status_watch_json_prints_one_document_a_line(monkeypatch: pytest.MonkeyPatch) -> None:
    assert run([ALKSTORE, "status", "--json", "--watch", "0.1"]).returncode == EXIT_USAGE, "no URL: a usage error"
    monkeypatch.setenv(URL_VARIABLE, "memory://")
    with LiveProcess([ALKSTORE, "status", "--json", "--watch", "0.1"]) as watcher:
        lines = [watcher.wait_for(lambda stream, line: stream == "stdout", timeout=60) for _ in range(3)]
        watcher.proc.send_signal(signal.SIGTERM)
        assert watcher.finish(timeout=60) == EXIT_OK
    keys = {"at", "queues", "outboxes", "schedules", "leader", "workers"}
    assert [set(json.loads(line)) for line in lines] == [keys] * 3


def test_the_installed_script_runs_healthcheck_with_the_url_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(URL_VARIABLE, "memory://")
    result = run([ALKSTORE, "healthcheck"])
    assert result.returncode == EXIT_OK, result.stderr
    assert result.stdout.endswith("healthy\n")


def test_jobs_show_prints_a_jobs_parents_what_it_waits_for_and_its_children(
    shared: Prepared, capsys: pytest.CaptureFixture[str]
) -> None:
    graph = shared.store.graph()
    graph.add("charge", "orders", 1)
    graph.add("stock", "orders", 2)
    graph.add("ship", "shipping", 3, after=["charge", "stock"])
    ids = shared.store.enqueue_graph(graph)
    must_claim(shared.store.queue("orders")).ack()
    lines = cli(capsys, "jobs", "show", str(ids["ship"]))[1].splitlines()
    assert f"parents         {ids['charge']}, {ids['stock']}" in lines
    assert f"waiting_on      {ids['stock']}" in lines
    assert "children        -" in lines
    shown = json.loads(cli(capsys, "jobs", "show", str(ids["stock"]), "--json")[1])
    assert (shown["parents"], shown["waiting_on"], shown["children"]) == ([], [], [ids["ship"]])
