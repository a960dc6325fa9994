"""docs/workflows.md cannot rot: its order pipeline runs as written and prints what the page says."""

from __future__ import annotations

from pathlib import Path

from tests._docs import block, run_script


def test_the_order_pipeline_runs_as_written_and_prints_what_the_page_shows(tmp_path: Path) -> None:
    result = run_script(block("docs/workflows.md", "store.enqueue_graph(pipeline)"), tmp_path, "pipeline.py")
    assert result.stdout == block("docs/workflows.md", "report waits for 2 jobs")


def test_the_fragments_run_on_a_store_as_the_page_describes() -> None:
    import alkstore

    with alkstore.open("memory://") as store:
        scope: dict[str, object] = {"store": store, "EnqueueOpts": alkstore.EnqueueOpts}
        exec(block("docs/workflows.md", 'on_parent_failure="cancel"'), scope)
        ship = store.get_job(scope["ship_id"])  # type: ignore[arg-type]
        assert ship is not None
        assert ship.waiting_on == (scope["charge_id"],)
        exec(block("docs/workflows.md", "ids = store.enqueue_graph_tx(tx, graph)"), scope)
        ids = scope["ids"]
        assert isinstance(ids, dict)
        report = store.get_job(ids["report"])
        assert report is not None
        assert report.waiting_on == (ids["email"], ids["invoice"])
