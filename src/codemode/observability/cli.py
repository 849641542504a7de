"""``codemode stats``: a running server's counters as a table (or JSON).

Metrics live in the process that counts them, so the numbers come from where the work
runs: ``codemode serve --transport http``'s ``/metrics``. The token is the server's
(``CODEMODE_TOKEN``) or, with ``observability.metrics_auth: token``, the metrics token.
"""

from __future__ import annotations

import json

import click

DEFAULT_URL = "http://127.0.0.1:8765"


@click.command("stats")
@click.option(
    "--url",
    envvar="CODEMODE_URL",
    default=DEFAULT_URL,
    show_default=True,
    help="The server (`codemode serve --transport http`); env CODEMODE_URL.",
)
@click.option(
    "--token",
    envvar=["CODEMODE_METRICS_TOKEN", "CODEMODE_TOKEN"],
    default=None,
    help="Bearer token for /metrics; env CODEMODE_METRICS_TOKEN or CODEMODE_TOKEN.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
@click.option("--timeout", type=float, default=10.0, show_default=True, help="Seconds to wait.")
def stats(url: str, token: str | None, as_json: bool, timeout: float) -> None:
    """Show a codemode server's runs, tool calls, sessions, workers and memory counters."""
    import httpx

    from .summary import samples_of_text, summarize, table

    target = url.rstrip("/") + "/metrics"
    headers = {"authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.get(target, headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        raise click.ClickException(
            f"cannot reach {target}: {exc}. Is `codemode serve --transport http` running "
            "there? Pass its address with --url (or CODEMODE_URL)."
        ) from None
    if response.status_code == 401:
        raise click.ClickException(
            f"{target} refused the token (401): pass the server's token with --token or "
            "CODEMODE_TOKEN (the metrics token when observability.metrics_auth is 'token')."
        )
    if response.status_code != 200:
        raise click.ClickException(
            f"{target} answered {response.status_code}: {response.text[:200]}"
        )
    try:
        rows = summarize(samples_of_text(response.text))
    except ValueError as exc:
        raise click.ClickException(
            f"{target} did not answer Prometheus metrics ({exc}); is it a codemode server?"
        ) from None
    if as_json:
        click.echo(json.dumps({"url": url, "rows": [r.as_dict() for r in rows]}, indent=2))
    else:
        click.echo(table(rows))


__all__ = ["stats"]
