"""The automatic reviews the store counts per pull request (`review.auto_pause`), on both
backends: counted once per run, in their order, within a window, forgotten on `resume`."""

from __future__ import annotations

import threading
from collections.abc import Callable

from bot.store.contract import AUTO_REVIEWS_KEPT_S, Storage
from tests.backends import query

Opener = Callable[[Callable[[], float]], Storage]


def test_each_automatic_review_gets_its_place_in_the_window_once(open_store: Opener) -> None:
    now = [1000.0]
    store = open_store(lambda: now[0])
    places = []
    for n in range(3):
        places.append(store.count_auto_review("octo/hello", 1, f"wf_{n}", window_s=600))
        now[0] += 60
    assert places == [1, 2, 3]
    # A retried job of the second run gets the place it had, not a new one.
    assert store.count_auto_review("octo/hello", 1, "wf_1", window_s=600) == 2
    # Another pull request, or another repository, counts on its own.
    assert store.count_auto_review("octo/hello", 2, "wf_other", window_s=600) == 1
    assert store.count_auto_review("octo/world", 1, "wf_world", window_s=600) == 1
    # Past the window the oldest no longer counts: 1060, 1120 and this one at 1620 do.
    now[0] += 440
    assert store.count_auto_review("octo/hello", 1, "wf_3", window_s=600) == 3


def test_resume_forgets_the_pull_requests_count_only(open_store: Opener) -> None:
    now = [50.0]
    store = open_store(lambda: now[0])
    for n in range(2):
        store.count_auto_review("octo/hello", 1, f"wf_{n}", window_s=600)
        store.count_auto_review("octo/hello", 2, f"wf_2_{n}", window_s=600)
    assert store.forget_auto_reviews("octo/hello", 1) == 2
    assert store.count_auto_review("octo/hello", 1, "wf_after", window_s=600) == 1
    assert store.count_auto_review("octo/hello", 2, "wf_2_2", window_s=600) == 3


def test_counts_older_than_kept_are_dropped_as_new_ones_come(open_store: Opener) -> None:
    now = [0.0]
    store = open_store(lambda: now[0])
    store.count_auto_review("octo/hello", 9, "wf_old", window_s=60)
    now[0] = AUTO_REVIEWS_KEPT_S + 1
    store.count_auto_review("octo/hello", 1, "wf_new", window_s=60)
    assert query(store, "SELECT run_id FROM auto_reviews") == [("wf_new",)]


def test_reviews_counted_at_once_by_two_processes_get_distinct_places(
    open_store: Opener,
) -> None:
    stores = [open_store(lambda: 10.0), open_store(lambda: 10.0)]  # one instant, two stores
    places: list[int] = []
    start = threading.Barrier(6)

    def count(n: int) -> None:
        start.wait()
        places.append(stores[n % 2].count_auto_review("octo/hello", 1, f"wf_{n}", window_s=60))

    threads = [threading.Thread(target=count, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(places) == [1, 2, 3, 4, 5, 6]
