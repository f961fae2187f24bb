"""The context policies ``replay --compare`` sets side by side, and what each one sent
and cost over the runs replayed under it.

A policy is one object with one interface (:class:`Policy`: a :class:`Family` and its
parameters), as the strategy steps are (:class:`ctxwin.fitting.strategy.Step`):

* ctxwin's own cuts: ``just-fit`` (the fewest turns dropped) and ``block=SHARE``
  (:attr:`~ctxwin.fitting.strategy.Strategy.block`), replayed by
  :func:`ctxwin.runs.simulate.replay_run`;
* ``as-logged``: the run as it happened, priced from its own usage;
* the providers' and agents' own policies, applied call by call to a session's
  transcript as the provider or agent would (:class:`Timeline`): Anthropic's tool-result
  clearing (``anthropic-clear``) and thinking clearing (``anthropic-clear-thinking``),
  an agent's auto-compaction (``auto-compact``: Claude Code's and Codex's thresholds) and
  the providers' server-side compaction (``anthropic-compact``, ``openai-compact``).

Every policy's requests go through one model of a cache and its bill
(:class:`ctxwin.runs.billing.Bill`). A policy gives one :data:`Outcome` per run; a row
adds up the outcomes of the runs under one policy (:func:`compare_row`); a figure is
``None`` when some run's is unknown, never a guess.

A policy is written ``NAME`` or ``NAME:KEY=VALUE,KEY=VALUE`` (``block=SHARE`` as before);
:func:`policies` reads a ``--compare`` list of them.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from ctxwin.core import FITS, NEEDS_PRUNING, NO_BUDGET, TRUNCATED
from ctxwin.cost.caching import Computed
from ctxwin.errors import InputError, UsageError
from ctxwin.runs.billing import Bill, session_marks, usd, written_ttl

if TYPE_CHECKING:
    from ctxwin.fitting.rows import ReplayReport
    from ctxwin.recorded import Run
    from ctxwin.settings import Settings

JUST_FIT = "just-fit"

Outcome = dict[str, Any]
"""What one run did under one policy: the keys :func:`compare_row` adds up."""


class Param(NamedTuple):
    """One parameter of a policy family."""

    name: str
    default: Any
    """``None``: the family works it out per run (a preset)."""
    read: Callable[[str], Any]
    """Reads the value as written (raises ``ValueError`` for a bad one)."""
    grid: tuple[Any, ...] = ()
    """The values ``--recommend`` tries (empty: only the default)."""
    doc: str = ""


def _count(text: str) -> int:
    value = int(text.replace("_", ""))
    if value < 0:
        raise ValueError(text)
    return value


def _share(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise ValueError(text)
    return value


def _flag(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise ValueError(text)


def _tools(text: str) -> tuple[str, ...]:
    return tuple(t for t in text.split("|") if t)


def _compact_trigger(text: str) -> int:
    """``compact_20260112``'s trigger: input tokens, at least 50,000."""
    value = _count(text)
    if value < 50_000:
        raise ValueError(text)
    return value


def _at(text: str) -> Any:
    """``at``: a preset name, a share of the window (up to 1) or tokens."""
    if text in COMPACT_PRESETS:
        return text
    value = float(text)
    if value <= 0:
        raise ValueError(text)
    return value if value <= 1 else int(value)


class Family:
    """A kind of policy: its name, its parameters, how a run is replayed under it
    (:attr:`outcome`) and the configuration that sets it (:attr:`config`).

    One class whose instances (:data:`FAMILIES`) hold their behaviour, as
    :class:`~ctxwin.fitting.strategy.Step` does."""

    __slots__ = ("config", "doc", "name", "outcome", "params", "positional")

    def __init__(
        self,
        name: str,
        doc: str,
        outcome: Callable[[Policy, Run, Settings, Base], Outcome],
        config: Callable[[Policy, int | None], dict[str, Any]],
        params: Sequence[Param] = (),
        positional: bool = False,
    ) -> None:
        self.name = name
        self.doc = doc
        self.outcome = outcome
        self.config = config
        self.params = {p.name: p for p in params}
        self.positional = positional
        """Written ``NAME=VALUE`` (``block=0.45``): the one parameter named as the family."""


class Policy(NamedTuple):
    """A policy: a family (by name, :data:`FAMILIES`) and the parameters given."""

    family: str
    params: tuple[tuple[str, Any], ...] = ()

    @property
    def kind(self) -> Family:
        return FAMILIES[self.family]

    def get(self, name: str) -> Any:
        """The value of parameter ``name``: as given, else the family's default."""
        for key, value in self.params:
            if key == name:
                return value
        return self.kind.params[name].default

    @property
    def label(self) -> str:
        """The policy as written (``block=0.45``, ``anthropic-clear:keep=5``)."""
        if self.kind.positional:
            return f"{self.family}={self.get(self.family):g}"
        if not self.params:
            return self.family
        return f"{self.family}:" + ",".join(f"{k}={_written(v)}" for k, v in self.params)

    def outcome(self, run: Run, settings: Settings, base: Base) -> Outcome:
        """What ``run`` sent and cost under this policy (``base``: its replay as logged)."""
        out = self.kind.outcome(self, run, settings, base)
        out["policy"] = self.label
        return out

    def config(self, window: int | None = None) -> dict[str, Any]:
        """What sets this policy: Anthropic's ``context_management``, ctxwin's flags or
        the agent's own setting, as the policy fits."""
        return self.kind.config(self, window)


def _written(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "|".join(value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


# --- reading policies ---------------------------------------------------------


def parse_policy(text: str) -> Policy:
    """The policy ``text`` names: ``NAME``, ``NAME:KEY=VALUE,...`` or ``block=SHARE``.
    Raises :class:`~ctxwin.errors.UsageError` naming the valid policies or parameters."""
    text = text.strip()
    name, colon, rest = text.partition(":")
    name = name.strip()
    if not colon and "=" in name:
        key, _, value = name.partition("=")
        name, rest = key.strip(), f"{key.strip()}={value}"
    family = FAMILIES.get(name)
    if family is None:
        raise UsageError(
            f"unknown policy {text!r} (choose from: {', '.join(_spellings())})",
        )
    params: list[tuple[str, Any]] = []
    for part in rest.split(",") if rest.strip() else ():
        key, eq, value = part.partition("=")
        key = key.strip()
        param = family.params.get(key)
        if param is None or not eq:
            known = ", ".join(family.params) or "none"
            raise UsageError(
                f"policy {name}: unknown parameter {part.strip()!r} (its parameters: {known})"
            )
        try:
            params.append((key, param.read(value.strip())))
        except ValueError:
            raise UsageError(
                f"policy {name}: {key}={value.strip()!r} is not valid ({param.doc})"
            ) from None
    if family.positional and not params:
        raise UsageError(f"policy {name} needs a value: {name}=VALUE")
    return Policy(name, tuple(params))


def _spellings() -> list[str]:
    return [f"{f.name}=SHARE" if f.positional else f.name for f in FAMILIES.values()]


def policies(texts: Sequence[str]) -> list[Policy]:
    """The policies in ``texts`` (each one or comma-separated), in order, each once. A
    ``KEY=VALUE`` whose key is no policy's name continues the policy before it
    (``anthropic-clear:trigger=50000,keep=5``)."""
    out: dict[str, Policy] = {}
    for text in texts:
        current: list[str] = []
        for part in text.split(","):
            if not part.strip():
                continue
            head = part.partition("=")[0].partition(":")[0].strip()
            continues = ":" in current[0] if current else False
            if continues and "=" in part and ":" not in part and head not in FAMILIES:
                current.append(part)
                continue
            if current:
                p = parse_policy(_join(current))
                out.setdefault(p.label, p)
            current = [part]
        if current:
            p = parse_policy(_join(current))
            out.setdefault(p.label, p)
    return list(out.values())


def _join(parts: list[str]) -> str:
    return ",".join(p.strip() for p in parts)


def policy_block(policy: str) -> float:
    """The :attr:`~ctxwin.fitting.strategy.Strategy.block` a cutting policy names: ``just-fit``
    (0: the fewest turns dropped) or ``block=SHARE`` (0 < SHARE ≤ 1). Raises
    :class:`~ctxwin.errors.UsageError` for anything else."""
    p = parse_policy(policy)
    if p.family == JUST_FIT:
        return 0.0
    if p.family == "block":
        return float(p.get("block"))
    raise UsageError(
        f"unknown cutting policy {policy!r} (choose just-fit or block=SHARE, 0 < SHARE <= 1)"
    )


# --- what every policy's outcome carries ---------------------------------------


class Base:
    """A run's replay as logged (the settings given, ctxwin's default cut), which every
    policy reads: its model, window, prices and caching rules; its calls' usage and its
    transcript call by call (:class:`Timeline`), each read once for every policy."""

    __slots__ = ("_timeline", "_usages", "error", "report", "run", "settings", "summaries")

    def __init__(
        self,
        run: Run,
        settings: Settings,
        report: ReplayReport | None,
        error: str | None = None,
        summaries: Sequence[str] = (),
    ) -> None:
        self.run = run
        self.settings = settings
        self.summaries = summaries
        """The summaries the session's own compactions wrote (:attr:`Run.summary` of the
        runs of its file)."""
        self.report = report
        """``None`` when the run could not be replayed (:attr:`error` says why)."""
        self.error = error
        self._timeline: Timeline | None = None
        self._usages: list[Mapping[str, Any] | None] | None = None

    def timeline(self) -> Timeline:
        """The run's transcript call by call (raises :class:`~ctxwin.errors.InputError`
        for a run that is not a session's transcript)."""
        if self._timeline is None:
            self._timeline = Timeline(self.run, self.settings, _base(self))
        return self._timeline

    def summary_tokens(self) -> int | None:
        """The mean size of :attr:`summaries` in tokens, at the run's calibration
        (``None``: the session has none)."""
        from ctxwin.tokens.base import Kind, calibrated

        rep = _base(self)
        if not self.summaries:
            return None
        estimator = self.settings.make_estimator(rep["model"])
        sizes = []
        for text in self.summaries:
            cost = [0] * estimator.width
            estimator.add_text(cost, text, Kind.PROSE)
            sizes.append(calibrated(estimator.raw(cost), rep["final_calibration"]))
        return round(sum(sizes) / len(sizes))

    def usages(self) -> list[Mapping[str, Any] | None]:
        """Each call's logged usage, in call order (``None``: none logged)."""
        if self._usages is None:
            run = self.run
            if run.recorded is not None:
                self._usages = [c.usage for c in run.recorded]
            else:
                self._usages = list(self.timeline().usages)
        return self._usages


def output_cost(
    usages: Sequence[Mapping[str, Any] | None], price: Mapping[str, Any] | None
) -> float | None:
    """USD for the output the calls logged, at ``price`` (``models.json``'s shape);
    ``None`` when the price or some call's output count is unknown."""
    from ctxwin.fitting.calibration import output_tokens_from_usage

    per_million = None if price is None else price.get("output")
    if per_million is None or not usages:
        return None
    per_million = float(per_million)
    total = 0
    for usage in usages:
        n = output_tokens_from_usage(usage) if isinstance(usage, Mapping) else None
        if n is None:
            return None
        total += n
    return total * per_million / 1_000_000


def _add(*values: float | None) -> float | None:
    return None if any(v is None for v in values) else usd(sum(v or 0.0 for v in values))


def _stop(run: Run, call: int, why: str) -> dict[str, Any]:
    return {"run": run.name, "call": call, "why": why}


def _price_keys(rep: ReplayReport) -> dict[str, Any]:
    return {
        "model": rep["model"],
        "price": rep["price"],
        "price_source": rep["price_source"],
        "cache_rules": rep["cache_rules"],
        "cache_marks": rep["cache_marks"],
        "context_length": rep["context_length"],
    }


# --- ctxwin's own cuts ----------------------------------------------------------


def _cut_outcome(policy: Policy, run: Run, settings: Settings, base: Base) -> Outcome:
    from ctxwin.core import INVALID
    from ctxwin.runs.simulate import replay_run

    share = 0.0 if policy.family == JUST_FIT else float(policy.get("block"))
    rep = replay_run(run, settings._replace(strategy=settings.strategy._replace(block=share)))
    rows = rep["rows"]
    sent = [
        r["estimated_tokens_after"]
        for r in rows
        if "estimated_tokens_after" in r and r["status"] in (FITS, NEEDS_PRUNING)
    ]
    stopped = [r for r in rows if r["status"] in (TRUNCATED, NO_BUDGET)]
    stop = None
    if stopped:
        r = stopped[0]
        why = (
            f"no prompt fits a budget of {r['budget']:,} tokens"
            if r["status"] == NO_BUDGET
            else f"even the newest turn alone is over the budget of {r['budget']:,} tokens"
        )
        stop = _stop(run, r["call"], why)
    out_cost = output_cost(base.usages(), rep["price"])
    return {
        "calls": rep["calls"],
        "pruned_calls": sum(1 for r in rows if r["status"] == NEEDS_PRUNING),
        "truncated_calls": len(stopped),
        "overflow_calls": len(stopped),
        "invalid_calls": sum(1 for r in rows if r["status"] == INVALID),
        "sent": sent,
        "cached_tokens": rep["cached_tokens"],
        "cache_write_tokens": rep["cache_write_tokens"],
        "input_cost": rep["input_cost"],
        "output_cost": usd(out_cost),
        "summary_calls": 0,
        "summary_cost": 0.0,
        "total_cost": _add(rep["input_cost"], out_cost),
        "stop": stop,
        "first_truncated": rep["first_truncated"],
        **_price_keys(rep),
    }


def _cut_config(policy: Policy, window: int | None = None) -> dict[str, Any]:
    share = 0.0 if policy.family == JUST_FIT else float(policy.get("block"))
    return {"ctxwin": f"--block {share:g}"}


# --- the run as logged ----------------------------------------------------------


def _as_logged_outcome(policy: Policy, run: Run, settings: Settings, base: Base) -> Outcome:
    """The run's own usage: each call's logged prompt, cache reads and writes, priced at
    the model's prices; where a call logs no cache counts, what one cache of the model's
    rules would have read and written of the transcript as sent (:class:`Timeline`)."""
    from ctxwin.fitting.calibration import (
        cache_tokens_from_usage,
        hour_writes_from_usage,
        prompt_tokens_from_usage,
    )
    from ctxwin.runs.billing import input_cost

    rep = _base(base)
    usages = base.usages()
    price = _pricing(rep)
    simulated = _simulate(base.timeline(), rep, Decide()) if run.recorded is None else None
    window = rep["context_length"] or 0
    sent: list[int] = []
    read = written = 0
    cost: float | None = 0.0
    known = True
    over = 0
    stop = None
    for k, usage in enumerate(usages, 1):
        row = rep["rows"][k - 1] if k - 1 < len(rep["rows"]) else None
        prompt = prompt_tokens_from_usage(usage) if isinstance(usage, Mapping) else None
        if prompt is None and row is not None:
            prompt = row.get("estimated_tokens")
        got_read, got_written = (
            cache_tokens_from_usage(usage) if isinstance(usage, Mapping) else (None, None)
        )
        hour = (hour_writes_from_usage(usage) if isinstance(usage, Mapping) else None) or 0
        if got_read is None and simulated is not None and k - 1 < len(simulated.calls):
            got_read, got_written, hour = simulated.calls[k - 1]
        if prompt is None:
            known = False
            continue
        sent.append(prompt)
        if window and prompt > window:
            over += 1
            why = f"its logged prompt of {prompt:,} tokens is over the window"
            stop = stop or _stop(run, k, why)
        if got_read is None:
            known = False
            continue
        read += got_read
        written += got_written or 0
        paid = input_cost(prompt, got_read, got_written or 0, price, hour)
        cost = None if paid is None or cost is None else cost + paid
    in_cost = usd(cost) if known else None
    out_cost = output_cost(usages, rep["price"])
    return {
        "calls": len(usages),
        "pruned_calls": 0,
        "truncated_calls": 0,
        "overflow_calls": over,
        "invalid_calls": 0,
        "sent": sent,
        "cached_tokens": read if known else None,
        "cache_write_tokens": written if known else None,
        "input_cost": in_cost,
        "output_cost": usd(out_cost),
        "summary_calls": 0,
        "summary_cost": 0.0,
        "total_cost": _add(in_cost, out_cost),
        "stop": stop,
        "first_truncated": None,
        **_price_keys(rep),
    }


def _base(base: Base) -> ReplayReport:
    if base.report is None:
        raise InputError(base.error or "the run could not be replayed")
    return base.report


def _pricing(rep: ReplayReport) -> Any:
    from ctxwin.cost.pricing import table_pricing

    return None if rep["price"] is None else table_pricing(rep["price"])


def _rules(rep: ReplayReport) -> Any:
    from ctxwin.cost.pricing import CacheRules

    rules = rep["cache_rules"]
    return None if rules is None else CacheRules(**rules)


def _logged_config(policy: Policy, window: int | None = None) -> dict[str, Any]:
    return {}


# --- a session's transcript, call by call -----------------------------------------


class Timeline:
    """A session's calls as its provider saw them with no policy: the tokens of each
    message (at the calibration the run's replay learned), where each call's request
    ends, what comes before the messages, and the tool results and thinking a policy
    may clear."""

    __slots__ = (
        "at",
        "before",
        "ends",
        "results",
        "scale",
        "thinking",
        "tokens",
        "turn",
        "usages",
    )

    def __init__(self, run: Run, settings: Settings, rep: ReplayReport) -> None:
        from ctxwin.core import load
        from ctxwin.formats.base import CALL, RESULT, THINKING
        from ctxwin.recorded import model_messages
        from ctxwin.tokens.base import calibrated
        from ctxwin.view import USER

        estimator = settings.make_estimator(rep["model"])
        fmt = run.format_for(settings.fmt)
        if run.recorded is not None:
            whole = load(_last_request(run), fmt, estimator)
        else:
            whole = load(run.body, fmt, estimator)
        view = whole.view
        factor = rep["final_calibration"]
        raw = estimator.raw
        weights = [calibrated(raw(item.cost), factor) for item in view.items]
        self.turn: list[int] = []
        """Each message's user turn: a user's message (not a tool's results) opens one;
        the calls and results of a tool loop are the turn's."""
        turn = 0
        for item in view.items:
            if item.role == USER and not item.answers:
                turn += 1
            self.turn.append(turn)
        if run.recorded is not None:
            self.ends = _recorded_ends(run.recorded, whole.adapter.items_key)
            self.usages = [c.usage for c in run.recorded]
            self.at = [c.at for c in run.recorded]
        else:
            self.ends = model_messages(view, run.calls_at)
            self.usages = [run.usage_at.get(i) for i in self.ends]
            self.at = [run.sent_at.get(i) for i in self.ends]
        rows = rep["rows"]
        prompts = []
        for k in range(len(self.ends)):
            row = rows[k] if k < len(rows) else None
            prompt = None if row is None else (row.get("reported_tokens") or None)
            if prompt is None and row is not None:
                prompt = row.get("estimated_tokens")
            prompts.append(prompt)
        # each call's new messages are scaled to the growth of its prompt (as logged, else
        # as estimated), so the requests a policy leaves as they were are the run's own
        first = next((p for p in prompts if p is not None), None)
        fixed = (rep["final_overhead"] or 0) + calibrated(raw(view.base), factor)
        before = 0 if first is None else min(first, fixed)
        self.tokens = list(weights)
        self.scale = [1.0] * len(weights)
        done = 0
        start = 0
        for end, prompt in zip(self.ends, prompts, strict=True):
            new = sum(weights[start:end])
            target = None if prompt is None else prompt - before - done
            if target is not None and new > 0:
                ratio = max(0, target) / new
                for i in range(start, end):
                    self.scale[i] = ratio
                    self.tokens[i] = round(weights[i] * ratio)
            done += sum(self.tokens[start:end])
            start = end
        self.before = [before] * len(self.ends)
        placeholder = "[cleared]"
        self.results: list[tuple[int, int, str | None, int]] = []
        """``(item, tokens saved when cleared, tool, tokens its call's input saves)``."""
        self.thinking: list[tuple[int, int]] = []
        parts = whole.adapter.parts(whole.body, view, estimator)
        calls: dict[str, int] = {}
        for p in whole.adapter.kinds(whole.body, view, estimator):
            if p.kind == CALL and p.index >= 0:
                for call_id in view.items[p.index].calls:
                    calls.setdefault(call_id, calibrated(raw(p.cost), factor))
            elif p.kind == THINKING and p.index >= 0:
                # every thinking block: the provider's edit clears it in any turn
                tokens = round(calibrated(raw(p.cost), factor) * self.scale[p.index])
                self.thinking.append((p.index, min(self.tokens[p.index], tokens)))
        for p in parts:
            if p.kind == RESULT:
                kept = whole.adapter.replaced_cost(p, placeholder, estimator)
                saved = calibrated(raw(p.cost), factor) - calibrated(raw(kept), factor)
                saved = min(self.tokens[p.index], max(0, round(saved * self.scale[p.index])))
                answers = view.items[p.index].answers
                inputs = calls.get(answers[0], 0) if answers else 0
                if p.index > 0:
                    inputs = round(inputs * self.scale[p.index - 1])
                self.results.append((p.index, saved, p.tool, inputs))


def _last_request(run: Run) -> Any:
    """The last request of a log of calls: the transcript every call's request is a
    prefix of, when the log is one growing conversation (:func:`_recorded_ends`)."""
    calls = run.recorded or []
    if not calls:
        raise InputError("no requests in this run")
    return calls[-1].request


def _recorded_ends(calls: Sequence[Any], key: str) -> list[int]:
    """How many messages each call's request holds: the calls of one growing
    conversation, each request the first messages of the last (its last message is the
    last request's at that place). Raises :class:`~ctxwin.errors.InputError` otherwise:
    the providers' policies replay one conversation call by call."""
    final = calls[-1].request.get(key) if isinstance(calls[-1].request, Mapping) else None
    if not isinstance(final, list):
        raise InputError(f"the last request has no {key!r} list")
    ends: list[int] = []
    for call in calls:
        messages = call.request.get(key) if isinstance(call.request, Mapping) else None
        if not isinstance(messages, list):
            messages = []
        n = len(messages)
        if n < 1 or n > len(final) or (ends and n < ends[-1]) or messages[-1] != final[n - 1]:
            raise InputError(
                f"{call.where or 'a call'}: the providers' and agents' policies replay one "
                "growing conversation, and this request is not the start of the last one"
            )
        ends.append(n)
    return ends


class Request:
    """What a policy sends on one call: what comes before the messages, a summary (its
    tokens and its generation) when a compaction replaced the messages before
    :attr:`start`, and the tokens each message saves by an edit.

    Kept so that a call costs O(1) besides its edits: the tokens of the messages as
    edited are prefix sums, recomputed from the first message an edit touched; a
    message's cache key is its place and the number of edits made at or before it (an
    edit changes every prefix from the message it touches on), so a request's keys are a
    few runs of places (:class:`~ctxwin.cost.caching.Places`), not a list per call."""

    __slots__ = ("_dirty", "_sums", "edits", "saved", "start", "summary", "summary_gen", "tl")

    def __init__(self, tl: Timeline) -> None:
        self.tl = tl
        self.start = 0
        self.summary = 0
        self.summary_gen = 0
        self.saved: dict[int, int] = {}
        """Per message, the tokens its edits save."""
        self.edits: list[int] = []
        """Where each edit made since the last compaction starts (its first message), in
        order of place."""
        self._sums = [0]
        """``_sums[i]``: the tokens of messages ``[0, i)`` as edited (as far as computed)."""
        self._dirty: int | None = None
        """The first message an edit touched since the sums and keys were last brought up
        to date."""

    def cut(self, item: int, tokens: int) -> None:
        """Edit message ``item``: it saves ``tokens`` more."""
        self.saved[item] = self.saved.get(item, 0) + tokens
        self._dirty = item if self._dirty is None else min(self._dirty, item)

    def compact(self, end: int, summary: int) -> None:
        """A summary of ``summary`` tokens replaces every message before ``end``."""
        self.start = end
        self.summary = summary
        self.summary_gen += 1
        self.saved = {}
        self.edits = []
        self._dirty = None
        del self._sums[1:]

    def _settle(self) -> None:
        if self._dirty is None:
            return
        at = self._dirty
        bisect.insort(self.edits, at)
        if len(self._sums) > at + 1:
            del self._sums[at + 1 :]
        self._dirty = None

    def tokens_to(self, end: int) -> int:
        """The tokens of messages ``[0, end)`` as edited."""
        self._settle()
        sums, tokens, saved = self._sums, self.tl.tokens, self.saved
        while len(sums) <= end:
            i = len(sums) - 1
            sums.append(sums[-1] + tokens[i] - saved.get(i, 0))
        return sums[end]

    def runs(self, end: int) -> list[range]:
        """The cache keys of messages ``[start, end)``: runs of places, each shifted by
        the number of edits made at or before it."""
        self._settle()
        out: list[range] = []
        a = self.start
        for n, at in enumerate((*self.edits, end)):
            b = min(max(at, self.start), end)
            if b > a:  # messages [a, b): n edits at or before each
                out.append(range(a + n * _EDITED, b + n * _EDITED))
                a = b
        return out


_EDITED = 1 << 40
"""What an edit adds to the cache key of every message from the one it touches on."""


class Simulated(NamedTuple):
    """A policy's requests over a timeline, call by call."""

    calls: list[tuple[int, int, int]]
    """Per call ``(read, written, written for an hour)``."""
    sent: list[int]
    input_cost: float | None
    read: int | None
    written: int | None
    over: int
    stop: tuple[int, int] | None
    """``(call, prompt)`` of the first call over the window."""
    summary_calls: int
    summary_cost: float | None


class Decide:
    """A policy's move before each call (:meth:`__call__`): it edits the request, or
    compacts it (it returns a summary's size), given the prompt the request would send.
    An instance holds what the policy keeps from call to call over one run."""

    def __call__(self, tl: Timeline, k: int, req: Request, prompt: int) -> int | None:
        return None


def _prompt(tl: Timeline, k: int, req: Request) -> int:
    """The tokens ``req`` sends at call ``k``."""
    end = tl.ends[k]
    return tl.before[k] + req.summary + req.tokens_to(end) - req.tokens_to(req.start)


def _laid(tl: Timeline, k: int, req: Request) -> Any:
    """``req`` at call ``k`` laid out as cache blocks: what comes before the messages,
    the summary when there is one, then each message (keys :meth:`Request.runs`)."""
    from ctxwin.cost.caching import Laid, Places

    end = tl.ends[k]
    runs = req.runs(end)
    if req.summary_gen:
        runs.insert(0, range(-req.summary_gen, -req.summary_gen + 1))
    keys = Places(("before", req.summary_gen), runs)
    return Laid(keys, _Ends(tl.before[k], req, keys.n))


class _Ends(Computed[int]):
    """Where each block of a request ends (its tokens from the start), computed when read
    (a cache reads few of them): at the messages' sizes as edited when read."""

    __slots__ = ("before", "req", "skip", "start", "summary")

    def __init__(self, before: int, req: Request, blocks: int) -> None:
        self.n = blocks + 1
        self.before = before
        self.req = req
        self.start = req.start
        self.summary = req.summary
        self.skip = 1 if req.summary_gen else 0

    def at(self, i: int) -> int:
        if i == 0:
            return 0
        total = self.before
        if self.skip and i >= 2:
            total += self.summary
        messages = i - 1 - self.skip
        if messages > 0:
            tokens_to = self.req.tokens_to
            total += tokens_to(self.start + messages) - tokens_to(self.start)
        return total


def _simulate(tl: Timeline, rep: ReplayReport, decide: Decide) -> Simulated:
    """Send a session's calls as the policy ``decide`` edits them, through one cache of
    the model's rules, each at its logged time and with Claude Code's marks (a
    breakpoints cache reads only up to a mark)."""
    bill = Bill(_rules(rep), _pricing(rep))
    price = bill.price
    window = rep["context_length"] or 0
    req = Request(tl)
    ttl: int | None = None
    _warm(tl, bill)
    calls: list[tuple[int, int, int]] = []
    sent: list[int] = []
    over = 0
    stop: tuple[int, int] | None = None
    summaries = 0
    summary_cost: float | None = 0.0
    for k in range(len(tl.ends)):
        usage = tl.usages[k]
        if isinstance(usage, Mapping):
            ttl = written_ttl(usage, ttl)
        prompt = _prompt(tl, k, req)
        summary = decide(tl, k, req, prompt)
        if summary is not None:
            # the summarising call reads the whole context and writes the summary
            laid = _laid(tl, k, req)
            bill.send(prompt, laid, session_marks(len(laid.keys)), tl.at[k], ttl)
            paid = _summary_price(summary, price)
            summaries += 1
            summary_cost = None if paid is None or summary_cost is None else summary_cost + paid
            req.compact(tl.ends[k], summary)
        prompt = _prompt(tl, k, req)
        laid = _laid(tl, k, req)
        before = (bill.read, bill.written, bill.written_1h)
        bill.send(prompt, laid, session_marks(len(laid.keys)), tl.at[k], ttl)
        calls.append((bill.read - before[0], bill.written - before[1], bill.written_1h - before[2]))
        sent.append(prompt)
        if window and prompt > window:
            over += 1
            stop = stop or (k + 1, prompt)
    totals = bill.totals()
    return Simulated(
        calls,
        sent,
        totals["input_cost"],
        totals["cached_tokens"],
        totals["cache_write_tokens"],
        over,
        stop,
        summaries,
        summary_cost,
    )


def _warm(tl: Timeline, bill: Bill) -> None:
    """What the cache holds before the run's first call: what comes before the messages
    (the system prompt and tools), when the first call's log shows it read a prefix an
    earlier conversation wrote (as a Claude Code session's first call does)."""
    from ctxwin.cost.caching import Laid, Places, Sent
    from ctxwin.fitting.calibration import cache_tokens_from_usage

    usage = tl.usages[0] if tl.usages else None
    if not isinstance(usage, Mapping) or not tl.before or not tl.before[0]:
        return
    read = cache_tokens_from_usage(usage)[0]
    if read:
        laid = Laid(Places(("before", 0), []), [0, tl.before[0]])
        bill.cache.send(Sent(laid, [0], tl.at[0], None))


def _summary_price(summary: int, price: Any) -> float | None:
    """The output of a summarising call: ``summary`` tokens at the output price (its input
    went through the bill)."""
    if price is None or price.output is None:
        return None
    return float(summary * price.output / 1_000_000)


def _simulated_outcome(run: Run, base: Base, decide: Decide, what: str) -> Outcome:
    rep = _base(base)
    sim = _simulate(base.timeline(), rep, decide)
    out_cost = output_cost(base.usages(), rep["price"])
    stop = None
    if sim.stop is not None:
        call, prompt = sim.stop
        stop = _stop(
            run,
            call,
            f"{what} leaves a prompt of {prompt:,} tokens, over the "
            f"{rep['context_length']:,}-token window",
        )
    summary_cost = usd(sim.summary_cost)
    return {
        "calls": len(sim.sent),
        "pruned_calls": 0,
        "truncated_calls": 0,
        "overflow_calls": sim.over,
        "invalid_calls": 0,
        "sent": sim.sent,
        "cached_tokens": sim.read,
        "cache_write_tokens": sim.written,
        "input_cost": sim.input_cost,
        "output_cost": usd(out_cost),
        "summary_calls": sim.summary_calls,
        "summary_cost": summary_cost,
        "total_cost": _add(sim.input_cost, out_cost, summary_cost),
        "stop": stop,
        "first_truncated": None,
        **_price_keys(rep),
    }


# --- Anthropic's context editing ---------------------------------------------------

CLEAR_TRIGGER = 100_000
"""``clear_tool_uses_20250919``'s default trigger: 100,000 input tokens."""
CLEAR_KEEP = 3
"""Its default ``keep``: the newest 3 tool uses."""


class Clear(Decide):
    """``clear_tool_uses_20250919`` before each call: once the prompt is over
    ``trigger``, the results of every tool use but the newest ``keep`` (not of an
    ``exclude``d tool, not cleared already) are cleared, oldest first, with their calls'
    inputs under ``clear-inputs``; when that saves less than ``clear-at-least``, nothing
    is. What is cleared stays cleared. Each result is looked at O(1) times: the results
    are cleared oldest first and all at once, so those still to clear are a range."""

    def __init__(self, policy: Policy) -> None:
        self.trigger = policy.get("trigger")
        self.keep = policy.get("keep")
        self.at_least = policy.get("clear-at-least")
        self.exclude = set(policy.get("exclude"))
        self.inputs = policy.get("clear-inputs")
        self.done = 0
        """The results before this one (in :attr:`Timeline.results`) are settled."""
        self.sent = 0
        """The results before this one are in the requests sent so far."""
        self.ready = 0
        """The results before this one are older than the newest ``keep``."""
        self.gain = 0
        """What clearing the results in ``[done, ready)`` would save."""

    def _gain(self, r: tuple[int, int, str | None, int]) -> int:
        if r[2] in self.exclude:
            return 0
        return r[1] + (r[3] if self.inputs else 0)

    def __call__(self, tl: Timeline, k: int, req: Request, prompt: int) -> int | None:
        results = tl.results
        end = tl.ends[k]
        while self.sent < len(results) and results[self.sent][0] < end:
            self.sent += 1
        while self.ready < self.sent - self.keep:
            if results[self.ready][0] >= req.start:
                self.gain += self._gain(results[self.ready])
            self.ready += 1
        self.done = max(self.done, _first_at(results, self.done, req.start))
        if prompt <= self.trigger or self.gain <= 0 or self.gain < self.at_least:
            return None
        for item, saved, tool, tokens in results[self.done : self.ready]:
            if tool in self.exclude or item < req.start:
                continue
            if saved:
                req.cut(item, saved)
            # a call's inputs live in the message before its result
            if self.inputs and tokens and item - 1 >= req.start:
                spare = tl.tokens[item - 1] - req.saved.get(item - 1, 0)
                if spare > 0:
                    req.cut(item - 1, min(tokens, spare))
        self.done = self.ready
        self.gain = 0
        return None


def _first_at(results: Sequence[tuple[int, int, str | None, int]], i: int, start: int) -> int:
    """The first of ``results`` from ``i`` on whose message is at or after ``start``."""
    while i < len(results) and results[i][0] < start:
        i += 1
    return i


def _clear_outcome(policy: Policy, run: Run, settings: Settings, base: Base) -> Outcome:
    return _simulated_outcome(run, base, Clear(policy), "clearing what it may")


def _clear_config(policy: Policy, window: int | None = None) -> dict[str, Any]:
    edit: dict[str, Any] = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "input_tokens", "value": policy.get("trigger")},
        "keep": {"type": "tool_uses", "value": policy.get("keep")},
    }
    if policy.get("clear-at-least"):
        edit["clear_at_least"] = {"type": "input_tokens", "value": policy.get("clear-at-least")}
    if policy.get("exclude"):
        edit["exclude_tools"] = list(policy.get("exclude"))
    if policy.get("clear-inputs"):
        edit["clear_tool_inputs"] = True
    return {
        "anthropic": {"context_management": {"edits": [edit]}},
        "langchain": {
            "ClearToolUsesEdit": {
                "trigger": policy.get("trigger"),
                "keep": policy.get("keep"),
                "clear_at_least": policy.get("clear-at-least"),
                "clear_tool_inputs": policy.get("clear-inputs"),
                "exclude_tools": list(policy.get("exclude")),
            }
        },
    }


THINKING_KEEP = 1
"""``clear_thinking_20251015``'s default ``keep``: the thinking of the newest assistant turn."""


class ClearThinking(Decide):
    """``clear_thinking_20251015`` before each call: the thinking of every assistant turn
    but the newest ``keep`` that have any is removed (a turn: a user's message and the
    tool loop that answers it, whose thinking the API keeps while it runs). The thinking
    is cleared oldest first, so what is left to clear is a range."""

    def __init__(self, policy: Policy) -> None:
        self.keep = policy.get("keep")
        self.sent = 0
        """The thinking before this one (in :attr:`Timeline.thinking`) has been sent."""
        self.done = 0
        """The thinking before this one is cleared."""
        self.turns: list[int] = []
        """The turns that have any thinking sent, in order."""

    def __call__(self, tl: Timeline, k: int, req: Request, prompt: int) -> int | None:
        thinking = tl.thinking
        end = tl.ends[k]
        while self.sent < len(thinking) and thinking[self.sent][0] < end:
            turn = tl.turn[thinking[self.sent][0]]
            if not self.turns or self.turns[-1] != turn:
                self.turns.append(turn)
            self.sent += 1
        if len(self.turns) <= self.keep:
            return None
        newest = self.turns[len(self.turns) - self.keep] if self.keep else None
        while self.done < self.sent:
            item, tokens = thinking[self.done]
            if newest is not None and tl.turn[item] >= newest:
                break
            if item >= req.start and tokens:
                req.cut(item, tokens)
            self.done += 1
        return None


def _thinking_outcome(policy: Policy, run: Run, settings: Settings, base: Base) -> Outcome:
    return _simulated_outcome(run, base, ClearThinking(policy), "clearing earlier thinking")


def _thinking_config(policy: Policy, window: int | None = None) -> dict[str, Any]:
    edit = {
        "type": "clear_thinking_20251015",
        "keep": {"type": "thinking_turns", "value": policy.get("keep")},
    }
    return {"anthropic": {"context_management": {"edits": [edit]}}}


# --- compaction --------------------------------------------------------------------

COMPACT_PRESETS = ("claude-code", "codex")
"""The agent tools whose auto-compaction thresholds ``auto-compact:at=`` names."""

SUMMARY_TOKENS = 10_000
"""A compaction's summary size when neither the parameter (``summary=``) nor the
session's own compaction records give one: half of Claude Code's 20,000-token allowance
for the summary's output."""

ANTHROPIC_COMPACT_TRIGGER = 150_000
"""The ``compact_20260112`` edit's default trigger (input tokens); it accepts no less
than 50,000."""


def compact_at(at: Any, run: Run, rep: ReplayReport, settings: Settings) -> int:
    """The prompt size at which a compaction fires: ``at`` as tokens, a share of the
    window, a tool's preset (``claude-code``, ``codex``), or ``None`` for the run's own
    tool's (Codex's rule for any other)."""
    from ctxwin.fitting.budget import ModelSpec
    from ctxwin.fitting.windows import CLAUDE_CODE, CODEX, auto_compact

    window = rep["context_length"] or 0
    if isinstance(at, float):
        return int(at * window)
    if isinstance(at, int):
        return at
    tool = at if at is not None else (CLAUDE_CODE if run.shape == CLAUDE_CODE else CODEX)
    source: Any = "session" if run.shape == CODEX and run.context_length else "table"
    spec = ModelSpec(rep["model"], window, source)
    found = auto_compact(tool, spec)
    if found is None:  # Codex on a window that is not the session's: 90 % of it
        return window * 9 // 10
    return found.tokens


class Compact(Decide):
    """Compaction before each call: when the prompt reaches ``limit`` tokens, a summary of
    ``summary`` tokens replaces every message sent so far."""

    def __init__(self, limit: int, summary: int) -> None:
        self.limit = limit
        self.summary = summary

    def __call__(self, tl: Timeline, k: int, req: Request, prompt: int) -> int | None:
        if prompt < self.limit or tl.ends[k] <= req.start:
            return None
        return self.summary


def _compact_outcome(policy: Policy, run: Run, settings: Settings, base: Base) -> Outcome:
    rep = _base(base)
    param = "trigger" if "trigger" in policy.kind.params else "at"
    limit = compact_at(policy.get(param), run, rep, settings)
    summary = policy.get("summary") or base.summary_tokens() or SUMMARY_TOKENS
    return _simulated_outcome(
        run, base, Compact(limit, int(summary)), "compacting at its threshold"
    )


def _compact_config(policy: Policy, window: int | None = None) -> dict[str, Any]:
    if policy.family == "anthropic-compact":
        edit = {
            "type": "compact_20260112",
            "trigger": {"type": "input_tokens", "value": policy.get("trigger")},
        }
        return {"anthropic": {"context_management": {"edits": [edit]}}}
    at = policy.get("at")
    out: dict[str, Any] = {}
    if at is None or at == "claude-code" or isinstance(at, float):
        out["claude-code"] = (
            {"env": {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": str(_claude_code_pct(at, window))}}
            if isinstance(at, float)
            else "its default"
        )
    if at is None or at == "codex" or isinstance(at, int):
        out["codex"] = (
            {"model_auto_compact_token_limit": at} if isinstance(at, int) else "its default"
        )
    if isinstance(at, float | int):
        # LangChain's SummarizationMiddleware also keeps its `keep` newest messages
        trigger = ["fraction", at] if isinstance(at, float) else ["tokens", at]
        out["langchain"] = {"SummarizationMiddleware": {"trigger": trigger}}
    return out


def _claude_code_pct(at: float, window: int | None) -> int:
    """``CLAUDE_AUTOCOMPACT_PCT_OVERRIDE`` for compacting at ``at`` of ``window``: a
    percentage of Claude Code's effective window (the window less the 20,000 tokens it
    keeps for the summary), at most 100 (the override only lowers the threshold)."""
    from ctxwin.fitting.windows import CLAUDE_CODE_SUMMARY_OUTPUT

    if not window or window <= CLAUDE_CODE_SUMMARY_OUTPUT:
        return min(100, round(at * 100))
    return min(100, round(100 * at * window / (window - CLAUDE_CODE_SUMMARY_OUTPUT)))


def _openai_compact_config(policy: Policy, window: int | None = None) -> dict[str, Any]:
    at = policy.get("at")
    if isinstance(at, int):
        return {"openai": {"context_management": [{"type": "compaction", "compact_threshold": at}]}}
    where = "the tool's threshold" if at is None or isinstance(at, str) else f"{at:g} of the window"
    return {
        "openai": f"context_management [{{type: compaction, compact_threshold}}] at {where}, "
        "or POST /responses/compact there"
    }


# --- the families -----------------------------------------------------------------

_TRIGGERS = (30_000, 50_000, 75_000, 100_000, 150_000)
_KEEPS = (1, 3, 5, 10)
_AT_LEAST = (0, 5_000, 20_000, 50_000)

FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "as-logged",
            "the run as it happened, priced from its own usage",
            _as_logged_outcome,
            _logged_config,
        ),
        Family(
            JUST_FIT,
            "ctxwin's cut, the fewest turns dropped",
            _cut_outcome,
            _cut_config,
        ),
        Family(
            "block",
            "ctxwin's cut moving in blocks of SHARE of the budget",
            _cut_outcome,
            _cut_config,
            (Param("block", 0.45, _share, (0.25, 0.35, 0.45, 0.5), "0 < SHARE <= 1"),),
            positional=True,
        ),
        Family(
            "anthropic-clear",
            "Anthropic's clear_tool_uses_20250919, server-side before each call",
            _clear_outcome,
            _clear_config,
            (
                Param("trigger", CLEAR_TRIGGER, _count, _TRIGGERS, "input tokens"),
                Param("keep", CLEAR_KEEP, _count, _KEEPS, "tool uses"),
                Param("clear-at-least", 0, _count, _AT_LEAST, "input tokens"),
                Param("exclude", (), _tools, (), "tool names, |-separated"),
                Param("clear-inputs", False, _flag, (), "true or false"),
            ),
        ),
        Family(
            "anthropic-clear-thinking",
            "Anthropic's clear_thinking_20251015",
            _thinking_outcome,
            _thinking_config,
            (Param("keep", THINKING_KEEP, _count, (1, 2, 4), "assistant turns"),),
        ),
        Family(
            "auto-compact",
            "the agent's own compaction: a summary replaces the history at its threshold",
            _compact_outcome,
            _compact_config,
            (
                Param(
                    "at",
                    None,
                    _at,
                    (0.5, 0.6, 0.7, 0.8, 0.9),
                    "claude-code, codex, a share of the window or tokens",
                ),
                Param("summary", None, _count, (), "the summary's tokens"),
            ),
        ),
        Family(
            "anthropic-compact",
            "Anthropic's server-side compaction (compact_20260112)",
            _compact_outcome,
            _compact_config,
            (
                Param(
                    "trigger",
                    ANTHROPIC_COMPACT_TRIGGER,
                    _compact_trigger,
                    (50_000, 100_000, 150_000),
                    "input tokens, at least 50000",
                ),
                Param("summary", None, _count, (), "the summary's tokens"),
            ),
        ),
        Family(
            "openai-compact",
            "OpenAI's server-side compaction (context_management compact_threshold) or "
            "/responses/compact, when the input reaches at",
            _compact_outcome,
            _openai_compact_config,
            (
                Param(
                    "at",
                    None,
                    _at,
                    (50_000, 100_000, 150_000, 200_000),
                    "tokens, a share of the window, or codex",
                ),
                Param("summary", None, _count, (), "the summary's tokens"),
            ),
        ),
    )
}
"""Every policy family, by name."""


# --- rows ---------------------------------------------------------------------------


def outcomes(
    run: Run, settings: Settings, chosen: Sequence[Policy], summaries: Sequence[str] = ()
) -> list[Outcome | str]:
    """``run`` under each of ``chosen``: the outcome, or why it could not be had
    (``summaries``: those the session's own compactions wrote, :attr:`Run.summary`)."""
    from ctxwin.errors import CtxwinError
    from ctxwin.runs.simulate import replay_run

    try:
        base = Base(run, settings, replay_run(run, settings), summaries=summaries)
    except CtxwinError as exc:
        base = Base(run, settings, None, str(exc))
    out: list[Outcome | str] = []
    for policy in chosen:
        try:
            out.append(policy.outcome(run, settings, base))
        except CtxwinError as exc:
            out.append(str(exc))
    return out


def compare_row(policy: str, reports: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What replaying the runs (``reports``: their outcomes) under ``policy`` sent and
    cost (``None``: unknown for some run)."""
    sent = [n for rep in reports for n in rep["sent"]]

    def total(key: str) -> Any:
        values = [rep.get(key) for rep in reports]
        known = [v for v in values if v is not None]
        if len(known) < len(values):
            return None
        return usd(sum(known)) if key.endswith("_cost") else sum(known)

    stops = [rep["stop"] for rep in reports if rep.get("stop")]
    return {
        "policy": policy,
        "calls": sum(rep["calls"] for rep in reports),
        "pruned_calls": sum(rep["pruned_calls"] for rep in reports),
        "truncated_calls": sum(rep["truncated_calls"] for rep in reports),
        "overflow_calls": sum(rep["overflow_calls"] for rep in reports),
        "mean_tokens_sent": round(sum(sent) / len(sent)) if sent else None,
        "min_tokens_sent": min(sent) if sent else None,
        "cached_tokens": total("cached_tokens"),
        "cache_write_tokens": total("cache_write_tokens"),
        "input_cost": total("input_cost"),
        "output_cost": total("output_cost"),
        "summary_calls": sum(rep["summary_calls"] for rep in reports),
        "summary_cost": total("summary_cost"),
        "total_cost": total("total_cost"),
        "stop": stops[0] if stops else None,
    }


# --- the recommendation -------------------------------------------------------------

MIN_CONTEXT = 0.75
"""``--min-context``'s default: a recommended policy keeps at least this share of the
run's mean context as logged."""


def grid(policy: Policy) -> list[Policy]:
    """The policies ``--recommend`` tries for ``policy``: every combination of its
    family's grid values (the parameters given stay as given)."""
    kind = policy.kind
    given = dict(policy.params)
    axes: list[tuple[str, tuple[Any, ...]]] = [
        (name, (given[name],) if name in given else p.grid)
        for name, p in kind.params.items()
        if name in given or p.grid
    ]
    combos: list[tuple[tuple[str, Any], ...]] = [()]
    for name, values in axes:
        combos = [(*c, (name, v)) for c in combos for v in values]
    out = [Policy(policy.family, c) for c in combos]
    return out or [policy]


def candidates(named: Iterable[Policy]) -> list[Policy]:
    """``as-logged`` first, then each named policy and its grid (:func:`grid`), each once."""
    out: dict[str, Policy] = {"as-logged": Policy("as-logged")}
    for p in named:
        for q in [p, *grid(p)] if p.family != "as-logged" else [p]:
            out.setdefault(q.label, q)
    return list(out.values())


def recommend(
    rows: Sequence[Mapping[str, Any]],
    tried: Sequence[Policy],
    min_context: float = MIN_CONTEXT,
    window: int | None = None,
) -> dict[str, Any] | None:
    """The cheapest of ``rows`` (one per policy of ``tried``, ``as-logged`` among them) by
    ``total_cost`` with no overflow and a mean context of at least ``min_context`` of
    ``as-logged``'s: ``{"policy", "params", "total_cost", "saving", "config"}`` (saving:
    USD less than as-logged; ``window``: the runs' window, which a setting in a share of
    it is written for), or ``None`` when none qualifies."""
    logged = next((r for r in rows if r["policy"] == "as-logged"), None)
    floor = 0.0
    if logged is not None and logged["mean_tokens_sent"] is not None:
        floor = min_context * logged["mean_tokens_sent"]
    best: tuple[float, Mapping[str, Any], Policy] | None = None
    for row, policy in zip(rows, tried, strict=True):
        cost = row["total_cost"]
        if cost is None or row["overflow_calls"] or policy.family == "as-logged":
            continue
        if (row["mean_tokens_sent"] or 0) < floor:
            continue
        if best is None or cost < best[0]:
            best = (cost, row, policy)
    if best is None:
        return None
    cost, row, policy = best
    base = None if logged is None else logged["total_cost"]
    return {
        "policy": policy.label,
        "params": {name: _json(policy.get(name)) for name in policy.kind.params},
        "total_cost": cost,
        "saving": None if base is None else usd(base - cost),
        "config": policy.config(window),
    }


def _json(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
