"""The ONE place that lists agent features still being built elsewhere.

An end-to-end step whose feature is listed here is skipped and prints
"PENDING: <step>"; a step whose feature is not listed must pass, or the run
fails. Once a feature is merged, delete it from this set (or try it first with
E2E_PENDING, e.g. E2E_PENDING="list,resume" make e2e; E2E_PENDING="" = none).

  terminal  shell tool delegated to the client's terminal/* when it offers it
  load      session/load (loadSession: true) replaying a stored session
  list      session/list (sessionCapabilities.list)
  resume    session/resume (sessionCapabilities.resume)
"""
import os

PENDING_FEATURES = set()

if "E2E_PENDING" in os.environ:
    PENDING_FEATURES = {f.strip() for f in os.environ["E2E_PENDING"].split(",") if f.strip()}


def pending(feature, step):
    """True (and says so) when `step` needs a pending feature."""
    if feature in PENDING_FEATURES:
        print(f"PENDING: {step} (feature '{feature}' is listed in e2e/pending.py)", flush=True)
        return True
    return False
