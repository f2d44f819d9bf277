"""Activity: in-flight counts from several threads, the LLM client's requests, and a copy for Ray."""

from __future__ import annotations

import pickle
import threading

from kbench.api.runner import Stages
from kbench.config import RunConfig
from kbench.events import Activity, InFlight


class _Client:
    in_flight, queued = 3, 5


def test_counts_what_is_in_flight_across_threads() -> None:
    activity = Activity()
    inside, release = threading.Barrier(5), threading.Event()

    def build() -> None:
        with activity.track("builds"):
            inside.wait()
            release.wait()

    threads = [threading.Thread(target=build) for _ in range(4)]
    for t in threads:
        t.start()
    inside.wait()  # all four builds are inside track()
    assert activity.now() == InFlight(builds=4)
    assert activity.run("evaluations", activity.now) == InFlight(builds=4, evaluations=1)
    release.set()
    for t in threads:
        t.join()
    assert activity.now() == InFlight()
    activity.client = _Client()  # type: ignore[assignment]
    assert activity.now() == InFlight(requests=3, queued=5)


def test_a_jobs_stages_travel_to_another_process_with_an_empty_activity() -> None:
    activity = Activity()
    activity.client = _Client()  # type: ignore[assignment]
    cfg = RunConfig(device="cpu")
    stages = Stages(cfg, activity=activity)
    with activity.track("builds"):
        copy = pickle.loads(pickle.dumps(stages.build)).__self__
        assert activity.now().builds == 1
    assert copy.activity is not activity and copy.activity.now() == InFlight()
    assert copy.config == cfg
