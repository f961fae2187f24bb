"""Load the recorded agent runs in ``../shared/corpus`` as request bodies.

Two kinds of sample come out of it:

* :class:`Transcript` — a whole conversation as an OpenAI Chat Completions
  body, for the tokenizer comparison (taubench conversations, SWE-agent
  trajectories, OpenHands histories, agent-sdk call logs, cassette bodies).
* :class:`Usage` — one recorded request and the prompt tokens the provider
  reported for it, for the provider comparison.

Provider calls are split into a *fit part*, from which the figures set from
provider calls are derived (:mod:`fidelity.provider`, :mod:`fidelity.fit`), and
a *held-out part*, which is only measured (:func:`split`). The unit of the split
is the run: an OpenHands run, an agent-sdk log file, a cassette file. Within each
model family (:func:`family`) the runs are ranked by the SHA-256 of their name;
the 1st, 3rd, 5th … are fit, the 2nd, 4th … held out. A family with one run is split
by call instead: its calls ranked by the SHA-256 of their name, every second one held
out (calls of one run share a conversation, so such a held-out call is a weaker check
than a held-out run). So the split is the same on every run of the harness and on every
machine, and every family with two calls or more has both parts. (Adding a run to a
family can move that family's other runs; no other family's.)

Nothing here copies corpus data anywhere; it is read where it lies. Cassette
bodies (Chat Completions, Anthropic Messages, Gemini ``generateContent``) are
used as recorded and read by their own adapters.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ctxwin.fitting.calibration import prompt_tokens_from_usage

HERE = Path(__file__).resolve().parent
DEFAULT_CORPUS = HERE.parent.parent / "shared" / "corpus"


def parser(
    prog: str, doc: str | None, out: str, corpus: bool = True, estimator: bool = True
) -> argparse.ArgumentParser:
    """The arguments every fidelity report takes: ``--corpus`` (when it reads the corpus),
    ``--out`` (default ``fidelity/OUT``) and ``--estimator`` (repeatable; when it compares
    estimators)."""
    p = argparse.ArgumentParser(prog=prog, description=doc)
    if corpus:
        p.add_argument("--corpus", type=Path, default=None)
    p.add_argument("--out", type=Path, default=Path(__file__).parent / out)
    if estimator:
        p.add_argument("--estimator", action="append", default=None)
    return p


def publish(text: str, out: Path, details: str = "") -> int:
    """Print the report ``text`` and write it, with ``details`` after it, to ``out``."""
    sys.stdout.write(text + "\n")
    out.write_text(text + "\n" + details, encoding="utf-8")
    sys.stderr.write(f"wrote {out}\n")
    return 0


def corpus_path() -> Path:
    """Where the corpus is looked for: ``$CTXWIN_CORPUS``, else ``../shared/corpus`` (it may
    be absent: :func:`corpus_dir`)."""
    env = os.environ.get("CTXWIN_CORPUS")
    return Path(env) if env else DEFAULT_CORPUS


def corpus_dir() -> Path | None:
    """:func:`corpus_path`; ``None`` when absent."""
    path = corpus_path()
    return path if (path / "MANIFEST.tsv").is_file() else None


@dataclass(frozen=True, slots=True)
class Transcript:
    source: str
    name: str
    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Usage:
    source: str
    name: str
    fmt: str
    """The body's wire format (adapter name): ``openai-chat``, ``anthropic`` or ``gemini``."""
    model: str
    body: dict[str, Any]
    """The request body exactly as sent."""
    reported: int
    """Prompt tokens the provider reported (all of them, cache included)."""
    run: str
    """The run the call belongs to, the unit of :func:`split`: an OpenHands run
    (``file:instance``), an agent-sdk log file, a cassette file (their stems)."""


def _load(path: Path) -> Any:
    return orjson.loads(path.read_bytes())


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    return ""


# ---------------------------------------------------------------------------
# conversations


def taubench(root: Path) -> Iterator[Transcript]:
    for path in sorted((root / "taubench").glob("*.json")):
        for i, item in enumerate(_load(path)):
            yield Transcript("taubench", f"{path.stem}#{i}", {"messages": item["traj"]})


def sweagent(root: Path) -> Iterator[Transcript]:
    for path in sorted((root / "sweagent").glob("*.traj")):
        messages: list[dict[str, Any]] = []
        for m in _load(path)["history"]:
            out: dict[str, Any] = {"role": m["role"], "content": m.get("content") or ""}
            if m.get("tool_calls"):
                out["tool_calls"] = m["tool_calls"]
            if m["role"] == "tool":
                out["tool_call_id"] = (m.get("tool_call_ids") or [m.get("tool_call_id", "")])[0]
            messages.append(out)
        yield Transcript("sweagent", path.stem, {"messages": messages})


def _openhands_observation(e: Mapping[str, Any]) -> str:
    """An observation as OpenHands shows it to the model (content plus its status lines)."""
    text = str(e.get("content") or "")
    meta = (e.get("extras") or {}).get("metadata") or {}
    if e.get("observation") == "run" and meta:
        text += (
            f"\n[Current working directory: {meta.get('working_dir', '')}]"
            f"\n[Python interpreter: {meta.get('py_interpreter_path', '')}]"
            f"\n[Command finished with exit code {meta.get('exit_code', '')}]"
        )
    return text


def _recall_text(extras: Mapping[str, Any]) -> str:
    """The workspace-context recall: every string it carries, as the agent renders them."""
    parts: list[str] = []
    for key, value in extras.items():
        if key == "microagent_knowledge" and isinstance(value, list):
            parts.extend(str(k.get("content", "")) for k in value if isinstance(k, dict))
        elif isinstance(value, str) and key != "recall_type":
            parts.append(value)
        elif isinstance(value, dict):
            parts.extend(str(k) for k in value)
    return "<RUNTIME_INFORMATION>\n" + "\n".join(p for p in parts if p) + "\n</RUNTIME_INFORMATION>"


def openhands_runs(root: Path) -> Iterator[tuple[str, dict[str, Any], list[tuple[int, str, str]]]]:
    """Each run's final body, and per LLM call (messages so far, model, prompt tokens)."""
    for path in sorted((root / "openhands").glob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            run = orjson.loads(line)
            messages: list[dict[str, Any]] = []
            tools: list[Any] = []
            calls: list[tuple[int, str, str]] = []
            seen: set[str] = set()
            for e in run["history"]:
                action, obs = e.get("action"), e.get("observation")
                tcm = e.get("tool_call_metadata") or {}
                if action == "system":
                    messages.append({"role": "system", "content": e["args"]["content"]})
                    tools = list(e["args"].get("tools") or [])
                elif action == "message" and e.get("source") == "user":
                    messages.append({"role": "user", "content": e["args"]["content"]})
                elif obs == "recall":
                    messages.append(
                        {"role": "user", "content": _recall_text(e.get("extras") or {})}
                    )
                elif action is not None and tcm.get("model_response"):
                    resp = tcm["model_response"]
                    if resp["id"] in seen:
                        continue
                    seen.add(resp["id"])
                    usage = resp.get("usage") or {}
                    reported = prompt_tokens_from_usage(usage)
                    if reported is not None:
                        calls.append((len(messages), str(resp.get("model", "")), str(reported)))
                    msg = resp["choices"][0]["message"]
                    out: dict[str, Any] = {"role": "assistant", "content": msg.get("content") or ""}
                    if msg.get("tool_calls"):
                        out["tool_calls"] = [
                            {"id": c["id"], "type": "function", "function": c["function"]}
                            for c in msg["tool_calls"]
                        ]
                    messages.append(out)
                elif obs is not None and tcm.get("tool_call_id"):
                    messages.append(
                        {
                            "role": "tool",
                            "tool_call_id": tcm["tool_call_id"],
                            "content": _openhands_observation(e),
                        }
                    )
                elif obs == "error":
                    messages.append({"role": "user", "content": str(e.get("content") or "")})
            body: dict[str, Any] = {"messages": messages, "tools": tools}
            yield f"{path.stem}:{run['instance_id']}", body, calls


def openhands(root: Path) -> Iterator[Transcript]:
    for name, body, _ in openhands_runs(root):
        yield Transcript("openhands", name, body)


def _sdk_body(doc: Any, nonfn: bool) -> dict[str, Any]:
    if isinstance(doc, list):
        return {"messages": doc}
    body: dict[str, Any] = {"messages": doc["messages"]}
    if doc.get("tools") and not nonfn:
        # in non-function-calling mode the tools are described inside the messages
        body["tools"] = doc["tools"]
    return body


def sdk_logs(root: Path) -> Iterator[Transcript]:
    for path in sorted((root / "openhands_sdk_llmlogs").glob("*.json")):
        body = _sdk_body(_load(path), path.name.startswith("nonfncall"))
        yield Transcript("agent-sdk", path.stem, body)


def cassettes(root: Path) -> Iterator[tuple[str, str, str, dict[str, Any], Any]]:
    """(file, index, fmt, request body, response body) for every recorded call."""
    for path in sorted((root / "pydantic_ai_cassettes").glob("*.json")):
        for i, it in enumerate(_load(path)["interactions"]):
            uri = str(it["request"].get("uri", ""))
            body = it["request"].get("parsed_body")
            if not isinstance(body, dict):
                continue
            if "anthropic" in uri:
                fmt = "anthropic"
            elif "generativelanguage" in uri:
                fmt = "gemini"
            else:
                fmt = "openai-chat"
            yield path.stem, f"{i}", fmt, body, it["response"].get("parsed_body")


def _cassette_uris(root: Path) -> dict[tuple[str, str], str]:
    return {
        (path.stem, f"{i}"): str(it["request"].get("uri", ""))
        for path in sorted((root / "pydantic_ai_cassettes").glob("*.json"))
        for i, it in enumerate(_load(path)["interactions"])
    }


def cassette_transcripts(root: Path) -> Iterator[Transcript]:
    for stem, idx, _fmt, body, _ in cassettes(root):
        yield Transcript("cassettes", f"{stem}#{idx}", body)


def transcripts(root: Path) -> Iterator[Transcript]:
    """Every whole conversation in the corpus."""
    yield from taubench(root)
    yield from sweagent(root)
    yield from openhands(root)
    yield from sdk_logs(root)
    yield from cassette_transcripts(root)


# ---------------------------------------------------------------------------
# provider-reported usage


def usages(root: Path) -> Iterator[Usage]:
    """Every recorded request with the prompt tokens its provider reported."""
    for name, body, calls in openhands_runs(root):
        for n, model, reported in calls:
            req = {"messages": body["messages"][:n], "tools": body["tools"]}
            yield Usage("openhands", f"{name}@{n}", "openai-chat", model, req, int(reported), name)
    for path in sorted((root / "openhands_sdk_llmlogs").glob("*.json")):
        doc = _load(path)
        if not isinstance(doc, dict) or not isinstance(doc.get("response"), dict):
            continue
        got = prompt_tokens_from_usage(doc["response"].get("usage") or {})
        if got is None:
            continue
        body = _sdk_body(doc, path.name.startswith("nonfncall"))
        model = str(doc["response"].get("model", ""))
        yield Usage("agent-sdk", path.stem, "openai-chat", model, body, got, path.stem)
    uris = _cassette_uris(root)
    for stem, idx, fmt, body, resp in cassettes(root):
        if not isinstance(resp, dict):
            continue
        usage = resp.get("usage") or resp.get("usageMetadata") or resp
        got = prompt_tokens_from_usage(usage)
        if got is None:
            continue
        model = str(body.get("model") or "")
        if not model and fmt == "gemini":
            model = uris.get((stem, idx), "").split("/models/")[-1].split(":")[0]
        yield Usage("cassettes", f"{stem}#{idx}", fmt, model, body, got, stem)


# ---------------------------------------------------------------------------
# the fit part and the held-out part


def family(model: str) -> str:
    """The model family a call is split and reported by: the name after any
    ``provider/`` part, without a date (``litellm_proxy/claude-sonnet-4-20250514`` →
    ``claude-sonnet-4``)."""
    name = model.rsplit("/", 1)[-1]
    parts = name.split("-")
    while parts and parts[-1].isdigit() and len(parts[-1]) >= 4:
        parts.pop()
    if len(parts) > 3 and parts[-3:] and all(p.isdigit() for p in parts[-3:]):
        parts = parts[:-3]
    return "-".join(parts) or "?"


def _rank(run: str) -> str:
    return hashlib.sha256(run.encode("utf-8")).hexdigest()


def held_out_runs(usages: Iterable[Usage]) -> frozenset[tuple[str, str]]:
    """The ``(family, run)`` pairs of the runs held out whole (the module docstring's rule):
    per family of two runs or more, every second run in order of the SHA-256 of its name."""
    runs: dict[str, set[str]] = {}
    for u in usages:
        runs.setdefault(family(u.model), set()).add(u.run)
    return frozenset(
        (fam, run)
        for fam, names in runs.items()
        if len(names) > 1
        for run in sorted(names, key=_rank)[1::2]
    )


def held_out(usages: Iterable[Usage]) -> frozenset[tuple[str, str, str]]:
    """The ``(family, run, name)`` of every held-out call: the calls of the runs held out
    whole (:func:`held_out_runs`) and, in a family of one run, every second call of it in
    order of the SHA-256 of the call's name."""
    every = list(usages)
    runs = held_out_runs(every)
    single: dict[str, set[str]] = {}
    for u in every:
        single.setdefault(family(u.model), set()).add(u.run)
    calls: dict[str, list[Usage]] = {}
    for u in every:
        if len(single[family(u.model)]) == 1:
            calls.setdefault(family(u.model), []).append(u)
    out = {(family(u.model), u.run, u.name) for u in every if (family(u.model), u.run) in runs}
    for fam, group in calls.items():
        names = sorted({u.name for u in group}, key=_rank)[1::2]
        out |= {(fam, u.run, u.name) for u in group if u.name in names}
    return frozenset(out)


def is_held_out(u: Usage, held: frozenset[tuple[str, str, str]]) -> bool:
    return (family(u.model), u.run, u.name) in held


def split(usages: Iterable[Usage]) -> tuple[list[Usage], list[Usage]]:
    """The calls of the fit part and of the held-out part (:func:`held_out`)."""
    every = list(usages)
    held = held_out(every)
    return (
        [u for u in every if not is_held_out(u, held)],
        [u for u in every if is_held_out(u, held)],
    )
