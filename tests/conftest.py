"""Shared test set-up."""

from __future__ import annotations

import os

# Nothing in the tests reaches the internet: LiteLLM loads its bundled model cost map
# instead of fetching one at import, and the OpenAI Agents SDK exports no traces.
# Set here, before any test module imports them (subprocesses inherit it).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
