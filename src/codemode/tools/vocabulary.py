"""General software vocabulary for discovery: synonyms, phrasal verbs, kinds of values.

People ask for tools in other words than the tools' authors used: "remove" for
``delete_*``, "folder" for "directory", "turn off the flag" for ``update_flag``,
"read config.yaml" for ``read_file``. This module holds the small hand-written tables
that bridge the gap. They are general English about software (CRUD verbs, common nouns
and abbreviations, phrasal verbs), never fixes for one query; the discovery benchmark's
held-out queries say whether they generalise. Used by the lexical index
(:mod:`codemode.tools.search`) and by the benchmark's embedding rankers.
"""

from __future__ import annotations

import re
from collections.abc import Callable

SYNONYMS = (
    # verbs
    "get fetch retrieve read show view display",
    "list enumerate browse",
    "search find query lookup locate",
    "create add new make insert generate post",
    "update edit modify change set patch",
    "delete remove drop erase clear purge destroy flush",
    "send post notify",
    "run execute trigger start launch invoke evaluate eval",
    "stop kill terminate cancel abort halt",
    "download export save",
    "upload import attach",
    "enable activate",
    "disable deactivate",
    "schedule book reserve",
    "click tap press",
    "navigate visit goto",
    "fill type enter",
    "memory remember memorize",
    "copy duplicate clone",
    "compare diff difference",
    "close resolve finish complete",
    "login signin authenticate auth",
    "subscribe watch follow",
    "summarize summary",
    # nouns
    "directory folder dir",
    "repository repo",
    "issue ticket bug",
    "comment note reply",
    "user member people person account everyone everybody",
    "message msg",
    "documentation docs doc manual",
    "document doc",
    "configuration config settings setting preferences",
    "information info details metadata",
    "database db",
    "environment env",
    "application app",
    "image picture photo img",
    "event meeting appointment",
    "calendar agenda",
    "statistics stats metrics analytics",
    "input field textbox",
    "email mail",
    "device phone mobile",
    "url link address",
    "spreadsheet sheet workbook",
    "chart plot diagram graph",
    "cost spend expense price billing",
    "error exception failure crash",
    "task todo",
    "current now latest",
    "anomaly unusual abnormal outlier spike",
)
"""Groups of words that name the same thing in tool APIs; the first word of a group is its
plain form (``codemode.tools.search.plain_query``)."""


PHRASES = {
    "turn off": "disable",
    "turn on": "enable",
    "switch off": "disable",
    "switch on": "enable",
    "shut down": "stop",
    "look up": "search",
    "find out": "search",
    "set up": "configure",
    "log in": "login",
    "sign in": "login",
    "log out": "logout",
    "sign out": "logout",
    "sign up": "register",
    "clean up": "delete",
    "get rid of": "delete",
    "fill in": "fill",
    "fill out": "fill",
    "go to": "navigate",
    "go back": "back",
    "write down": "save",
    "what's in": "list contents",
    "what is in": "list contents",
    "pr": "pull request",
    "mr": "merge request",
}
"""Phrasal verbs and abbreviations -> the words an API names them with (they replace them
in the query)."""

_PHRASE = re.compile(r"\b(" + "|".join(re.escape(p) for p in PHRASES) + r")\b", re.IGNORECASE)
_EXTENSIONS = (
    "yaml yml json md txt csv tsv xml html htm py js ts jsx tsx pdf png jpg jpeg gif svg "
    "doc docx xls xlsx ppt pptx log ini toml cfg conf sh zip tar gz sql"
)
_KINDS = (
    (re.compile(r"\bhttps?://\S+"), "url"),
    (re.compile(r"(?<![\w&])#[A-Za-z][\w-]*"), "channel"),
    (re.compile(r"\b[\w.+-]+@[\w-]+\.[\w.]+\b"), "email"),
    # A capitalised word before .js is a library (Next.js, Node.js), not a file.
    (
        re.compile(
            r"\b(?![A-Z][a-z]+\.js\b)[\w-]+(?:\.[\w-]+)*\.(?i:"
            + "|".join(_EXTENSIONS.split())
            + r")\b"
        ),
        "file",
    ),
)


def canonical(query: str) -> tuple[str, str]:
    """``query`` as what it asks for, and the values it names apart.

    A value (a URL, an e-mail address, a file name, a #channel) is an argument, not what
    the tool does: it is replaced by its kind, which tool descriptions use ("read
    config.yaml" -> "read file"), and given back apart so a ranker can weigh it less. The
    plain verb of each phrasal verb replaces it ("turn off the flag" -> "disable the
    flag"): its words apart mean something else ("turn" is a route's, "off" nothing)."""
    values: list[str] = []

    def kind_of(kind: str) -> Callable[[re.Match[str]], str]:
        def sub(match: re.Match[str]) -> str:
            values.append(match.group(0))
            return kind

        return sub

    for pattern, kind in _KINDS:
        query = pattern.sub(kind_of(kind), query)
    query = _PHRASE.sub(lambda m: PHRASES[m.group(0).lower()], query.replace("\u2019", "'"))
    return query, " ".join(values)
