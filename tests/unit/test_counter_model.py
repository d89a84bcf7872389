"""The counter model's properties over generated traffics (``mokkafs.counters``): a port's
counters computed at once are each computed alone, and a counter ``moving`` leaves out never
changes. A failure Hypothesis finds is kept as an ``@example`` here, not in a database."""

from __future__ import annotations

from types import MappingProxyType

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mokkafs import counters
from mokkafs.state import Traffic, Windows

_NAMES = (*counters.COUNTERS, "out_of_sequence", "rnr_nak_retry_err")
_rates = st.floats(0.0, 1e11, allow_nan=False)
_times = st.floats(0.0, 1e6, allow_nan=False)


@st.composite
def _traffics(draw: st.DrawFn) -> Traffic:
    names = st.sampled_from(_NAMES)
    pauses = sorted(draw(st.lists(st.tuples(_times, _times), max_size=3)))
    return Traffic(
        draw(_rates), draw(_rates), draw(st.floats(64.0, 4096.0)), draw(st.floats(0.0, 1.0)),
        draw(st.floats(0.0, 1e6)), tuple(draw(st.lists(st.tuples(names, st.floats(0, 1e4)),
                                                       max_size=4))),
        origin=draw(_times), base=tuple(draw(st.lists(
            st.tuples(names, st.integers(0, 2**40)), max_size=3, unique_by=lambda b: b[0]))),
        windows=Windows(pauses=tuple((min(a, b), max(a, b)) for a, b in pauses),
                        bursts=tuple(draw(st.lists(st.tuples(names, st.floats(0, 1e4), _times,
                                                             _times), max_size=3)))))


@settings(max_examples=300, deadline=None)
@given(_traffics(), _times)
def test_a_port_computed_at_once_is_every_counter_computed_alone(traffic: Traffic,
                                                                t: float) -> None:
    together = counters.counters_at(traffic, t)
    for name in {*_NAMES, *together}:
        assert together.get(name, 0) == counters.counter(traffic, name, t), name


# A burst on a unicast counter moves the port's packet total too (found by a fresh seed).
UNICAST_BURST = Traffic(0.0, 0.0, 2048.0, 0.0, 0.0, (),
                        windows=Windows(bursts=(("unicast_rcv_packets", 10.0, 0.0, 5.0),)))


@settings(max_examples=300, deadline=None)
@given(_traffics(), _times, _times)
@example(UNICAST_BURST, 0.0, 5.0)
def test_a_counter_no_rate_burst_or_pause_moves_never_changes(traffic: Traffic, t1: float,
                                                              t2: float) -> None:
    # Such counters are fixed files (no round recomputes them): they must really be fixed.
    still = set(_NAMES) - counters.moving(traffic)
    for name in still:
        assert counters.counter(traffic, name, t1) == counters.constant(traffic, name)
        assert counters.counter(traffic, name, t2) == counters.constant(traffic, name)


@pytest.mark.parametrize("direction", ["xmit", "rcv"])
@pytest.mark.parametrize("kind", ["unicast", "multicast"])
def test_a_burst_on_a_packet_counter_moves_the_ports_total(direction: str, kind: str) -> None:
    name = f"{kind}_{direction}_packets"
    burst = Traffic(0.0, 0.0, 2048.0, 0.0, 0.0, (),
                    windows=Windows(bursts=((name, 10.0, 0.0, 5.0),)))
    total = f"port_{direction}_packets"
    assert total in counters.moving(burst)
    assert counters.counter(burst, total, 5.0) == 50 > counters.constant(burst, total) == 0


def test_a_ports_counters_are_read_only() -> None:
    # Every file of a port shares one computation: none of its readers can change it.
    together = counters.counters_at(UNICAST_BURST, 5.0)
    assert isinstance(together, MappingProxyType)
    with pytest.raises(TypeError):
        together["unicast_rcv_packets"] = 0  # type: ignore[index]
