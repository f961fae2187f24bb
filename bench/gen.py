"""Seeded generator of synthetic agent-run transcripts (OpenAI Chat Completions bodies).

Usage::

    python bench/gen.py --messages 100000 --seed 1 OUT.json

The body is ``{"model": ..., "messages": [...], "tools": [...]}``: a system message,
a first user message, then turns of one assistant message with 1-3 parallel
``tool_calls`` (sometimes with text content) followed by one ``tool`` message per
call, with an occasional user message between turns. The transcript has exactly
``--messages`` messages and never ends inside a turn.

Tool outputs are log-normal in size (tens of bytes to ~10 KB, mean ~1 KB) and come in
several content classes: prose, source code, JSON with numbers, logs with digits, hex
hashes, base64, and non-ASCII text (Chinese, Cyrillic, emoji). The average serialized
message is ~700 bytes, so 1M messages make a ~700 MB file.

The same ``--messages``/``--seed`` always give byte-identical output (for a given
``GEN_VERSION``). Messages are serialized one at a time and streamed to the file, so
memory stays small whatever the size.
"""

from __future__ import annotations

import argparse
import base64
import bisect
import math
import random
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

GEN_VERSION = 1
"""Bump when the output for a given seed changes (the runner's cache key includes it)."""

MODEL = "agent-bench-1"
"""Deliberately not a real model: ctxwin then knows no output cap, so its reserve is
``max(1000, ceil(0.02 * C))`` and the budget formula in bench/README.md applies."""

# Size model for tool outputs (bytes of content before JSON escaping).
SIZE_MU = math.log(350.0)
SIZE_SIGMA = 1.25
SIZE_MIN = 24
SIZE_MAX = 10_000
USER_BETWEEN_TURNS = 0.06
ASSISTANT_TEXT = 0.35
CALLS_WEIGHTS = (0.55, 0.30, 0.15)  # 1, 2 or 3 parallel calls

_WORDS_TEXT = (
    "the a of to and in is that for it with as on be by this are from or at an which was "
    "function value return error file line test module request response token context "
    "window budget model message call result output input parser buffer cache index "
    "config option default path directory branch commit change update check fix build "
    "run failed passed missing expected actual should would could because however while "
    "when before after first last next previous current remaining other every each "
    "handler server client session user agent tool schema field type string number "
    "object array list dict key item entry record status code header body payload "
    "timeout retry limit size length count total average median memory disk network"
)
WORDS = _WORDS_TEXT.split()

_CYRILLIC_TEXT = (
    "привет мир функция значение ошибка файл строка тест модуль запрос ответ контекст "
    "окно бюджет модель сообщение вызов результат вывод ввод кэш индекс настройка путь "
    "каталог ветка изменение проверка сборка запуск ожидается фактически память диск"
)
CYRILLIC = _CYRILLIC_TEXT.split()

_CHINESE_TEXT = (
    "你好 世界 函数 数值 错误 文件 测试 模块 请求 响应 上下文 窗口 预算 模型 消息 调用 "
    "结果 输出 输入 解析 缓存 索引 配置 路径 目录 分支 提交 更改 更新 检查 修复 构建 "
    "运行 失败 通过 缺少 预期 实际 内存 磁盘 网络 用户 工具 字段 类型 字符串 数字 对象"
)
CHINESE = _CHINESE_TEXT.split()

_EMOJI_TEXT = "✅ ❌ ⚠️ 🚀 🔥 🐛 📦 🧪 💡 🔧 📝 ⏱️ 👍 🎉 🤖 📈"
EMOJI = _EMOJI_TEXT.split()

_IDENT_TEXT = (
    "user order item cache session token parser config result payload buffer index "
    "request response handler client server record entry batch queue worker task"
)
IDENT = _IDENT_TEXT.split()

TOOL_SPECS: list[dict[str, Any]] = [
    {
        "name": "read_file",
        "description": "Read a text file from the workspace, optionally a line range.",
        "properties": {
            "path": {"type": "string", "description": "Path relative to the repo root."},
            "start_line": {"type": "integer"},
            "end_line": {"type": "integer"},
        },
        "required": ["path"],
    },
    {
        "name": "run_command",
        "description": "Run a shell command in the sandbox and return stdout and stderr.",
        "properties": {
            "command": {"type": "string"},
            "timeout": {"type": "integer", "description": "Seconds before the command is killed."},
        },
        "required": ["command"],
    },
    {
        "name": "search_code",
        "description": "Search the repository with a regular expression.",
        "properties": {
            "pattern": {"type": "string"},
            "path": {"type": "string"},
            "max_results": {"type": "integer"},
        },
        "required": ["pattern"],
    },
    {
        "name": "write_file",
        "description": "Create or overwrite a file with the given content.",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
    },
    {
        "name": "http_get",
        "description": "Fetch a URL and return the response body.",
        "properties": {"url": {"type": "string"}, "headers": {"type": "object"}},
        "required": ["url"],
    },
    {
        "name": "sql_query",
        "description": "Run a read-only SQL query against the analytics database.",
        "properties": {"sql": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["sql"],
    },
    {
        "name": "git_log",
        "description": "Show recent commits for a path.",
        "properties": {"path": {"type": "string"}, "n": {"type": "integer"}},
        "required": [],
    },
    {
        "name": "translate",
        "description": "Translate a UI string file to the given locale.",
        "properties": {"path": {"type": "string"}, "locale": {"type": "string"}},
        "required": ["path", "locale"],
    },
]

# Which content classes each tool returns, with weights.
TOOL_OUTPUT_CLASSES: dict[str, tuple[tuple[str, int], ...]] = {
    "read_file": (("code", 6), ("prose", 2), ("json", 1), ("intl", 1)),
    "run_command": (("logs", 7), ("code", 1), ("prose", 1)),
    "search_code": (("code", 4), ("logs", 1)),
    "write_file": (("short", 1),),
    "http_get": (("json", 4), ("base64", 2), ("prose", 2), ("intl", 1)),
    "sql_query": (("json", 1),),
    "git_log": (("hex", 1),),
    "translate": (("intl", 1),),
}
TOOL_WEIGHTS: dict[str, int] = {
    "read_file": 30,
    "run_command": 25,
    "search_code": 15,
    "write_file": 8,
    "http_get": 8,
    "sql_query": 6,
    "git_log": 4,
    "translate": 4,
}

ASSISTANT_LINES = (
    "Let me look at the failing test first.",
    "I'll check the configuration and the recent commits in parallel.",
    "The error suggests the cache key is computed before the config is loaded.",
    "Running the test suite again to confirm the fix.",
    "I need to see how the parser handles empty input.",
    "Searching for other callers of this function.",
    "That output is truncated; reading the rest of the file.",
    "Now I'll update the handler and re-run the affected tests.",
)
USER_LINES = (
    "Also make sure the CLI still works on Windows paths.",
    "Please don't change the public API; keep the old function as a wrapper.",
    "Can you add a regression test for this case?",
    "The CI is still red on the integration job, can you look?",
    "Ignore the flaky network test, it's a known issue.",
    "Please also update the changelog. Спасибо! 谢谢 👍",
)


class LinePool:
    """A long text made of lines; ``take`` returns a line-aligned slice of about ``size``."""

    def __init__(self, lines: list[str]) -> None:
        self.text = "".join(lines)
        offsets = [0]
        for line in lines:
            offsets.append(offsets[-1] + len(line))
        self.offsets = offsets

    def take(self, rng: random.Random, size: int) -> str:
        offs = self.offsets
        total = offs[-1]
        size = min(size, total // 2)
        start_line = rng.randrange(0, bisect.bisect_left(offs, total - size))
        start = offs[start_line]
        end_line = bisect.bisect_left(offs, start + size)
        end = offs[end_line] if end_line < len(offs) else total
        if end - start > size + 200:  # one very long line: cut it
            end = start + size
        return self.text[start:end]


def _sentence(rng: random.Random, words: list[str] | tuple[str, ...], lo: int, hi: int) -> str:
    n = rng.randint(lo, hi)
    s = " ".join(rng.choices(words, k=n))
    return s[0].upper() + s[1:] + rng.choice(".....?!")


def _prose_lines(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        para = " ".join(_sentence(rng, WORDS, 5, 18) for _ in range(rng.randint(1, 4)))
        out.append(para + "\n")
    return out


def _intl_lines(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        kind = rng.random()
        if kind < 0.4:
            text = "".join(rng.choices(CHINESE, k=rng.randint(6, 30))) + "。"
        elif kind < 0.8:
            text = _sentence(rng, CYRILLIC, 5, 16)
        else:
            text = _sentence(rng, WORDS, 4, 10) + " " + " ".join(rng.choices(EMOJI, k=3))
        key = f"{rng.choice(IDENT)}.{rng.choice(IDENT)}_{rng.randint(1, 99)}"
        out.append(f'"{key}": "{text}"\n' if rng.random() < 0.6 else text + "\n")
    return out


def _code_lines(rng: random.Random, n: int) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        name = f"{rng.choice(IDENT)}_{rng.choice(IDENT)}"
        arg = rng.choice(IDENT)
        cls = rng.choice(IDENT).capitalize() + rng.choice(IDENT).capitalize()
        block = [
            f"def {name}({arg}: {cls}, limit: int = {rng.randint(1, 4096)}) -> list[str]:\n",
            f'    """{_sentence(rng, WORDS, 4, 12)}"""\n',
            "    result: list[str] = []\n",
            f"    for i, entry in enumerate({arg}.items()):\n",
            f"        if i >= limit or entry.{rng.choice(IDENT)} is None:\n",
            "            break\n",
            f'        result.append(f"{{entry.key}}={{entry.value!r}}")  # {rng.choice(WORDS)}\n',
            f"    return sorted(result, key=lambda s: (len(s), s))[:{rng.randint(2, 64)}]\n",
            "\n",
        ]
        if rng.random() < 0.3:
            block.insert(0, f"class {cls}({rng.choice(['Base', 'Protocol', 'Exception'])}):\n")
            block.insert(1, f"    {arg}: dict[str, int] = {{}}\n\n")
        out.extend(block)
    return out


def _log_lines(rng: random.Random, n: int) -> list[str]:
    out = []
    levels = ("INFO", "INFO", "INFO", "DEBUG", "WARNING", "ERROR")
    for _ in range(n):
        ts = (
            f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T"
            f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}."
            f"{rng.randint(0, 999999):06d}Z"
        )
        r = rng.random()
        if r < 0.15:
            line = (
                f"tests/test_{rng.choice(IDENT)}.py::test_{rng.choice(IDENT)}_"
                f"{rng.choice(IDENT)} {rng.choice(['PASSED', 'PASSED', 'FAILED'])} "
                f"[{rng.randint(0, 100):3d}%]"
            )
        else:
            line = (
                f"{ts} {rng.choice(levels):7s} [{rng.choice(IDENT)}.{rng.choice(IDENT)}] "
                f"pid={rng.randint(100, 65535)} req={rng.getrandbits(32):08x} "
                f"{_sentence(rng, WORDS, 3, 9)} elapsed={rng.uniform(0, 5000):.3f}ms "
                f"bytes={rng.randint(0, 10**7)}"
            )
        out.append(line + "\n")
    return out


def _hex_lines(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        if rng.random() < 0.5:
            out.append(
                f"commit {rng.getrandbits(160):040x}\nAuthor: {rng.choice(IDENT)} "
                f"<{rng.choice(IDENT)}@example.com>\n\n    {_sentence(rng, WORDS, 3, 10)}\n\n"
            )
        else:
            out.append(f"{rng.getrandbits(256):064x}  src/{rng.choice(IDENT)}.py\n")
    return out


def _b64_lines(rng: random.Random, n: int) -> list[str]:
    raw = rng.randbytes(57 * n)
    return [
        base64.b64encode(raw[i : i + 57]).decode("ascii") + "\n" for i in range(0, len(raw), 57)
    ]


def _json_records(rng: random.Random, n: int) -> list[str]:
    out = []
    for i in range(n):
        rec = {
            "id": rng.randint(1, 10**9),
            "name": f"{rng.choice(IDENT)}-{rng.randint(0, 9999)}",
            "score": round(rng.gauss(50, 20), 4),
            "ratio": rng.random(),
            "count": rng.randint(0, 100000),
            "active": rng.random() < 0.7,
            "tags": rng.sample(IDENT, k=rng.randint(0, 3)),
            "updated": 1_700_000_000 + rng.randint(0, 10**8),
            "seq": i,
        }
        if rng.random() < 0.1:
            rec["note"] = "".join(rng.choices(CHINESE, k=4))
        out.append(orjson.dumps(rec).decode("utf-8"))
    return out


class Generator:
    """Builds messages one at a time from seeded pools of text."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        rng = random.Random(seed ^ 0x5EED)
        self.pools: dict[str, LinePool] = {
            "prose": LinePool(_prose_lines(rng, 800)),
            "intl": LinePool(_intl_lines(rng, 1500)),
            "code": LinePool(_code_lines(rng, 4000)),
            "logs": LinePool(_log_lines(rng, 1500)),
            "hex": LinePool(_hex_lines(rng, 1500)),
            "base64": LinePool(_b64_lines(rng, 1500)),
        }
        self.records = _json_records(rng, 2000)
        self.record_offsets = [0]
        for rec in self.records:
            self.record_offsets.append(self.record_offsets[-1] + len(rec) + 1)
        self.tool_names = list(TOOL_WEIGHTS)
        self.tool_cum = _cum([TOOL_WEIGHTS[t] for t in self.tool_names])
        self.class_choice: dict[str, tuple[list[str], list[int]]] = {
            name: ([c for c, _ in classes], _cum([w for _, w in classes]))
            for name, classes in TOOL_OUTPUT_CLASSES.items()
        }
        self.args_builders: dict[str, Callable[[], dict[str, Any]]] = {
            "read_file": self._args_read_file,
            "run_command": self._args_run_command,
            "search_code": self._args_search,
            "write_file": self._args_write_file,
            "http_get": self._args_http_get,
            "sql_query": self._args_sql,
            "git_log": self._args_git_log,
            "translate": self._args_translate,
        }

    # -- ids and small pieces ---------------------------------------------------------
    def call_id(self) -> str:
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
        return "call_" + "".join(self.rng.choices(alphabet, k=24))

    def path(self) -> str:
        rng = self.rng
        ext = rng.choice((".py", ".py", ".py", ".md", ".json", ".ts", ".yaml"))
        return f"src/{rng.choice(IDENT)}/{rng.choice(IDENT)}_{rng.choice(IDENT)}{ext}"

    def output_size(self) -> int:
        size = int(self.rng.lognormvariate(SIZE_MU, SIZE_SIGMA))
        return max(SIZE_MIN, min(SIZE_MAX, size))

    # -- tool-call arguments ----------------------------------------------------------
    def _args_read_file(self) -> dict[str, Any]:
        start = self.rng.randint(1, 2000)
        if self.rng.random() < 0.5:
            return {"path": self.path()}
        return {
            "path": self.path(),
            "start_line": start,
            "end_line": start + self.rng.randint(20, 400),
        }

    def _args_run_command(self) -> dict[str, Any]:
        rng = self.rng
        cmd = rng.choice(
            (
                f"pytest -q tests/test_{rng.choice(IDENT)}.py -k {rng.choice(IDENT)}",
                f"python -m {rng.choice(IDENT)} --check {self.path()}",
                f"grep -rn '{rng.choice(IDENT)}' src/ | head -n {rng.randint(5, 50)}",
                "git status --short && git diff --stat",
                f"ls -la src/{rng.choice(IDENT)}",
            )
        )
        return {"command": cmd, "timeout": rng.choice((30, 60, 120, 600))}

    def _args_search(self) -> dict[str, Any]:
        rng = self.rng
        return {
            "pattern": rf"def {rng.choice(IDENT)}_\w+\(",
            "path": f"src/{rng.choice(IDENT)}",
            "max_results": rng.randint(10, 100),
        }

    def _args_write_file(self) -> dict[str, Any]:
        size = min(self.output_size(), 4000)
        return {"path": self.path(), "content": self.pools["code"].take(self.rng, size)}

    def _args_http_get(self) -> dict[str, Any]:
        rng = self.rng
        return {
            "url": f"https://api.example.com/v{rng.randint(1, 3)}/{rng.choice(IDENT)}s/"
            f"{rng.randint(1, 10**6)}?page={rng.randint(1, 50)}",
            "headers": {"Accept": "application/json"},
        }

    def _args_sql(self) -> dict[str, Any]:
        rng = self.rng
        return {
            "sql": f"SELECT id, name, score, count FROM {rng.choice(IDENT)}s "
            f"WHERE updated > {1_700_000_000 + rng.randint(0, 10**8)} "
            f"ORDER BY score DESC",
            "limit": rng.choice((10, 50, 100, 500)),
        }

    def _args_git_log(self) -> dict[str, Any]:
        return {"path": self.path(), "n": self.rng.randint(1, 40)}

    def _args_translate(self) -> dict[str, Any]:
        return {"path": f"locales/{self.rng.choice(IDENT)}.json", "locale": "zh-CN"}

    # -- tool outputs -----------------------------------------------------------------
    def tool_output(self, tool: str) -> str:
        rng = self.rng
        classes, cum = self.class_choice[tool]
        cls = classes[bisect.bisect_right(cum, rng.random() * cum[-1])]
        size = self.output_size()
        if cls == "short":
            return f"Wrote {rng.randint(10, 40000)} bytes to {self.path()}."
        if cls == "json":
            offs = self.record_offsets
            start = rng.randrange(0, len(self.records) // 2)
            end = bisect.bisect_left(offs, offs[start] + size, lo=start + 1)
            end = min(max(end, start + 1), len(self.records))
            body = ",".join(self.records[start:end])
            return f'{{"total":{rng.randint(end - start, 10**6)},"rows":[{body}]}}'
        if cls == "intl":  # mostly 2-4 UTF-8 bytes per character
            size //= 2
        text = self.pools[cls].take(rng, size)
        if cls == "logs" and rng.random() < 0.5:
            code = rng.choice((0, 0, 0, 1, 2, 137))
            return f"$ exit code {code}, {rng.uniform(0.01, 90):.2f}s\n{text}"
        return text

    # -- messages ---------------------------------------------------------------------
    def system_message(self) -> dict[str, Any]:
        rng = random.Random(1234)
        text = (
            "You are a coding agent working in a sandboxed repository. Use the tools to "
            "inspect files, run commands and make changes. Call tools in parallel when the "
            "calls are independent. Keep answers short.\n\n"
            + " ".join(_sentence(rng, WORDS, 8, 20) for _ in range(12))
        )
        return {"role": "system", "content": text}

    def user_message(self, first: bool = False) -> dict[str, Any]:
        if first:
            text = (
                "The nightly build fails in the cache module with a KeyError after the config "
                "refactor. Find the cause, fix it, and add a regression test. Logs are in "
                "ci/nightly.log. " + _sentence(self.rng, WORDS, 10, 30)
            )
        else:
            text = self.rng.choice(USER_LINES)
        return {"role": "user", "content": text}

    def turn(self, max_calls: int) -> list[dict[str, Any]]:
        rng = self.rng
        k = 1 + bisect.bisect_right(_CALLS_CUM, rng.random())
        k = min(k, max_calls)
        calls = []
        results = []
        for _ in range(k):
            tool = self.tool_names[
                bisect.bisect_right(self.tool_cum, rng.random() * self.tool_cum[-1])
            ]
            cid = self.call_id()
            args = orjson.dumps(self.args_builders[tool]()).decode("utf-8")
            calls.append(
                {"id": cid, "type": "function", "function": {"name": tool, "arguments": args}}
            )
            results.append({"role": "tool", "tool_call_id": cid, "content": self.tool_output(tool)})
        content = rng.choice(ASSISTANT_LINES) if rng.random() < ASSISTANT_TEXT else None
        return [{"role": "assistant", "content": content, "tool_calls": calls}, *results]

    def messages(self, n: int) -> Iterator[dict[str, Any]]:
        """Exactly ``n`` messages (``n >= 1``), never ending inside a turn."""
        yield self.system_message()
        emitted = 1
        if emitted < n:
            yield self.user_message(first=True)
            emitted += 1
        while emitted < n:
            remaining = n - emitted
            if remaining == 1 or (emitted > 2 and self.rng.random() < USER_BETWEEN_TURNS):
                yield self.user_message()
                emitted += 1
                continue
            for msg in self.turn(max_calls=remaining - 1):
                yield msg
                emitted += 1


def _cum(weights: list[int] | tuple[float, ...]) -> list[int]:
    out: list[int] = []
    acc = 0
    for w in weights:
        acc += int(w * 1000) if isinstance(w, float) else w
        out.append(acc)
    return out


_CALLS_CUM = [w / 1000 for w in _cum(CALLS_WEIGHTS)][:-1]


def tools_block() -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": spec["name"],
                "description": spec["description"],
                "parameters": {
                    "type": "object",
                    "properties": spec["properties"],
                    "required": spec["required"],
                },
            },
        }
        for spec in TOOL_SPECS
    ]


def write(path: Path, n: int, seed: int) -> int:
    """Write the body for ``n`` messages to ``path``; returns the byte size."""
    gen = Generator(seed)
    dumps = orjson.dumps
    size = 0
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb", buffering=1 << 22) as f:
        head = b'{"model":' + dumps(MODEL) + b',"messages":[\n'
        f.write(head)
        size += len(head)
        first = True
        for msg in gen.messages(n):
            chunk = dumps(msg) if first else b",\n" + dumps(msg)
            first = False
            f.write(chunk)
            size += len(chunk)
        tail = b'\n],"tools":' + dumps(tools_block()) + b"}\n"
        f.write(tail)
        size += len(tail)
    tmp.replace(path)
    return size


def parse_count(text: str) -> int:
    """``"10k"`` -> 10000, ``"1M"`` -> 1000000, ``"250"`` -> 250."""
    t = text.strip().lower().replace("_", "")
    mult = {"k": 1_000, "m": 1_000_000}.get(t[-1:], 1)
    if mult != 1:
        t = t[:-1]
    value = int(float(t) * mult)
    if value < 1:
        raise ValueError(f"message count must be >= 1, got {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", required=True, help="message count, e.g. 1000, 10k, 1M")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("out", type=Path)
    args = ap.parse_args(argv)
    n = parse_count(args.messages)
    size = write(args.out, n, args.seed)
    print(f"{args.out}: {n} messages, {size} bytes ({size / n:.0f} B/message)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
