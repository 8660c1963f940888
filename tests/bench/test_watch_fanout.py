"""The watch fan-out measurement's bookkeeping, on synthetic timestamps: who should get a
write, what counts as a delivery, a miss, an unexpected or an early event, and the quantiles."""

from __future__ import annotations

import pytest

from bench.watch_fanout import (
    GROUP_LABEL,
    Ledger,
    WatcherSpec,
    by_quarter,
    group_names,
    namespace_names,
    watcher_mix,
)

NS = namespace_names(2)
G0 = {GROUP_LABEL: "g0"}
G1 = {GROUP_LABEL: "g1"}
WATCHERS = [
    WatcherSpec(0, None, None),      # every Work
    WatcherSpec(1, NS[0], None),     # one namespace
    WatcherSpec(2, None, "g0"),      # a label everywhere
    WatcherSpec(3, NS[1], "g1"),     # a label in one namespace
]


def ledger() -> Ledger:
    return Ledger(WATCHERS, frozenset(NS))


def test_the_mix_has_every_kind_of_watcher_in_its_proportions() -> None:
    specs = watcher_mix(1000, namespace_names(20), group_names(4))
    kinds = [s.kind for s in specs]
    assert {kind: kinds.count(kind) for kind in set(kinds)} == {
        "all": 100, "namespace": 600, "all+label": 200, "namespace+label": 100}
    assert [s.index for s in specs] == list(range(1000))
    # Namespaces and labels are spread, not all on the first.
    assert len({s.namespace for s in specs if s.kind == "namespace"}) == 20
    assert len({s.group for s in specs if s.kind == "all+label"}) == 4
    assert specs[3].path() == "/apis/work.gpufed.io/v1alpha1/namespaces/bench-fanout-3/works"
    assert specs[7].params("42") == {"resourceVersion": "42", "labelSelector": f"{GROUP_LABEL}={specs[7].group}"}
    assert specs[0].path() == "/apis/work.gpufed.io/v1alpha1/works" and specs[0].params("0") == {"resourceVersion": "0"}


@pytest.mark.parametrize(
    ("namespace", "labels", "expected"),
    [
        (NS[0], G0, {0, 1, 2}),
        (NS[0], G1, {0, 1}),
        (NS[1], G1, {0, 3}),
        (NS[1], G0, {0, 2}),
        (NS[1], {}, {0}),
    ],
)
def test_recipients_follow_namespace_and_label(namespace: str, labels: dict[str, str], expected: set[int]) -> None:
    assert ledger().recipients(namespace, labels) == expected


def test_delays_run_from_the_write_reply_and_count_misses_and_early_events() -> None:
    book = ledger()
    # Write 10 (ns0, g0: watchers 0, 1, 2): watcher 0 reads it before the reply, 1 after, 2 never.
    book.arrived(0, 10, NS[0], now=99.9)
    book.wrote(10, NS[0], G0, sent=99.5, returned=100.0)
    book.arrived(1, 10, NS[0], now=100.25)
    # Write 11 (ns1, g1: watchers 0, 3): both read it; 3 reads it twice (a re-watch).
    book.wrote(11, NS[1], G1, sent=100.8, returned=101.0)
    book.arrived(3, 11, NS[1], now=101.5)
    book.arrived(3, 11, NS[1], now=101.6)
    book.arrived(0, 11, NS[1], now=102.5)
    # Watcher 1 (ns0 only) gets an ns1 event: a selector the hub did not apply.
    book.arrived(1, 11, NS[1], now=101.1)
    # A controller's Work elsewhere is counted, not timed.
    book.arrived(0, 12, "gpufed-es-a", now=101.2)
    assert book.pending() == 1  # watcher 2 never got write 10
    summary = book.summary()
    assert summary.writes == 2
    assert summary.expected == 5
    assert sorted(summary.delays) == pytest.approx([0.0, 0.25, 0.5, 1.5])
    assert sorted(summary.from_sent) == pytest.approx([0.4, 0.7, 0.75, 1.7])
    assert summary.before_reply == 1
    assert summary.missed == 1 and summary.watchers_missing == 1
    assert summary.unexpected == 1
    assert summary.duplicates == 1
    assert summary.other_events == 1
    assert summary.last == pytest.approx([1.5])  # only write 11 reached every watcher it should
    assert summary.watchers_late == 1  # watcher 0's 1.5 s is past the 1 s target
    assert summary.watchers_behind == 2  # watcher 0 (late) and watcher 2 (missed)
    assert summary.quantile_ms(50) == pytest.approx(250.0)
    assert summary.quantile_ms(100) == pytest.approx(1500.0)
    assert summary.by_kind["namespace+label"]["p50_ms"] == pytest.approx(500.0)


def test_the_warm_up_round_is_not_timed() -> None:
    book = ledger()
    book.arrived(1, 5, NS[0], now=1.0)
    book.arrived(1, 7, NS[0], now=1.0)
    assert book.receiving == {1}
    book.start_after(6)
    book.arrived(2, 6, NS[0], now=2.0)  # a late warm-up event
    summary = book.summary()
    assert summary.writes == 0 and summary.delays == []
    # Revision 7 was kept (after the warm-up) but nobody wrote it: unexpected.
    assert summary.unexpected == 1
    assert summary.quantile_ms(99) is None


def test_quarters_show_a_delay_that_grows() -> None:
    growing = [0.01 * i for i in range(1, 9)]  # 10 ms .. 80 ms over eight writes
    assert by_quarter(growing) == pytest.approx([10.0, 30.0, 50.0, 70.0])
    assert by_quarter([0.2, 0.2, 0.2]) == pytest.approx([200.0, 200.0, 200.0])  # too few for four
    assert by_quarter([]) == []
