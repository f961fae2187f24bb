"""ctxwin: keep LLM agent transcripts inside the model's context window.

The library core never imports typer or rich and never touches stdin/stdout::

    import ctxwin

    body, plan = ctxwin.prune(request_body, model="gpt-4o")
    plan.result.dropped_turns, plan.result.estimated_tokens_after

Lower-level steps: :func:`parse` (bytes → JSON), :func:`load` (JSON →
:class:`Transcript`), :func:`plan` (budget + fit), :meth:`Plan.output`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from ctxwin.budget import Budget, ModelSpec, compute_budget, lookup_model, resolve_spec
    from ctxwin.core import Plan, Transcript, load, parse, plan, prune
    from ctxwin.errors import (
        ContextTruncated,
        CtxwinError,
        ExitCode,
        InputError,
        PairingError,
        SpecError,
    )
    from ctxwin.estimate import (
        SEED_CALIBRATION,
        ContentEstimator,
        Estimator,
        Kind,
        SeedEstimator,
        TokenizerEstimator,
        calibrated,
        default_calibration,
    )
    from ctxwin.manager import ContextWindowManager, ManagedFit
    from ctxwin.prune import FitResult, fit, pairing_problems, segment
    from ctxwin.view import Item, Problem, View

_EXPORTS: dict[str, str] = {
    "Budget": "ctxwin.budget",
    "calibrated": "ctxwin.estimate",
    "compute_budget": "ctxwin.budget",
    "ContentEstimator": "ctxwin.estimate",
    "ContextTruncated": "ctxwin.errors",
    "ContextWindowManager": "ctxwin.manager",
    "CtxwinError": "ctxwin.errors",
    "default_calibration": "ctxwin.estimate",
    "Estimator": "ctxwin.estimate",
    "ExitCode": "ctxwin.errors",
    "fit": "ctxwin.prune",
    "FitResult": "ctxwin.prune",
    "InputError": "ctxwin.errors",
    "Item": "ctxwin.view",
    "Kind": "ctxwin.estimate",
    "load": "ctxwin.core",
    "lookup_model": "ctxwin.budget",
    "ManagedFit": "ctxwin.manager",
    "ModelSpec": "ctxwin.budget",
    "pairing_problems": "ctxwin.prune",
    "PairingError": "ctxwin.errors",
    "parse": "ctxwin.core",
    "Plan": "ctxwin.core",
    "plan": "ctxwin.core",
    "Problem": "ctxwin.view",
    "prune": "ctxwin.core",
    "resolve_spec": "ctxwin.budget",
    "SEED_CALIBRATION": "ctxwin.estimate",
    "SeedEstimator": "ctxwin.estimate",
    "segment": "ctxwin.prune",
    "SpecError": "ctxwin.errors",
    "TokenizerEstimator": "ctxwin.estimate",
    "Transcript": "ctxwin.core",
    "View": "ctxwin.view",
}
"""Public name → the module defining it; imported on first use, so the CLI starts fast."""


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ctxwin' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "SEED_CALIBRATION",
    "Budget",
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
    "PairingError",
    "Plan",
    "Problem",
    "SeedEstimator",
    "SpecError",
    "TokenizerEstimator",
    "Transcript",
    "View",
    "__version__",
    "calibrated",
    "compute_budget",
    "default_calibration",
    "fit",
    "load",
    "lookup_model",
    "pairing_problems",
    "parse",
    "plan",
    "prune",
    "resolve_spec",
    "segment",
]
