"""benchmarks/split_cost.py end to end on a few documents and profiles: one worker and
two must deliver the same decisions, and every step is reported."""

from __future__ import annotations

import json
from pathlib import Path

from tests.scripts import load_benchmark

split_cost = load_benchmark("split_cost")


def test_split_cost_times_every_step_of_one_worker_and_two(tmp_path: Path) -> None:
    out = tmp_path / "split.json"
    assert split_cost.main(["--profiles", "12", "--batch", "300", "--rounds", "2",
                            "--warm-up", "0", "--out", str(out)]) == 0
    got = json.loads(out.read_text())
    assert set(got["us_per_document"]["one"]) == {"route", "score"}
    assert set(got["us_per_document"]["two"]) == {"route", "score_here", "encode_copies",
                                                  "score_copies"}
    assert all(v > 0 for steps in got["us_per_document"].values() for v in steps.values())
    total = got["total_us_per_document"]
    assert got["extra_us_per_document"] == round(total["two"] - total["one"], 3)
    assert got["copy_payloads_a_step"] >= 1


def test_split_cost_in_three_processes_reports_each_role(tmp_path: Path) -> None:
    out = tmp_path / "processes.json"
    assert split_cost.main(["--processes", "--profiles", "12", "--batch", "300", "--rounds", "2",
                            "--warm-up", "1", "--out", str(out)]) == 0
    got = json.loads(out.read_text())
    assert got["mode"] == "processes"
    assert got["steps"] == {"solo": 2, "router": 4, "receiver": 4}
    per_doc = got["us_per_document"]
    assert set(per_doc["solo"]) == {"route", "score"}
    assert set(per_doc["router"]) == {"route", "score_here", "encode_copies"}
    assert set(per_doc["receiver"]) == {"score_copies"}
    assert all(v > 0 for steps in per_doc.values() for v in steps.values())
    cpu = got["process_cpu_us_per_document"]
    assert cpu["two"] == round(cpu["router"] + cpu["receiver"], 3)
    assert got["worker_cores_cap"] is None
