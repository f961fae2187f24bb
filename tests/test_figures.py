"""Every figure README.md and docs/ quote from running ctxwin is what its generator writes
today (tests/figures.py): each marked region and each generated file is written again and
compared exactly. ``make docs`` rewrites them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import figures
from tests.figures import FILES, GENERATORS, REGION, ROOT, Generator, available, pages, regions

pytestmark = pytest.mark.figures


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _regions() -> list[tuple[Path, str, str]]:
    return [
        (page, name, body) for page in pages() for name, body in regions(page.read_text("utf-8"))
    ]


def _skip_unless_available(gen: Generator) -> None:
    if not available(gen):
        pytest.skip("../shared/corpus is absent")


@pytest.mark.parametrize(
    ("page", "name", "body"),
    _regions(),
    ids=[f"{_page_id(p)}:{n}" for p, n, _ in _regions()],
)
def test_the_region_is_what_its_generator_writes(page: Path, name: str, body: str) -> None:
    try:
        gen = figures.generator(name)
    except KeyError:
        pytest.fail(f"{_page_id(page)}: no generator for figures:{name}")
    _skip_unless_available(gen)
    assert body == figures.render(name, body), (
        f"{_page_id(page)}: figures:{name} differs from what it writes: run make docs"
    )


@pytest.mark.parametrize("path", sorted(FILES))
def test_the_file_is_what_its_generator_writes(path: str) -> None:
    gen = FILES[path]
    _skip_unless_available(gen)
    assert (ROOT / path).read_text("utf-8") == gen.make(), f"{path}: run make docs"


@pytest.mark.parametrize("page", sorted(figures.NOT_FIGURES))
def test_every_number_outside_a_region_is_marked_as_no_figure(page: str) -> None:
    """On these pages a number in the prose is a region's, or :data:`NOT_FIGURES` says why it
    is not a figure (a name, a version, an example's input)."""
    assert figures.unmarked(page) == []


def test_a_number_outside_a_region_is_caught() -> None:
    assert figures.FIGURE.findall(
        figures.prose("took 1.5 s <!-- figures:x -->2.5<!-- /figures -->")
    ) == ["1.5"]
    assert figures.FIGURE.findall(figures.prose("```\n12.5\n```\n100 calls")) == ["100"]


def test_every_generator_has_a_region_and_every_region_closes() -> None:
    assert figures.unused() == []
    for page in pages():
        text = page.read_text("utf-8")
        opened = text.count("<!-- figures:")
        assert opened == len(REGION.findall(text)) == text.count("<!-- /figures -->"), page


def test_a_region_is_rewritten_and_a_stale_one_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    gen = Generator("probe", lambda: "| a | 2 |", corpus=False)
    monkeypatch.setitem(GENERATORS, "probe", gen)
    stale = (
        "x <!-- figures:probe -->\n| a | 1 |\n<!-- /figures --> y "
        "<!-- figures:probe -->1<!-- /figures -->"
    )
    fresh = figures.fill(stale)
    assert fresh == (
        "x <!-- figures:probe -->\n| a | 2 |\n<!-- /figures --> y "
        "<!-- figures:probe -->| a | 2 |<!-- /figures -->"
    )
    assert figures.fill(fresh) == fresh
    (_, body), _ = regions(stale)
    assert body != figures.render("probe", body)  # what the region test compares
    with pytest.raises(KeyError, match="no generator for the region figures:nope"):
        figures.fill("<!-- figures:nope -->1<!-- /figures -->")


def test_a_code_region_holds_the_constant_it_names() -> None:
    from ctxwin.tokens import framing, seeds

    text = (
        "<!-- figures:code.ctxwin.tokens.framing.OPENAI_TOOLS_PREAMBLE -->0<!-- /figures --> "
        "<!-- figures:code.ctxwin.tokens.seeds.BOUND_MODEL_CALIBRATION.claude -->0<!-- /figures -->"
    )
    claude = dict(seeds.BOUND_MODEL_CALIBRATION)["claude"]
    assert figures.fill(text) == (
        f"<!-- figures:code.ctxwin.tokens.framing.OPENAI_TOOLS_PREAMBLE -->"
        f"{framing.OPENAI_TOOLS_PREAMBLE}<!-- /figures --> "
        f"<!-- figures:code.ctxwin.tokens.seeds.BOUND_MODEL_CALIBRATION.claude -->{claude!r}"
        f"<!-- /figures -->"
    )
    assert figures.constant("ctxwin.tokens.content.SCALE") == "10,000"
    with pytest.raises(LookupError):
        figures.constant("ctxwin.tokens.content.NO_SUCH_NAME")
    with pytest.raises(TypeError, match="not a number"):
        figures.constant("ctxwin.tokens.registry.DEFAULT_ESTIMATOR")


def test_a_corpus_figure_is_left_alone_without_the_corpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(GENERATORS, "probe", Generator("probe", lambda: "new", corpus=True))
    monkeypatch.setattr(figures, "corpus_dir", lambda: None)
    text = "<!-- figures:probe -->old<!-- /figures -->"
    assert figures.fill(text) == text
