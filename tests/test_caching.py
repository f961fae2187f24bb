"""Prompt caching: what each request reads from and writes to a provider's cache."""

from __future__ import annotations

from itertools import accumulate
from typing import Any, NamedTuple, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwin.cost.caching import (
    LOOKBACK,
    Block,
    Cache,
    Laid,
    Places,
    Sent,
    Use,
    _shared,
    cache_use,
)


class Rules(NamedTuple):
    kind: str | None
    min_prefix: int | None = None
    step: int | None = None
    ttl_seconds: int | None = None


OPENAI = Rules("automatic", 1024, 128, 300)
ANTHROPIC = Rules("breakpoints", 1024, None, 300)


def blocks(*tokens: int, start: int = 0) -> list[Block]:
    return [Block(start + i, n) for i, n in enumerate(tokens)]


class _Lazy(list[int]):
    """Ends that count how many were read."""

    reads = 0

    def __getitem__(self, i: Any) -> Any:
        _Lazy.reads += 1
        return super().__getitem__(i)


def _ends(bs: Any) -> list[int]:
    return [0, *accumulate(b.tokens for b in bs)]


def test_a_request_laid_out_already_reads_only_the_ends_it_needs() -> None:
    """A replay lays out a long request once as keys and ends; the cache reads a few ends
    of it, not one per block."""
    first = blocks(*[100] * 2000)
    second = [*first, Block(2000, 50)]
    cache = Cache(ANTHROPIC)
    _Lazy.reads = 0
    one = cache.send(Sent(Laid([b.key for b in first], _Lazy(_ends(first))), marks=[1999]))
    two = cache.send(Sent(Laid([b.key for b in second], _Lazy(_ends(second))), marks=[2000]))
    assert one == Use(0, 200_000)
    assert two == Use(200_000, 50)
    assert _Lazy.reads < 10


def test_automatic_reads_the_shared_prefix_in_steps_from_the_minimum() -> None:
    first = blocks(1000, 500)  # 1,500 tokens: cached
    second = [*first, Block(2, 300)]  # shares 1,500: 1,024 + 3 × 128 = 1,408
    third = [first[0], Block(9, 500)]  # shares 1,000: under the minimum
    use = cache_use([Sent(first), Sent(second), Sent(third)], OPENAI)
    assert use == [Use(0, 0), Use(1408, 0), Use(0, 0)]


def test_automatic_caches_nothing_shorter_than_the_minimum() -> None:
    short = blocks(600, 300)
    longer = [*short, Block(2, 900)]
    assert cache_use([Sent(short), Sent(longer)], OPENAI) == [Use(), Use()]


def test_entries_expire_after_their_lifetime_since_last_use() -> None:
    a = blocks(2000)
    b = [*a, Block(1, 10)]
    c = [*b, Block(2, 10)]
    use = cache_use([Sent(a, at=0), Sent(b, at=200), Sent(c, at=900)], OPENAI)
    assert [u.read for u in use] == [0, 1920, 0]  # 700 s after the last use: gone


def test_an_entry_lives_the_lifetime_its_request_asked_for() -> None:
    """Anthropic's marks may ask for an hour (``ttl: "1h"``): what such a request writes
    outlives the rules' five minutes; a five-minute entry does not."""
    a = blocks(3000)
    b = [*a, Block(1, 100)]
    late = 600.0  # ten minutes after the first request
    hour = cache_use([Sent(a, [0], at=0, ttl=3600), Sent(b, [1], at=late)], ANTHROPIC)
    five = cache_use([Sent(a, [0], at=0, ttl=300), Sent(b, [1], at=late)], ANTHROPIC)
    rules = cache_use([Sent(a, [0], at=0), Sent(b, [1], at=late)], ANTHROPIC)
    assert hour[1] == Use(3000, 100)
    assert five[1] == rules[1] == Use(0, 3100)
    # an hour-long entry expires too, an hour after its last use
    gone = cache_use([Sent(a, [0], at=0, ttl=3600), Sent(b, [1], at=3700)], ANTHROPIC)
    assert gone[1] == Use(0, 3100)


def test_breakpoints_write_at_marks_and_read_the_longest_written_prefix() -> None:
    one = blocks(3000, 200)
    two = [*one, *blocks(400, 100, start=2)]
    three = [*two, Block(4, 50)]
    use = cache_use([Sent(one, marks=[1]), Sent(two, marks=[3]), Sent(three, marks=[4])], ANTHROPIC)
    assert use == [Use(0, 3200), Use(3200, 500), Use(3700, 50)]


def test_breakpoints_without_a_mark_neither_read_nor_write() -> None:
    one = blocks(3000)
    assert cache_use([Sent(one, marks=[0]), Sent(one)], ANTHROPIC) == [Use(0, 3000), Use()]


def test_a_hit_is_found_only_within_the_lookback_of_a_mark() -> None:
    head = blocks(3000)
    near = [*head, *blocks(*[10] * (LOOKBACK - 1), start=1)]
    far = [*head, *blocks(*[10] * (LOOKBACK + 5), start=1)]
    first = Sent(head, marks=[0])
    assert cache_use([first, Sent(near, marks=[len(near) - 1])], ANTHROPIC)[1].read == 3000
    assert cache_use([first, Sent(far, marks=[len(far) - 1])], ANTHROPIC)[1].read == 0


def test_an_edited_block_ends_the_shared_prefix() -> None:
    a = blocks(1500, 800, 800)
    edited = [a[0], Block("cleared 1", 20), a[2]]
    assert cache_use([Sent(a), Sent(edited)], OPENAI)[1].read == 1408


def test_no_caching_rules_read_nothing() -> None:
    a = blocks(5000)
    assert cache_use([Sent(a), Sent(a)], Rules(None)) == [Use(), Use()]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 6), st.lists(st.integers(1, 900), max_size=6), st.booleans()),
        min_size=1,
        max_size=12,
    ),
    st.sampled_from([OPENAI, ANTHROPIC, Rules("implicit", 1024, None, None)]),
)
def test_never_reads_more_than_it_shares_with_an_earlier_request(
    steps: list[tuple[int, list[int], bool]], rules: Rules
) -> None:
    """An agent loop's requests: each keeps a prefix of the one before (a cut) and appends
    new blocks; what a request reads is never more than the longest prefix it shares with
    an earlier request, nor more than itself, and a write never exceeds the request."""
    history: list[Block] = [Block("head", 1500)]
    sent: list[Sent] = []
    fresh = 0
    for keep, new, mark in steps:
        history = history[: 1 + keep]
        for n in new:
            fresh += 1
            history.append(Block(fresh, n))
        marks = [len(history) - 1] if mark or rules.kind != "breakpoints" else []
        sent.append(Sent(list(history), marks=marks))
    use = cache_use(sent, rules)
    laid = [
        Sent(Laid([b.key for b in cast(list[Block], s.blocks)], _ends(s.blocks)), s.marks)
        for s in sent
    ]
    assert cache_use(laid, rules) == use  # blocks laid out already: the same answer
    for i, (s, u) in enumerate(zip(sent, use, strict=True)):
        blocks = cast(list[Block], s.blocks)
        total = sum(b.tokens for b in blocks)
        best = 0
        for earlier in sent[:i]:
            shared = 0
            for x, y in zip(blocks, cast(list[Block], earlier.blocks), strict=False):
                if x != y:
                    break
                shared += x.tokens
            best = max(best, shared)
        assert 0 <= u.read <= min(best, total)
        assert 0 <= u.written <= total


_runs = st.lists(
    st.tuples(st.integers(0, 30), st.integers(0, 12)).map(lambda t: range(t[0], t[0] + t[1])),
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(a=_runs, b=_runs, first_a=st.sampled_from(["x", "y"]), first_b=st.sampled_from(["x"]))
def test_places_share_what_their_lists_share(
    a: list[range], b: list[range], first_a: str, first_b: str
) -> None:
    """Keys laid out as runs of places (a replay's growing transcript) share exactly the
    prefix their lists share, with each other and with a list of keys."""
    pa, pb = Places(first_a, a), Places(first_b, b)
    la, lb = pa.listed(), pb.listed()
    assert len(pa) == len(la) and [pa[i] for i in range(len(pa))] == la
    assert _shared(pa, pb) == _shared(la, lb) == _shared(pa, lb) == _shared(la, pb)


def test_a_growing_transcript_laid_out_as_places_is_priced_as_its_list() -> None:
    """The same requests, keyed by lists or by runs of places, read and write the same."""
    requests = [(0, 2, 2, n) for n in range(3, 40)] + [(0, 2, 20, n) for n in range(40, 60)]
    for rules in (OPENAI, ANTHROPIC):
        by_list, by_runs = Cache(rules), Cache(rules)
        read = 0
        for _, head, cut, n in requests:
            places = Places("before", [range(head), range(cut, n)])
            keys = places.listed()
            tokens = [0, *accumulate(300 for _ in keys)]
            marks = [len(keys) - 1]
            use = by_list.send(Sent(Laid(keys, tokens), marks))
            assert by_runs.send(Sent(Laid(places, tokens), marks)) == use
            read += use.read
        assert read > 0  # the cut at call 40 and the calls that extend it read a prefix
