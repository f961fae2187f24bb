"""ctxwin: keep LLM agent transcripts inside the model's context window.

The library core never imports typer or rich and never touches stdin/stdout::

    import ctxwin

    body, plan = ctxwin.prune(request_body, model="gpt-4o")
    plan.result.dropped_turns, plan.result.estimated_tokens_after

    settings = ctxwin.Settings(context_length=32_000, max_tokens=2_000)
    body, plan = ctxwin.prune(request_body, settings)

Lower-level steps: :func:`parse` (bytes → JSON), :func:`load` (JSON →
:class:`Transcript`), :func:`plan` (budget + fit), :meth:`Plan.output`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

from ctxwin.codec import parse
from ctxwin.core import Plan, Transcript, load, plan, prune
from ctxwin.errors import (
    ContextTruncated,
    CtxwinError,
    ExitCode,
    InputError,
    NoBudget,
    PairingError,
    SpecError,
)
from ctxwin.fitting.budget import Budget, ModelSpec, compute_budget, resolve_spec
from ctxwin.fitting.pruning import FitResult, fit, pairing_problems, segment
from ctxwin.fitting.strategy import Applied, Strategy, parse_steps
from ctxwin.settings import Settings
from ctxwin.tokens.base import SEED_CALIBRATION, Estimator, Kind, calibrated
from ctxwin.tokens.models import lookup_model
from ctxwin.tokens.registry import default_calibration
from ctxwin.view import Item, Problem, View

if TYPE_CHECKING:
    from ctxwin.breakdown import explain
    from ctxwin.fitting.repairing import Repaired, repair
    from ctxwin.manager import ContextWindowManager, ManagedFit
    from ctxwin.runs.checking import Checked, check_files
    from ctxwin.tokens.bpe import TokenizerEstimator
    from ctxwin.tokens.content import ContentEstimator
    from ctxwin.tokens.seed import SeedEstimator


def __getattr__(name: str) -> Any:
    # The run manager is imported on first use: the command line never needs it.
    if name in ("ContextWindowManager", "ManagedFit"):
        from ctxwin import manager

        return getattr(manager, name)
    if name in ("Checked", "check_files"):  # recorded runs, locally or on a Dask cluster
        from ctxwin.runs import checking

        return getattr(checking, name)
    if name in ("repair", "Repaired"):  # ctxwin.fitting.repairing: the module is not named repair
        from ctxwin.fitting import repairing

        return getattr(repairing, name)
    if name in ("ContentEstimator", "SeedEstimator", "TokenizerEstimator"):
        from ctxwin import tokens  # each estimator's module loads when first named

        return getattr(tokens, name)
    if name == "explain":
        from ctxwin.breakdown import explain

        return explain
    raise AttributeError(f"module 'ctxwin' has no attribute {name!r}")


__all__ = [
    "SEED_CALIBRATION",
    "Applied",
    "Budget",
    "Checked",
    "ContentEstimator",
    "ContextTruncated",
    "ContextWindowManager",
    "CtxwinError",
    "Estimator",
    "ExitCode",
    "FitResult",
    "InputError",
    "Item",
    "Kind",
    "ManagedFit",
    "ModelSpec",
    "NoBudget",
    "PairingError",
    "Plan",
    "Problem",
    "Repaired",
    "SeedEstimator",
    "Settings",
    "SpecError",
    "Strategy",
    "TokenizerEstimator",
    "Transcript",
    "View",
    "__version__",
    "calibrated",
    "check_files",
    "compute_budget",
    "default_calibration",
    "explain",
    "fit",
    "load",
    "lookup_model",
    "pairing_problems",
    "parse",
    "parse_steps",
    "plan",
    "prune",
    "repair",
    "resolve_spec",
    "segment",
]
