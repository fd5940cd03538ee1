"""A claim's record in words: the one place the sentences of a verification are written."""

from __future__ import annotations

from ..config.claims import Claim


def claim_text(claim: Claim) -> str:
    """What the check found, as a reader is told it ('verified: 4', 'claimed, not verified')."""
    if claim.legacy_text is not None:
        return claim.legacy_text
    if claim.status == "verified":
        text = f"verified: {claim.value}"
    elif claim.status == "contradicted":
        text = f"contradicted: server reports {claim.value}"
    elif claim.status == "on_command_line":
        text = f"set on the command line: {claim.value} (the server does not report it)"
    elif claim.resolved_auto:
        text = f"claimed, not verified (auto; the server resolved it to {claim.value})"
    else:
        text = "claimed, not verified"
    if claim.scheduler_limit is not None:
        text += f"; the scheduler runs at most {claim.scheduler_limit} at once"
    return text
