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

SYNONYMS = (
    # verbs
    "get fetch retrieve read show view display",
    "list enumerate browse",
    "search find query lookup locate",
    "create add new make insert generate",
    "update edit modify change set patch",
    "delete remove drop erase clear purge destroy",
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
    "remember memorize memory",
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
    "meeting event appointment",
    "calendar agenda",
    "statistics stats metrics analytics",
    "field input textbox",
    "email mail",
    "phone mobile device",
    "url link address",
    "spreadsheet sheet workbook",
    "chart plot diagram graph",
    "cost spend expense price billing",
    "error exception failure crash",
    "task todo",
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
}
"""Phrasal verbs -> the verb an API names the action with (added to the query)."""

_PHRASE = re.compile(r"\b(" + "|".join(re.escape(p) for p in PHRASES) + r")\b")
_EXTENSIONS = (
    "yaml yml json md txt csv tsv xml html htm py js ts jsx tsx pdf png jpg jpeg gif svg "
    "doc docx xls xlsx ppt pptx log ini toml cfg conf sh zip tar gz sql"
)
_KINDS = (
    (re.compile(r"\bhttps?://\S+"), "url"),
    (re.compile(r"\b[\w.+-]+@[\w-]+\.[\w.]+\b"), "email"),
    (re.compile(r"\b[\w-]+\.(?:" + "|".join(_EXTENSIONS.split()) + r")\b", re.I), "file"),
)


def canonical(query: str) -> str:
    """``query`` plus the plain words of its phrasal verbs and of the kinds of values it
    names (a URL, an e-mail address, a file name), which tool descriptions use."""
    low = query.lower().replace("\u2019", "'")
    extra = [PHRASES[m] for m in _PHRASE.findall(low)]
    extra += [kind for pattern, kind in _KINDS if pattern.search(query)]
    return " ".join([query, *extra]) if extra else query
