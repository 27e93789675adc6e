"""The Anthropic client: credentials, base URL, retries, and API errors as user sentences.

We call ``messages.create`` without streaming and with an explicit timeout (``timeout``
seconds, default 600): the SDK refuses non-streaming requests whose ``max_tokens`` could take
more than 10 minutes only when it picks the timeout itself, and an explicit one is our
documented choice. Retries (429, 5xx, 529 overloaded, connection errors; ``retry-after``
honoured) are the SDK's own, ``max_retries`` times.

``anthropic`` is imported inside functions: it costs about 2 s.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from journal_agent.errors import UserError

if TYPE_CHECKING:
    import anthropic

DEFAULT_TIMEOUT_S = 600.0
DEFAULT_MAX_RETRIES = 2


class ModelCallError(UserError):
    """The API call itself failed; it ends the whole run (sub-agents included)."""


def make_client(
    *,
    max_retries: int = DEFAULT_MAX_RETRIES,
    base_url: str | None = None,
    api_key: str | None = None,
    http_client: Any = None,
) -> anthropic.Anthropic:
    """A client from ``ANTHROPIC_API_KEY`` (or ``ANTHROPIC_AUTH_TOKEN``) and
    ``ANTHROPIC_BASE_URL``; a missing key is one sentence and exit code 2."""
    import anthropic

    key = api_key or os.environ.get("ANTHROPIC_API_KEY")
    token = None if key else os.environ.get("ANTHROPIC_AUTH_TOKEN")
    if not key and not token:
        raise UserError(
            "ANTHROPIC_API_KEY is not set; export your Anthropic API key "
            "(or use --dry-run to see the first request without calling the API).",
            exit_code=2,
        )
    kwargs: dict[str, Any] = {"max_retries": max_retries}
    if key:
        kwargs["api_key"] = key
    else:
        kwargs["auth_token"] = token
    url = base_url or os.environ.get("ANTHROPIC_BASE_URL")
    if url:
        kwargs["base_url"] = url
    if http_client is not None:
        kwargs["http_client"] = http_client
    return anthropic.Anthropic(**kwargs)


def create_message(
    client: anthropic.Anthropic, request: Mapping[str, Any], timeout: float
) -> anthropic.types.Message:
    """One ``messages.create`` call; failures the user must act on become ModelCallError.

    ``request`` is a :class:`~journal_agent.runtime.wire.RequestBody`, whose blocks are JSON
    objects: the SDK's param types name each block's fields, so the body is passed as the
    mapping it is, and the API checks the blocks."""
    import anthropic

    try:
        return client.messages.create(**request, timeout=timeout)
    except anthropic.AuthenticationError as exc:
        raise ModelCallError(
            "the Anthropic API rejected the API key (401); check ANTHROPIC_API_KEY.",
            exit_code=2,
        ) from exc
    except anthropic.PermissionDeniedError as exc:
        raise ModelCallError(
            f"the API key may not use this model or endpoint (403: {_detail(exc)}); "
            "check the key's workspace permissions or pick another --model.",
            exit_code=2,
        ) from exc
    except anthropic.NotFoundError as exc:
        raise ModelCallError(
            f"the API does not know model '{request.get('model')}' (404: {_detail(exc)}); "
            "pass a valid --model or fix the alias in settings.json.",
        ) from exc
    except anthropic.BadRequestError as exc:
        raise ModelCallError(
            f"the API rejected the request (400: {_detail(exc)}); the transcript holds the "
            "exact request.",
        ) from exc
    except anthropic.APIStatusError as exc:
        raise ModelCallError(
            f"the Anthropic API kept failing ({exc.status_code}: {_detail(exc)}) after "
            f"{client.max_retries} retries; try again later or raise --max-retries.",
        ) from exc
    except anthropic.APIConnectionError as exc:
        raise ModelCallError(
            f"could not reach the Anthropic API at {client.base_url} ({exc}); check the "
            "network or ANTHROPIC_BASE_URL.",
        ) from exc


def _detail(exc: anthropic.APIStatusError) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
    return str(getattr(exc, "message", exc))
