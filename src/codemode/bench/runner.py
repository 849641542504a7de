"""Running the token benchmark's scenarios: each one's catalog of servers, its direct
transcript once, then code mode (``codemode serve``) under every profile, and what the
report says beside the token counts (privacy, the article's target, the catalog's size).

The scenarios themselves (the tasks and both agents' scripts) are in
:mod:`codemode.bench.scenarios`.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from codemode.bench.catalogs import (
    Sizes,
    article_catalog,
    bench_server,
    realistic_catalog,
    wide_catalog,
)
from codemode.bench.scenarios import NAMES, SCENARIOS, Scenario, pii_in
from codemode.bench.tokens import (
    PROFILES,
    Agent,
    BenchError,
    ScenarioResult,
    Transcript,
    codemode_caller,
    codemode_client,
    connect_all,
    direct_caller,
    direct_definitions,
    direct_instructions,
    reduction,
    single_error,
)

ARTICLE_DIRECT = 150_000
"""The direct figure of the reference article (150,000 -> 2,000 tokens, 98.7%)."""


async def run_direct(
    scenario: Scenario, catalog: dict[str, dict[str, Any]], scratch: Path
) -> tuple[Transcript, int]:
    """The direct transcript of one scenario, and the number of tools it was given."""
    async with connect_all(catalog, scratch / "logs") as connected:
        defs = direct_definitions(connected)
        agent = Agent(
            "direct",
            defs,
            scenario.task,
            direct_caller(connected),
            instructions=direct_instructions(connected),
        )
        return await scenario.direct(agent), len(defs)


async def run_codemode(
    scenario: Scenario,
    catalog: dict[str, dict[str, Any]],
    scratch: Path,
    executor: str,
    profile: str,
) -> Transcript:
    """The code-mode transcript of one scenario through ``codemode serve --tools profile``."""
    base = Path(tempfile.mkdtemp(prefix=f"ws-{profile}-", dir=scratch))
    client_of = codemode_client(catalog, base, executor, profile, privacy=scenario.privacy)
    async with client_of as (client, cm_defs):
        agent = Agent(
            f"code mode ({profile})",
            cm_defs,
            scenario.task,
            codemode_caller(client),
            instructions=[client.instructions or ""],
            code_tool="run_code",
        )
        return await scenario.codemode(agent, profile)


def build_catalog(
    scenario: Scenario, sizes: Sizes, scratch: Path
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """The servers a scenario connects, and what to report about them."""
    if scenario.catalog == "wide":
        catalog = wide_catalog(sizes.catalog_servers)
        return catalog, {}
    if scenario.catalog == "article":
        replayed, n_real = article_catalog(sizes.article_tools, sizes.article_servers)
        catalog = {
            "docs": bench_server("docs_server.py", "--words", str(sizes.article_words)),
            "crm": bench_server("crm_server.py"),
            **replayed,
        }
        about = {
            "replayed_real_servers": f"{len(replayed)} servers / {n_real} tools "
            f"({', '.join(replayed)})",
            "transcript_words": sizes.article_words,
        }
        return catalog, about
    return realistic_catalog(sizes, scratch), {}


async def run_scenario(
    scenario: Scenario,
    sizes: Sizes,
    scratch: Path,
    executor: str = "sandbox",
    transcripts: Path | None = None,
    profiles: tuple[str, ...] = PROFILES,
) -> list[ScenarioResult]:
    """One scenario: the direct transcript once, then code mode under each profile."""
    catalog, about = build_catalog(scenario, sizes, scratch)
    direct, n_tools = await run_direct(scenario, catalog, scratch)
    _dump(transcripts, f"{scenario.name}.direct", direct)
    small: tuple[Transcript, dict[str, dict[str, Any]]] | None = None
    if scenario.catalog == "wide":
        small_catalog = wide_catalog(sizes.catalog_small_servers)
        small_direct, _ = await run_direct(scenario, small_catalog, scratch)
        small = (small_direct, small_catalog)
    results = []
    for profile in profiles:
        received = scratch / f"crm-received-{profile}.jsonl"
        run_catalog = _recording_crm(catalog, received) if scenario.privacy else catalog
        code = await run_codemode(scenario, run_catalog, scratch, executor, profile)
        _dump(transcripts, f"{scenario.name}.codemode-{profile}", code)
        extra: dict[str, Any] = {
            "catalog": f"{len(catalog)} servers / {n_tools} tools",
            **about,
        }
        if small is not None:
            small_direct, small_catalog = small
            code_s = await run_codemode(scenario, small_catalog, scratch, executor, profile)
            _dump(transcripts, f"{scenario.name}-small.codemode-{profile}", code_s)
            delta = 100 * (code.tokens - code_s.tokens) / code_s.tokens
            extra |= {
                "small_catalog": f"{len(small_catalog)} servers",
                "tokens_direct_small_catalog": small_direct.tokens,
                "tokens_codemode_small_catalog": code_s.tokens,
                "codemode_catalog_size_delta_pct": round(delta, 2),
            }
        if scenario.privacy:
            extra |= _privacy(direct, code, received)
        if scenario.target_pct is not None:
            extra |= _target(scenario.target_pct, direct, code)
        results.append(
            ScenarioResult.from_transcripts(
                scenario.name, scenario.title, direct, code, profile, **extra
            )
        )
    return results


def _privacy(direct: Transcript, code: Transcript, received: Path) -> dict[str, Any]:
    """PII values in each context, and how many real values the CRM (a sink) received
    from code mode, where privacy was on."""
    values = _pii_values(direct)
    d_distinct, d_count = pii_in(direct, values)
    c_distinct, c_count = pii_in(code, values)
    got = received.read_text(encoding="utf-8") if received.exists() else ""
    in_crm = sum(1 for v in values if v in got)
    return {
        "pii_values_total": len(values),
        "pii_in_context_direct": f"{d_distinct} distinct, {d_count} occurrences",
        "pii_in_context_codemode": f"{c_distinct} distinct, {c_count} occurrences "
        "(privacy on: tokens only)",
        "pii_direct": d_distinct,
        "pii_codemode": c_distinct,
        "crm_received_real_values": f"{in_crm} of {len(values)}",
        "pii_in_crm": in_crm,
    }


def _recording_crm(catalog: dict[str, dict[str, Any]], path: Path) -> dict[str, dict[str, Any]]:
    """``catalog`` whose CRM server appends every contact it imports to ``path``."""
    crm = dict(catalog["crm"])
    crm["env"] = {**crm.get("env", {}), "CRM_RECEIVED": str(path)}
    return {**catalog, "crm": crm}


def _target(pct: float, direct: Transcript, code: Transcript) -> dict[str, Any]:
    """Whether code mode reached ``pct`` reduction, against this run's direct transcript and
    against the reference article's 150,000-token direct figure."""
    allowed = int(direct.tokens * (1 - pct / 100))
    fixed = code.breakdown().get("instructions", 0) + code.breakdown().get("definitions", 0)
    met = code.tokens <= allowed
    why = (
        "met"
        if met
        else f"{pct}% needs code mode <= {allowed:,} tokens; codemode's own instructions and "
        f"tool definitions alone are {fixed:,}, discovery + code + output {code.tokens - fixed:,}"
    )
    return {
        "target_pct": pct,
        "target_met": met,
        "target_note": why,
        "reduction_pct_vs_article_150k": reduction(ARTICLE_DIRECT, code.tokens),
    }


def _pii_values(direct: Transcript) -> set[str]:
    """The e-mails and phones the customer server returned (its list_customers result)."""
    result = next(e for e in direct.entries if e.kind == "result")
    return {p[k] for p in json.loads(result.text)["customers"] for k in ("email", "phone")}


def _dump(folder: Path | None, name: str, transcript: Transcript) -> None:
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.txt").write_text(transcript.text())


async def run_benchmark(
    names: list[str] | None = None,
    sizes: Sizes | None = None,
    *,
    executor: str = "sandbox",
    profiles: tuple[str, ...] = PROFILES,
    transcripts: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[ScenarioResult]:
    """Run the named scenarios (all by default) in the published order, each under every
    profile in ``profiles``."""
    unknown = set(names or []) - set(NAMES)
    if unknown:
        raise BenchError(f"unknown scenario(s) {sorted(unknown)}; choose from {NAMES}")
    bad = set(profiles) - set(PROFILES)
    if bad or not profiles:
        raise BenchError(f"unknown serve profile(s) {sorted(bad)}; choose from {PROFILES}")
    sizes = sizes or Sizes()
    results: list[ScenarioResult] = []
    with tempfile.TemporaryDirectory(prefix="codemode-bench-") as tmp:
        for scenario in SCENARIOS:
            if names and scenario.name not in names:
                continue
            if progress:
                progress(f"running {scenario.name} ...")
            scratch = Path(tmp) / scenario.name
            scratch.mkdir()
            try:
                results += await run_scenario(
                    scenario, sizes, scratch, executor, transcripts, profiles
                )
            except BaseExceptionGroup as group:  # anyio task groups wrap the real error
                raise single_error(group) from None
    return results
